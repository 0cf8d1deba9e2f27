"""make events-test: change events end to end, on real parts.

Updates go through a running local-api (API_URL, with API_TOKEN if set) into
DynamoDB Local (DYNAMODB_URL, or AWS_ENDPOINT_URL_DYNAMODB), whose tables
have NEW_IMAGE streams (local/src/setup.rs, as template.yaml gives them on
AWS). The test reads each table's stream with boto3, and checks that:

- a 200 writes exactly one MODIFY record, on its own table, with the version
  of the response's ETag, and a 400, 404 or 412 writes none anywhere;
- the pipe of that table in template.yaml (its filter and its InputTemplate,
  applied by pipes.py as EventBridge Pipes documents it) turns the record
  into an event that is valid JSON, carries exactly the allow-listed fields
  with the values of the update, and validates against events.schema.json;
- the records loaded before the test (INSERTs) pass no pipe's filter;
- none of the secrets or other contents the test wrote (an api_key, an MCP
  header name and value, a name, an endpoint, a parameter) appear in any
  event, although the stream records carry them.

scripts/events-test.sh runs it under scripts/with-local-api.sh. Run it with
the tools virtualenv's Python (boto3, jsonschema and the SAM CLI's YAML
loader come with aws-sam-cli there).
"""

import json
import subprocess
import os
import secrets
import sys
import time
import urllib.error
import urllib.request
import uuid

import boto3
import jsonschema

import pipes

# The sample records (local/src/samples.rs).
API_KEY_ID = "3f1c2a9e-7b4d-4e8a-9c21-5d6e7f8a9b01"
PROJECT_ID = "8a4b2c1d-3e5f-4a6b-8c7d-9e0f1a2b3c4d"
MCP_SERVER_ID = "5b6c7d8e-9f01-4a2b-8c3d-4e5f6a7b8c9d"
MODEL_ID = "7c8d9e0f-1a2b-4c3d-9e4f-5a6b7c8d9e0f"
OTHER_MODEL_ID = "9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c6b"

ROUTES = {
    "ApiKeysTable": "/api/agent-server/api-keys/",
    "McpServersTable": "/api/agent-server/mcp-servers/",
    "ModelsTable": "/api/agent-server/models/",
}

# What the test writes and no event may carry. Fresh each run, so a match
# cannot come from anywhere else.
RUN = secrets.token_hex(8)
SECRET_API_KEY = f"sk-events-test-{RUN}"
HEADER_NAME = f"X-Events-Test-{RUN}"
HEADER_VALUE = f"Bearer events-test-header-{RUN}"
NAME = f"Events test {RUN}"
ENDPOINT = f"https://mcp-{RUN}.example.com/sse"
PARAMETER = f"events-test-parameter-{RUN}"
WRITTEN = [SECRET_API_KEY, HEADER_NAME, HEADER_VALUE, NAME, ENDPOINT, PARAMETER]

# How long a record may take to reach the stream, and how long a rejected
# request gets to (wrongly) write one. DynamoDB Local writes the record with
# the item; these are margins.
RECORD_WAIT = 10.0
QUIET_WAIT = 1.0


class Failed(Exception):
    pass


def project_token(project):
    """A token granting only `project`, signed with the running local-api's secret."""
    secret = os.environ.get("API_JWT_SECRET")
    if not secret:
        raise Failed("API_JWT_SECRET is not set (scripts/with-local-api.sh sets it)")
    local_api = os.path.join(os.path.dirname(__file__), "..", "..", "target", "debug", "local-api")
    return subprocess.run([local_api, "token", "--jwt-secret", secret, "--projects", project],
                          check=True, capture_output=True, text=True).stdout.strip()


def put(path, body, query=None, if_match=None, token=None):
    """PUT through the API: (status, ETag version or None, parsed envelope)."""
    url = os.environ["API_URL"].rstrip("/") + path + (f"?project_id={query}" if query else "")
    headers = {"Content-Type": "application/json"}
    token = token or os.environ.get("API_TOKEN")
    if token:
        headers["Authorization"] = f"Bearer {token}"
    if if_match is not None:
        headers["If-Match"] = if_match
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers, method="PUT")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            status, etag, text = response.status, response.headers.get("ETag"), response.read()
    except urllib.error.HTTPError as error:
        status, etag, text = error.code, error.headers.get("ETag"), error.read()
    version = etag.strip('"') if etag else None
    return status, version, json.loads(text)


class Streams:
    """A reader per table, and the records each has seen."""

    def __init__(self, pipes_by_table):
        endpoint = os.environ.get("DYNAMODB_URL") or os.environ.get("AWS_ENDPOINT_URL_DYNAMODB")
        if not endpoint:
            raise Failed("set DYNAMODB_URL (or AWS_ENDPOINT_URL_DYNAMODB) to the DynamoDB Local endpoint")
        options = dict(endpoint_url=endpoint, region_name=os.environ.get("AWS_REGION", "us-east-1"),
                       aws_access_key_id="local", aws_secret_access_key="local")
        dynamodb = boto3.client("dynamodb", **options)
        streams = boto3.client("dynamodbstreams", **options)
        self.readers = {}
        for table, pipe in pipes_by_table.items():
            description = dynamodb.describe_table(TableName=pipe.table_name)["Table"]
            spec = description.get("StreamSpecification", {})
            if not spec.get("StreamEnabled") or spec.get("StreamViewType") != "NEW_IMAGE":
                raise Failed(f"{pipe.table_name} has no NEW_IMAGE stream ({spec}): local-api --setup creates "
                             "the tables with one (local/src/setup.rs); rebuild it (cargo build -p local-api)")
            self.readers[table] = pipes.StreamReader(streams, description["LatestStreamArn"])

    def read(self):
        return {table: reader.read() for table, reader in self.readers.items()}

    def wait_for(self, table):
        """Records of every table, once `table` has one (or time is up), after
        a quiet moment in which more may (wrongly) arrive."""
        seen = {t: [] for t in self.readers}
        deadline = time.monotonic() + RECORD_WAIT
        while not seen[table] and time.monotonic() < deadline:
            for t, records in self.read().items():
                seen[t] += records
            if not seen[table]:
                time.sleep(0.1)
        time.sleep(QUIET_WAIT)
        for t, records in self.read().items():
            seen[t] += records
        return seen

    def quiet(self):
        time.sleep(QUIET_WAIT)
        return self.read()


def check_event(pipe, record, expected, validator):
    """The event the pipe makes of `record`: passes the filter, renders, has
    exactly the expected detail, fits the schema, carries nothing written."""
    if not pipe.passes(record):
        raise Failed(f"{pipe.name}'s filter drops the MODIFY record {record['eventID']}")
    try:
        event = pipe.event(record)
    except pipes.TemplateError as error:
        raise Failed(str(error)) from None
    if event["detail"] != expected:
        raise Failed(f"{pipe.name} announces {json.dumps(event['detail'])}, expected {json.dumps(expected)}")
    errors = sorted(validator.iter_errors(event), key=lambda e: list(e.path))
    if errors:
        raise Failed(f"{pipe.name}'s event does not fit events.schema.json: {errors[0].message} at "
                     f"{list(errors[0].path)}: {json.dumps(event)}")
    text = json.dumps(event, ensure_ascii=False)
    leaked = [value for value in WRITTEN if value in text]
    if leaked:
        raise Failed(f"{pipe.name}'s event carries what the update wrote, {leaked}: {text}")
    return event


def main():
    for variable in ("API_URL",):
        if not os.environ.get(variable):
            print(f"events-test: set {variable} (scripts/events-test.sh does)", file=sys.stderr)
            return 2
    pipes_by_table = pipes.load_pipes()
    schema = pipes.load_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
    failures, passed = [], 0

    def step(description, action):
        nonlocal passed
        try:
            note = action()
            passed += 1
            print(f"ok    {description}" + (f": {note}" if note else ""))
        except Failed as failure:
            failures.append(description)
            print(f"FAIL  {description}: {failure}")

    if sorted(pipes_by_table) != sorted(ROUTES):
        print(f"events-test: template.yaml has pipes on {sorted(pipes_by_table)}, expected {sorted(ROUTES)}")
        return 1
    try:
        streams = Streams(pipes_by_table)
    except Failed as failure:
        print(f"FAIL  streams: {failure}")
        return 1

    # What was written before the test (the sample records, INSERTs): the
    # pipes must announce none of it.
    def loaded_records_are_dropped():
        loaded = streams.read()
        count = 0
        for table, records in loaded.items():
            for record in records:
                count += 1
                if pipes_by_table[table].passes(record):
                    raise Failed(f"{pipes_by_table[table].name} passes the {record['eventName']} record of the "
                                 f"loaded item {json.dumps(record['dynamodb'].get('Keys'))}")
        if count == 0:
            raise Failed("the streams hold no record of the sample items; are they enabled at table creation?")
        return f"{count} records of the loaded samples, none announced"
    step("loading records is not announced", loaded_records_are_dropped)

    def the_schema_refuses(event, why):
        if validator.is_valid(event):
            raise Failed(f"events.schema.json accepts an event with {why}: {json.dumps(event)}")

    versions = {}

    def updated(table, record_id, body, project=None, if_match=None, fields=None):
        """A 200 and its one MODIFY record, announced as expected."""
        def run():
            status, version, envelope = put(ROUTES[table] + record_id, body, project, if_match)
            if status != 200:
                raise Failed(f"status {status}, expected 200: {json.dumps(envelope)}")
            if version is None:
                raise Failed("no ETag on the 200")
            seen = streams.wait_for(table)
            others = {t: len(r) for t, r in seen.items() if t != table and r}
            if others:
                raise Failed(f"the update wrote records on other tables too: {others}")
            records = seen[table]
            if [r["eventName"] for r in records] != ["MODIFY"]:
                raise Failed(f"expected exactly one MODIFY record, got {[r['eventName'] for r in records]}")
            image = records[0]["dynamodb"].get("NewImage", {})
            if image.get("version") != {"N": version}:
                raise Failed(f"the record's version is {image.get('version')}, the ETag's {version}")
            if int(version) != versions.get((table, record_id), 1) + 1:
                raise Failed(f"version {version} after {versions.get((table, record_id), 1)}")
            versions[(table, record_id)] = int(version)
            for name, value in (fields or {}).items():
                if json.dumps(value) not in json.dumps(image.get(name)):
                    raise Failed(f"the record's {name} is {image.get(name)}, without {value!r}: the check below "
                                 "would prove nothing")
            expected = {"id": record_id, "version": version, "updated_at": envelope["data"]["updated_at"]}
            if project:
                expected["project_id"] = project
            event = check_event(pipes_by_table[table], records[0], expected, validator)
            the_schema_refuses({**event, "detail": {**event["detail"], "api_key": SECRET_API_KEY}},
                               "a field outside the allow-list")
            the_schema_refuses({**event, "detail": {**event["detail"], "version": int(version)}},
                               "a version that is not the string the pipe makes")
            return f"one MODIFY, version {version}; {event['detail-type']!r} {json.dumps(event['detail'])}"
        return run

    def rejected(table, record_id, body, expected_status, project=None, if_match=None, token=None):
        """A 4xx, and no record on any table."""
        def run():
            status, _, envelope = put(ROUTES[table] + record_id, body, project, if_match, token)
            if status != expected_status:
                raise Failed(f"status {status}, expected {expected_status}: {json.dumps(envelope)}")
            seen = {t: len(r) for t, r in streams.quiet().items() if r}
            if seen:
                raise Failed(f"a {status} wrote stream records: {seen}")
            return f"{envelope.get('errorDetails', {}).get('code')}, no record"
        return run

    step("200 on an API key (new secret and name)",
         updated("ApiKeysTable", API_KEY_ID, {"api_key": SECRET_API_KEY, "name": NAME},
                 fields={"api_key": SECRET_API_KEY, "name": NAME}))
    step("200 on an API key (disabled; the stored secret stays out of the event)",
         updated("ApiKeysTable", API_KEY_ID, {"enabled": False}, fields={"api_key": SECRET_API_KEY}))
    step("200 on an MCP server (secret header, endpoint)",
         updated("McpServersTable", MCP_SERVER_ID,
                 {"headers": {"Authorization": HEADER_VALUE, HEADER_NAME: "1"}, "endpoint": ENDPOINT},
                 project=PROJECT_ID, fields={"headers": HEADER_VALUE, "endpoint": ENDPOINT}))
    step("200 on a model (name, parameters)",
         updated("ModelsTable", MODEL_ID, {"name": NAME, "parameters": {"temperature": 0.5, "note": PARAMETER}},
                 project=PROJECT_ID, fields={"name": NAME, "parameters": PARAMETER}))
    step("200 on a model with the current If-Match",
         updated("ModelsTable", MODEL_ID, {"model_id": "claude-sonnet-4-5"}, project=PROJECT_ID,
                 if_match=f'"{versions.get(("ModelsTable", MODEL_ID), 1)}"'))

    stale = f'"{versions.get(("ModelsTable", MODEL_ID), 1) - 1}"'
    step("412 on a model with a stale If-Match",
         rejected("ModelsTable", MODEL_ID, {"name": NAME}, 412, project=PROJECT_ID, if_match=stale))
    step("400 on a model (bad provider_type)",
         rejected("ModelsTable", MODEL_ID, {"provider_type": "openai"}, 400, project=PROJECT_ID))
    step("400 on an API key (a secret with a space)",
         rejected("ApiKeysTable", API_KEY_ID, {"api_key": f"{SECRET_API_KEY} x"}, 400))
    step("400 on an MCP server (id not a UUID)",
         rejected("McpServersTable", "not-a-uuid", {"name": NAME}, 400, project=PROJECT_ID))
    step("404 on a model that does not exist",
         rejected("ModelsTable", str(uuid.uuid4()), {"name": NAME}, 404, project=PROJECT_ID))
    step("403 on a model with a token for another project",
         rejected("ModelsTable", MODEL_ID, {"name": NAME}, 403, project=PROJECT_ID,
                  token=project_token(str(uuid.uuid4()))))
    step("403 on an API key with a token for one project",
         rejected("ApiKeysTable", API_KEY_ID, {"enabled": True}, 403, token=project_token(PROJECT_ID)))
    step("404 on another project's model",
         rejected("ModelsTable", OTHER_MODEL_ID, {"name": NAME}, 404, project=PROJECT_ID))
    step("404 on an API key that does not exist",
         rejected("ApiKeysTable", str(uuid.uuid4()), {"enabled": True}, 404))

    print(f"events-test: {passed} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
