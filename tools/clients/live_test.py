"""The generated Python client against local-api (scripts/clients-test.sh, under with-local-api.sh).

Each of the six operations: a 200 parsed into a record holding the submitted values (PATCH merging),
a 400 and a 404 parsed into envelopes with `errorDetails.code`; If-Match on PUT and PATCH (412).
Any status the document does not list raises (raise_on_unexpected_status)."""

import os
import re
import unittest
import uuid
from pathlib import Path

from agent_server_update_api_client import Client
from agent_server_update_api_client import models as m
from agent_server_update_api_client.api.default import patch_api_key, patch_mcp_server, patch_model
from agent_server_update_api_client.api.default import update_api_key, update_mcp_server, update_model

SAMPLES = (Path(__file__).resolve().parents[2] / "local/src/samples.rs").read_text(encoding="utf-8")
IDS = {name: uuid.UUID(value) for name, value in re.findall(r'pub const (\w+_ID): &str = "([0-9a-f-]{36})";', SAMPLES)}
SECRET = "sk-generated-client-" + uuid.uuid4().hex
HEADERS = {"Authorization": "Bearer from-the-client", "X-Team": "agents"}
PARAMETERS = {"temperature": 0.25, "max_tokens": 8192, "stop": ["\n\n", None], "reasoning": {"effort": "high"}}
MODEL = {"name": "By the client", "model_id": "gemini-2.5-pro", "provider_type": "Gemini", "parameters": PARAMETERS}
# Per route: its sample, project scope, success and 400 envelopes; per operation, in order: a body, what the record
# then holds (the MCP server's name was not sent and keeps its value), a refused body and its field errors.
ROUTES = [
    ("API_KEY_ID", False, m.ApiKeyUpdated, m.BadRequestNoProjectEnvelope, [
        (update_api_key, m.ApiKeyUpdate, {"name": "Rotated by the client", "api_key": SECRET, "enabled": False},
         {"name": "Rotated by the client", "enabled": False}, {"name": "   "}, [("name", "blank")]),
        (patch_api_key, m.ApiKeyMergePatch, {"enabled": True},
         {"name": "Rotated by the client", "enabled": True}, {"name": None}, [("name", "invalid_type")]),
    ]),
    ("MCP_SERVER_ID", True, m.McpServerUpdated, m.BadRequestEnvelope, [
        (update_mcp_server, m.McpServerUpdate, {"endpoint": "https://mcp.example.com/v3/sse", "headers": HEADERS},
         {"endpoint": "https://mcp.example.com/v3/sse", "headers": HEADERS, "name": "Docs search"},
         {"endpoint": "ftp://x"}, [("endpoint", "invalid_url")]),
        (patch_mcp_server, m.McpServerMergePatch, {"headers": {"authorization": "Bearer b"}},
         {"headers": {"authorization": "Bearer b", "X-Team": "agents"}},
         {"headers": {"": "x"}}, [("headers.", "invalid_name")]),
    ]),
    ("MODEL_ID", True, m.ModelUpdated, m.BadRequestEnvelope, [
        (update_model, m.ModelUpdate, MODEL, MODEL,
         {"parameters": {"nested": {"": 1}}}, [("parameters.nested", "empty_key")]),
        (patch_model, m.ModelMergePatch, {"parameters": {"temperature": 0.7, "stop": None}},
         {"parameters": {"temperature": 0.7, "max_tokens": 8192, "reasoning": {"effort": "high"}}},
         {"name": None}, [("name", "invalid_type")]),
    ]),
]


def client():
    return Client(base_url=os.environ["API_URL"], headers={"Authorization": f"Bearer {os.environ['API_TOKEN']}"},
                  raise_on_unexpected_status=True, timeout=30.0)


class LiveTest(unittest.TestCase):
    def assert_error(self, response, envelope, status, code):
        self.assertEqual(response.status_code, status, response.content)
        self.assertIsInstance(response.parsed, envelope)
        self.assertEqual((response.parsed.error, response.parsed.status, response.parsed.data), (True, status, None))
        self.assertEqual(str(response.parsed.error_details.code), code)

    def test_each_operation(self):
        for id_name, scoped, updated, bad_request, operations in ROUTES:
            scope = {"project_id": IDS["PROJECT_ID"]} if scoped else {}
            for operation, model, body, holds, invalid, fields in operations:
                with self.subTest(operation.__name__), client() as c:
                    response = operation.sync_detailed(IDS[id_name], client=c, body=model.from_dict(body), **scope)
                    self.assertEqual(response.status_code, 200, response.content)
                    self.assertIsInstance(response.parsed, updated)
                    self.assertEqual((response.parsed.error, response.parsed.status), (False, 200))
                    data = response.parsed.data.to_dict()
                    expected = {"id": str(IDS[id_name]), **{k: str(v) for k, v in scope.items()}, **holds}
                    self.assertEqual({k: data[k] for k in expected}, expected)
                    self.assertGreater(data["updated_at"], data["created_at"])
                    self.assertRegex(response.headers["ETag"], r'^"[0-9]+"$')
                    self.assertNotIn(SECRET.encode(), response.content)

                    response = operation.sync_detailed(IDS[id_name], client=c, body=model.from_dict(invalid), **scope)
                    self.assert_error(response, bad_request, 400, "validation_failed")
                    self.assertEqual([(f.field, str(f.code)) for f in response.parsed.error_details.fields], fields)
                    response = operation.sync_detailed(uuid.uuid4(), client=c, body=model.from_dict(body), **scope)
                    self.assert_error(response, m.NotFoundEnvelope, 404, "not_found")

    def test_if_match(self):
        with client() as c:
            args = {"id": IDS["MODEL_ID"], "client": c, "project_id": IDS["PROJECT_ID"]}
            etag = update_model.sync_detailed(body=m.ModelUpdate(name="Pinned"), **args).headers["ETag"]
            response = patch_model.sync_detailed(if_match=etag, body=m.ModelMergePatch(name="Fresh"), **args)
            self.assertIsInstance(response.parsed, m.ModelUpdated, response.content)
            self.assertEqual(response.parsed.data.name, "Fresh")
            for operation, model in ((patch_model, m.ModelMergePatch), (update_model, m.ModelUpdate)):
                response = operation.sync_detailed(if_match=etag, body=model(name="Stale"), **args)
                self.assert_error(response, m.PreconditionFailedEnvelope, 412, "precondition_failed")


if __name__ == "__main__":
    unittest.main()
