"""The generated Python client against a running local-api (make clients).

Run by scripts/clients-test.sh through scripts/with-local-api.sh, which sets
API_URL and loads the sample records whose ids local/src/samples.rs names.
Each operation is used as a client author would: a 200 whose parsed record
carries the submitted values, a 400 and a 404 whose parsed envelopes carry
`errorDetails.code`. Any status the document does not list raises.
"""

import os
import re
import sys
import unittest
import uuid
from pathlib import Path

from agent_server_update_api_client import Client
from agent_server_update_api_client.api.default import (
    patch_api_key,
    patch_mcp_server,
    patch_model,
    update_api_key,
    update_mcp_server,
    update_model,
)
from agent_server_update_api_client.models import (
    ApiKeyMergePatch,
    ApiKeyUpdate,
    ApiKeyUpdated,
    BadRequestEnvelope,
    BadRequestNoProjectEnvelope,
    Headers,
    HeadersPatch,
    McpServerMergePatch,
    McpServerUpdate,
    McpServerUpdated,
    ModelMergePatch,
    ModelUpdate,
    ModelUpdated,
    NotFoundEnvelope,
    Parameters,
    PreconditionFailedEnvelope,
    ProviderType,
)

ROOT = Path(__file__).resolve().parents[2]
ETAG = re.compile(r'^"[0-9]+"$')


def sample_ids():
    """The sample ids, read from the code that loads them."""
    source = (ROOT / "local/src/samples.rs").read_text(encoding="utf-8")
    ids = dict(re.findall(r'pub const (\w+_ID): &str = "([0-9a-f-]{36})";', source))
    missing = {"API_KEY_ID", "PROJECT_ID", "MCP_SERVER_ID", "MODEL_ID"} - ids.keys()
    if missing:
        sys.exit(f"live_test: local/src/samples.rs does not name {sorted(missing)}")
    return {name: uuid.UUID(value) for name, value in ids.items()}


IDS = sample_ids()


def client():
    return Client(
        base_url=os.environ["API_URL"],
        headers={"Authorization": f"Bearer {os.environ['API_TOKEN']}"},
        raise_on_unexpected_status=True,
        timeout=30.0,
    )


class LiveTest(unittest.TestCase):
    def assert_error(self, response, envelope, status, code):
        self.assertEqual(response.status_code, status, response.content)
        self.assertIsInstance(response.parsed, envelope)
        self.assertTrue(response.parsed.error)
        self.assertEqual(response.parsed.status, status)
        self.assertIsNone(response.parsed.data)
        self.assertEqual(str(response.parsed.error_details.code), code)

    def test_update_api_key(self):
        secret = "sk-generated-client-" + uuid.uuid4().hex
        with client() as c:
            response = update_api_key.sync_detailed(
                IDS["API_KEY_ID"], client=c, body=ApiKeyUpdate(name="Rotated by the client", api_key=secret, enabled=False)
            )
            self.assertEqual(response.status_code, 200, response.content)
            reply = response.parsed
            self.assertIsInstance(reply, ApiKeyUpdated)
            self.assertEqual((reply.error, reply.status, reply.message), (False, 200, "API key updated successfully"))
            self.assertEqual(reply.data.id, str(IDS["API_KEY_ID"]))
            self.assertEqual(reply.data.name, "Rotated by the client")
            self.assertIs(reply.data.enabled, False)
            self.assertRegex(response.headers["ETag"], ETAG)
            self.assertNotIn(secret.encode(), response.content)

            response = update_api_key.sync_detailed(IDS["API_KEY_ID"], client=c, body=ApiKeyUpdate(name="   "))
            self.assert_error(response, BadRequestNoProjectEnvelope, 400, "validation_failed")
            self.assertEqual([f.field for f in response.parsed.error_details.fields], ["name"])
            self.assertEqual(str(response.parsed.error_details.fields[0].code), "blank")

            response = update_api_key.sync_detailed(uuid.uuid4(), client=c, body=ApiKeyUpdate(enabled=True))
            self.assert_error(response, NotFoundEnvelope, 404, "not_found")

    def test_update_mcp_server(self):
        headers = Headers.from_dict({"Authorization": "Bearer from-the-client", "X-Team": "agents"})
        with client() as c:
            response = update_mcp_server.sync_detailed(
                IDS["MCP_SERVER_ID"],
                client=c,
                project_id=IDS["PROJECT_ID"],
                body=McpServerUpdate(endpoint="https://mcp.example.com/v3/sse", headers=headers),
            )
            self.assertEqual(response.status_code, 200, response.content)
            reply = response.parsed
            self.assertIsInstance(reply, McpServerUpdated)
            self.assertEqual(reply.message, "MCP server updated successfully")
            self.assertEqual(reply.data.project_id, str(IDS["PROJECT_ID"]))
            self.assertEqual(reply.data.endpoint, "https://mcp.example.com/v3/sse")
            self.assertEqual(reply.data.name, "Docs search", "fields not sent keep their values")
            self.assertEqual(reply.data.headers.to_dict(), headers.to_dict())

            response = update_mcp_server.sync_detailed(
                IDS["MCP_SERVER_ID"], client=c, project_id=IDS["PROJECT_ID"], body=McpServerUpdate(endpoint="ftp://x")
            )
            self.assert_error(response, BadRequestEnvelope, 400, "validation_failed")
            self.assertEqual([f.field for f in response.parsed.error_details.fields], ["endpoint"])

            response = update_mcp_server.sync_detailed(
                IDS["MCP_SERVER_ID"], client=c, project_id=uuid.uuid4(), body=McpServerUpdate(name="Elsewhere")
            )
            self.assert_error(response, NotFoundEnvelope, 404, "not_found")

    def test_update_model_round_trips_and_honours_if_match(self):
        parameters = {"temperature": 0.25, "max_tokens": 8192, "stop": ["\n\n", None], "reasoning": {"effort": "high"}}
        with client() as c:
            response = update_model.sync_detailed(
                IDS["MODEL_ID"],
                client=c,
                project_id=IDS["PROJECT_ID"],
                body=ModelUpdate(
                    name="Gemini via the client",
                    model_id="gemini-2.5-pro",
                    provider_type=ProviderType.GEMINI,
                    parameters=Parameters.from_dict(parameters),
                ),
            )
            self.assertEqual(response.status_code, 200, response.content)
            reply = response.parsed
            self.assertIsInstance(reply, ModelUpdated)
            self.assertEqual(reply.message, "Model updated successfully")
            self.assertEqual(reply.data.id, str(IDS["MODEL_ID"]))
            self.assertEqual(
                (reply.data.name, reply.data.model_id, reply.data.provider_type),
                ("Gemini via the client", "gemini-2.5-pro", "Gemini"),
            )
            self.assertEqual(reply.data.parameters.to_dict(), parameters)
            self.assertGreater(reply.data.updated_at, reply.data.created_at)
            etag = response.headers["ETag"]
            self.assertRegex(etag, ETAG)

            response = update_model.sync_detailed(
                IDS["MODEL_ID"], client=c, project_id=IDS["PROJECT_ID"], if_match=etag, body=ModelUpdate(name="Pinned")
            )
            self.assertIsInstance(response.parsed, ModelUpdated, response.content)
            self.assertEqual(response.parsed.data.name, "Pinned")
            self.assertEqual(response.parsed.data.parameters.to_dict(), parameters)

            response = update_model.sync_detailed(
                IDS["MODEL_ID"], client=c, project_id=IDS["PROJECT_ID"], if_match=etag, body=ModelUpdate(name="Stale")
            )
            self.assert_error(response, PreconditionFailedEnvelope, 412, "precondition_failed")

            response = update_model.sync_detailed(
                IDS["MODEL_ID"],
                client=c,
                project_id=IDS["PROJECT_ID"],
                body=ModelUpdate(parameters=Parameters.from_dict({"nested": {"": 1}})),
            )
            self.assert_error(response, BadRequestEnvelope, 400, "validation_failed")
            self.assertEqual(str(response.parsed.error_details.fields[0].code), "empty_key")

            response = update_model.sync_detailed(
                uuid.uuid4(), client=c, project_id=IDS["PROJECT_ID"], body=ModelUpdate(name="Nobody")
            )
            self.assert_error(response, NotFoundEnvelope, 404, "not_found")

    def test_patch_changes_one_member_without_sending_the_others(self):
        with client() as c:
            base = {"temperature": 0.5, "max_tokens": 1024, "top_p": 0.9}
            response = update_model.sync_detailed(
                IDS["MODEL_ID"], client=c, project_id=IDS["PROJECT_ID"],
                body=ModelUpdate(parameters=Parameters.from_dict(base)),
            )
            self.assertEqual(response.status_code, 200, response.content)
            etag = response.headers["ETag"]
            response = patch_model.sync_detailed(
                IDS["MODEL_ID"], client=c, project_id=IDS["PROJECT_ID"], if_match=etag,
                body=ModelMergePatch.from_dict({"parameters": {"temperature": 0.7, "top_p": None}}),
            )
            self.assertEqual(response.status_code, 200, response.content)
            self.assertIsInstance(response.parsed, ModelUpdated)
            self.assertEqual(response.parsed.data.parameters.to_dict(), {"temperature": 0.7, "max_tokens": 1024})
            response = patch_model.sync_detailed(
                IDS["MODEL_ID"], client=c, project_id=IDS["PROJECT_ID"], if_match=etag,
                body=ModelMergePatch.from_dict({"parameters": {"max_tokens": 1}}),
            )
            self.assert_error(response, PreconditionFailedEnvelope, 412, "precondition_failed")

            response = update_mcp_server.sync_detailed(
                IDS["MCP_SERVER_ID"], client=c, project_id=IDS["PROJECT_ID"],
                body=McpServerUpdate(headers=Headers.from_dict({"Authorization": "Bearer a", "X-Keep": "k"})),
            )
            self.assertEqual(response.status_code, 200, response.content)
            response = patch_mcp_server.sync_detailed(
                IDS["MCP_SERVER_ID"], client=c, project_id=IDS["PROJECT_ID"],
                body=McpServerMergePatch.from_dict({"headers": {"authorization": "Bearer b"}}),
            )
            self.assertEqual(response.status_code, 200, response.content)
            self.assertIsInstance(response.parsed, McpServerUpdated)
            self.assertEqual(response.parsed.data.headers.to_dict(), {"authorization": "Bearer b", "X-Keep": "k"})

            response = patch_api_key.sync_detailed(
                IDS["API_KEY_ID"], client=c, body=ApiKeyMergePatch(enabled=True)
            )
            self.assertIsInstance(response.parsed, ApiKeyUpdated, response.content)
            self.assertTrue(response.parsed.data.enabled)
            response = patch_model.sync_detailed(
                IDS["MODEL_ID"], client=c, project_id=IDS["PROJECT_ID"],
                body=ModelMergePatch.from_dict({"name": None}),
            )
            self.assert_error(response, BadRequestEnvelope, 400, "validation_failed")


if __name__ == "__main__":
    unittest.main()
