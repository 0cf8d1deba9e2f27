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
  with the values of the update (updated_by: the caller's principal, the
  token's sub in its percent-encoded form; updated_fields: exactly the names
  of the fields the body set), and validates against events.schema.json;
- a caller whose sub holds what a JSON string must escape (`"`, `\`,
  control characters) or non-ASCII text is announced in valid JSON with
  exactly the allow-listed members, though the pipes (as pipes.py renders
  them, like AWS: plain substitution, no escaping) paste updated_by into a
  JSON string unescaped;
- an item changed outside the API (no updated_by, no updated_fields) is
  announced as the schema allows: updated_by "", updated_fields [];
- the records loaded before the test (INSERTs) pass no pipe's filter;
- api_key reaches the table sealed (binary, the plaintext nowhere in the
  record), and a write that does not set it leaves the sealed value as is;
- none of the secrets or other contents the test wrote (an api_key and its
  ciphertext, an MCP header name and value, a name, an endpoint, a
  parameter) appear in any event, although the stream records carry them.

scripts/events-test.sh runs it under scripts/with-local-api.sh. Run it with
the tools virtualenv's Python (boto3, jsonschema and the SAM CLI's YAML
loader come with aws-sam-cli there).
"""

import base64
import datetime
import json
import subprocess
import os
import secrets
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid

import boto3
import jsonschema

import pipes
from steps import Failed, Steps

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


def project_token(project, sub=None):
    """A token granting only `project` (with subject `sub`, if given), signed
    with the running local-api's secret."""
    secret = os.environ.get("API_JWT_SECRET")
    if not secret:
        raise Failed("API_JWT_SECRET is not set (scripts/with-local-api.sh sets it)")
    local_api = os.path.join(os.path.dirname(__file__), "..", "..", "target", "debug", "local-api")
    command = [local_api, "token", "--jwt-secret", secret, "--projects", project] + (["--sub", sub] if sub else [])
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout.strip()


def subject_of(token):
    """The sub claim of a JWT (read, not verified: the test minted it), the
    principal the functions record as updated_by."""
    try:
        payload = token.split(".")[1]
        return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))["sub"]
    except (IndexError, ValueError, KeyError, TypeError) as error:
        raise Failed(f"cannot read the sub of the token {token[:20]}...: {error!r}") from None


# What the functions keep of a principal as it is: visible ASCII but the
# characters JSON escapes (" and \) and the escape itself (%).
PRINCIPAL_AS_IS = "".join(chr(c) for c in range(0x21, 0x7F) if chr(c) not in '"\\%')

# Subjects that would break out of a JSON string, or need escaping in one, if
# pasted raw: the principal's percent-encoded form must make each harmless.
HOSTILE_SUBJECTS = [
    ("a quote", 'agent "quoted"'),
    ("a backslash", "agent\\one"),
    ("a trailing backslash", "agent\\"),
    ("JSON members", '", "admin": true, "project_id": "x'),
    ("control characters", "agent\x01\x1b[31m\ttab\nline\x7f"),
    ("non-ASCII text", "agënt 模型 😀 \u202e\u00a0end"),
    ("a percent sign", "100%25"),
]


def principal_form(sub):
    """The form the functions log, store and publish a principal in: every
    character but visible ASCII, and ", \ and %, percent-encoded as UTF-8."""
    return urllib.parse.quote(sub, safe=PRINCIPAL_AS_IS, encoding="utf-8")


def now_rfc3339():
    now = datetime.datetime.now(datetime.timezone.utc)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


def put(path, body, query=None, if_match=None, token=None, method="PUT"):
    """PUT (or PATCH, a merge patch) through the API: (status, ETag version or
    None, parsed envelope)."""
    url = os.environ["API_URL"].rstrip("/") + path + (f"?project_id={query}" if query else "")
    headers = {"Content-Type": "application/merge-patch+json" if method == "PATCH" else "application/json"}
    token = token or os.environ.get("API_TOKEN")
    if token:
        headers["Authorization"] = f"Bearer {token}"
    if if_match is not None:
        headers["If-Match"] = if_match
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers, method=method)
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
        self.dynamodb = dynamodb  # for the writes made outside the API
        self.readers = {}
        for table, pipe in pipes_by_table.items():
            description = dynamodb.describe_table(TableName=pipe.table_name)["Table"]
            spec = description.get("StreamSpecification", {})
            if not spec.get("StreamEnabled") or spec.get("StreamViewType") != "NEW_IMAGE":
                raise Failed(f"{pipe.table_name} has no NEW_IMAGE stream ({spec}): local-api --setup creates "
                             "the tables with one (local/src/setup.rs); rebuild it (cargo build --workspace --bins --examples)")
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


def same_detail(detail, expected):
    """The detail is the expected one; updated_fields (a string set, whose
    order DynamoDB does not keep) compared as a set, [[...]] or []."""
    if not isinstance(detail, dict) or set(detail) != set(expected):
        return False
    if {k: v for k, v in detail.items() if k != "updated_fields"} != \
            {k: v for k, v in expected.items() if k != "updated_fields"}:
        return False
    fields, wanted = detail["updated_fields"], expected["updated_fields"]
    if wanted == []:
        return fields == []
    return (isinstance(fields, list) and len(fields) == 1 and isinstance(fields[0], list)
            and len(fields[0]) == len(set(fields[0])) and set(fields[0]) == set(wanted[0]))


def check_event(pipe, record, expected, validator, secrets_written=()):
    """The event the pipe makes of `record`: passes the filter, renders, has
    exactly the expected detail, fits the schema, carries nothing written."""
    if not pipe.passes(record):
        raise Failed(f"{pipe.name}'s filter drops the MODIFY record {record['eventID']}")
    try:
        event = pipe.event(record)
    except pipes.TemplateError as error:
        raise Failed(str(error)) from None
    if not same_detail(event["detail"], expected):
        raise Failed(f"{pipe.name} announces {json.dumps(event['detail'])}, expected {json.dumps(expected)}")
    errors = sorted(validator.iter_errors(event), key=lambda e: list(e.path))
    if errors:
        raise Failed(f"{pipe.name}'s event does not fit events.schema.json: {errors[0].message} at "
                     f"{list(errors[0].path)}: {json.dumps(event)}")
    text = json.dumps(event, ensure_ascii=False)
    leaked = [value for value in WRITTEN + list(secrets_written) if value in text]
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
    step = Steps("events-test")

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

    def the_emulation_does_not_escape():
        """pipes.py pastes a value into a JSON string as AWS does, unescaped:
        a raw quote in updated_by breaks the rendering or adds a member. Else
        the hostile-subject steps below could pass on an escaping emulation."""
        pipe = pipes_by_table["ModelsTable"]
        image = {"id": {"S": MODEL_ID}, "project_id": {"S": PROJECT_ID}, "version": {"N": "2"},
                 "updated_at": {"S": now_rfc3339()}, "updated_fields": {"SS": ["name"]}}
        outcomes = []
        for raw in ['", "admin": "yes', 'a\\"b']:
            record = {"eventName": "MODIFY", "dynamodb": {"NewImage": {**image, "updated_by": {"S": raw}}}}
            try:
                detail = pipe.detail(record)
            except pipes.TemplateError:
                outcomes.append("invalid JSON")
                continue
            if detail.get("updated_by") == raw and set(detail) == {"id", "project_id", "version", "updated_at",
                                                                   "updated_by", "updated_fields"}:
                raise Failed(f"pipes.py escaped {raw!r}; AWS's input transformers do not")
            outcomes.append(f"members {sorted(detail)}")
        return "; ".join(outcomes)
    step("the pipes emulation substitutes without escaping, as AWS does", the_emulation_does_not_escape)

    versions = {}
    sealed = {}  # record id -> the sealed api_key (base64), as the table holds it
    caller = subject_of(os.environ["API_TOKEN"]) if os.environ.get("API_TOKEN") else None

    def updated(table, record_id, body, project=None, if_match=None, fields=None, token=None, method="PUT"):
        """A 200 and its one MODIFY record, announced as expected."""
        def run():
            if caller is None:
                raise Failed("API_TOKEN is not set: the test cannot know the caller (scripts/with-local-api.sh sets it)")
            status, version, envelope = put(ROUTES[table] + record_id, body, project, if_match, token, method)
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
            if table == "ApiKeysTable":
                stored = image.get("api_key", {})
                if set(stored) != {"B"}:
                    raise Failed(f"api_key is stored as {sorted(stored)}, not sealed (B)")
                if SECRET_API_KEY in json.dumps(records[0]):
                    raise Failed("the plaintext api_key is in the stream record")
                if "api_key" not in body and sealed.get(record_id) not in (None, stored["B"]):
                    raise Failed("a write that did not set api_key changed the sealed value")
                sealed[record_id] = stored["B"]
            if table == "McpServersTable":
                # Header names readable, values sealed: the stream record
                # holds no header value, and the event none of its bytes.
                members = image.get("headers", {}).get("M", {})
                if not members or any(set(value) != {"B"} for value in members.values()):
                    raise Failed(f"headers are stored as {json.dumps(image.get('headers'))[:200]}, not sealed (M of B)")
                if HEADER_VALUE in json.dumps(records[0]):
                    raise Failed("a header value is in the stream record in plain text")
            who = principal_form(subject_of(token) if token else caller)
            expected = {"id": record_id, "version": version, "updated_at": envelope["data"]["updated_at"],
                        "updated_by": who, "updated_fields": [sorted(body)]}
            if project:
                expected["project_id"] = project
            event = check_event(pipes_by_table[table], records[0], expected, validator, sealed.values())
            the_schema_refuses({**event, "detail": {**event["detail"], "api_key": SECRET_API_KEY}},
                               "a field outside the allow-list")
            the_schema_refuses({**event, "detail": {**event["detail"], "version": int(version)}},
                               "a version that is not the string the pipe makes")
            return f"one MODIFY, version {version}; {event['detail-type']!r} {json.dumps(event['detail'])}"
        return run

    def changed_outside(table, key, record_id, project=None):
        """An UpdateItem made outside the API (no updated_by, no
        updated_fields in the item): one MODIFY, announced with the
        rendering of the absent attributes, updated_by "" and
        updated_fields [], which the schema allows."""
        def run():
            updated_at = now_rfc3339()
            streams.dynamodb.update_item(
                TableName=pipes_by_table[table].table_name, Key=key,
                UpdateExpression="SET version = version + :one, updated_at = :now REMOVE updated_by, updated_fields",
                ConditionExpression="attribute_exists(version)",
                ExpressionAttributeValues={":one": {"N": "1"}, ":now": {"S": updated_at}})
            seen = streams.wait_for(table)
            records = seen[table]
            if [r["eventName"] for r in records] != ["MODIFY"]:
                raise Failed(f"expected exactly one MODIFY record, got {[r['eventName'] for r in records]}")
            image = records[0]["dynamodb"].get("NewImage", {})
            if "updated_by" in image or "updated_fields" in image:
                raise Failed("the item still has updated_by or updated_fields: the check below would prove nothing")
            version = image.get("version", {}).get("N")
            versions[(table, record_id)] = int(version)
            expected = {"id": record_id, "version": version, "updated_at": updated_at,
                        "updated_by": "", "updated_fields": []}
            if project:
                expected["project_id"] = project
            event = check_event(pipes_by_table[table], records[0], expected, validator, sealed.values())
            return f"{event['detail-type']!r} {json.dumps(event['detail'])}"
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

    step("200 on an API key (new secret, sealed, and name)",
         updated("ApiKeysTable", API_KEY_ID, {"api_key": SECRET_API_KEY, "name": NAME}, fields={"name": NAME}))
    step("200 on an API key (disabled; the sealed secret stays as it is, and out of the event)",
         updated("ApiKeysTable", API_KEY_ID, {"enabled": False}))
    step("200 on an MCP server (secret header, endpoint)",
         updated("McpServersTable", MCP_SERVER_ID,
                 {"headers": {"Authorization": HEADER_VALUE, HEADER_NAME: "1"}, "endpoint": ENDPOINT},
                 project=PROJECT_ID, fields={"headers": HEADER_NAME, "endpoint": ENDPOINT}))
    step("200 on an MCP server by PATCH (one header rotated: the others kept, all sealed)",
         updated("McpServersTable", MCP_SERVER_ID, {"headers": {"authorization": HEADER_VALUE + "-2"}},
                 project=PROJECT_ID, fields={"headers": HEADER_NAME}, method="PATCH"))
    step("200 on a model (name, parameters)",
         updated("ModelsTable", MODEL_ID, {"name": NAME, "parameters": {"temperature": 0.5, "note": PARAMETER}},
                 project=PROJECT_ID, fields={"name": NAME, "parameters": PARAMETER}))
    step("200 on a model by PATCH (one parameter changed, one removed; updated_fields [parameters])",
         updated("ModelsTable", MODEL_ID, {"parameters": {"temperature": 0.7, "note": None}}, project=PROJECT_ID,
                 fields={"parameters": "0.7"}, method="PATCH"))
    step("200 on a model by PATCH (one parameter changed, one removed; updated_fields [parameters])",
         updated("ModelsTable", MODEL_ID, {"parameters": {"temperature": 0.7, "note": None}}, project=PROJECT_ID,
                 fields={"parameters": "0.7"}, method="PATCH"))
    step("200 on a model with the current If-Match",
         updated("ModelsTable", MODEL_ID, {"model_id": "claude-sonnet-4-5"}, project=PROJECT_ID,
                 if_match=f'"{versions.get(("ModelsTable", MODEL_ID), 1)}"'))
    step("200 on a model by another caller (updated_by is that caller)",
         updated("ModelsTable", MODEL_ID, {"provider_type": "Anthropic", "name": NAME}, project=PROJECT_ID,
                 token=project_token(PROJECT_ID, sub=f"events-test-{RUN}")))
    for what, sub in HOSTILE_SUBJECTS:
        step(f"200 on a model by a caller whose sub holds {what} (valid JSON, allow-listed members only)",
             updated("ModelsTable", MODEL_ID, {"name": NAME}, project=PROJECT_ID,
                     token=project_token(PROJECT_ID, sub=sub)))
    step("an MCP server changed outside the API (no updated_by, no updated_fields)",
         changed_outside("McpServersTable", {"project_id": {"S": PROJECT_ID}, "id": {"S": MCP_SERVER_ID}},
                         MCP_SERVER_ID, project=PROJECT_ID))

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

    return step.finish()


if __name__ == "__main__":
    sys.exit(main())
