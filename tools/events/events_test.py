"""make events-test (scripts/events-test.sh): writes through a running local-api (API_URL, API_TOKEN,
API_JWT_SECRET) into DynamoDB Local (DYNAMODB_URL); each table's stream record through its pipe from
template.yaml (pipes.py) must give the event each step names."""

import base64
import json
import os
import re
import secrets
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid

import jsonschema

import pipes

# The sample records (local/src/samples.rs).
API_KEY_ID = "3f1c2a9e-7b4d-4e8a-9c21-5d6e7f8a9b01"
PROJECT_ID = "8a4b2c1d-3e5f-4a6b-8c7d-9e0f1a2b3c4d"
MCP_SERVER_ID = "5b6c7d8e-9f01-4a2b-8c3d-4e5f6a7b8c9d"
MODEL_ID = "7c8d9e0f-1a2b-4c3d-9e4f-5a6b7c8d9e0f"
# The kinds' tables in template.yaml, by their functions' names in the code (tools/kinds.py).
TABLES = {kind["function"]: table for table, kind in pipes.kinds_by_table().items()}
API_KEYS, MCP_SERVERS, MODELS = TABLES["update-api-key"], TABLES["update-mcp-server"], TABLES["update-model"]
# What the test writes, fresh each run, and no event may carry.
RUN = secrets.token_hex(8)
SECRET_API_KEY = f"sk-events-test-{RUN}"
HEADER_NAME = f"X-Events-Test-{RUN}"
HEADER_VALUE = f"Bearer events-test-header-{RUN}"
NAME = f"Events test {RUN}"
ENDPOINT = f"https://mcp-{RUN}.example.com/sse"
PARAMETER = f"events-test-parameter-{RUN}"
WRITTEN = [SECRET_API_KEY, HEADER_NAME, HEADER_VALUE, NAME, ENDPOINT, PARAMETER]
# Callers whose sub would break out of a JSON string pasted raw, as the pipes paste updated_by.
HOSTILE_SUBJECTS = {"a quote": 'agent "quoted"', "a backslash": "agent\\one", "a trailing backslash": "agent\\",
                    "JSON members": '", "admin": true, "project_id": "x', "a percent sign": "100%25",
                    "control characters": "agent\x01\x1b[31m\ttab\nline\x7f",
                    "non-ASCII text": "agënt 模型 😀 \u202e\u00a0end"}
# What the functions keep of a principal as it is (visible ASCII but " \ %); the rest is percent-encoded.
PRINCIPAL_AS_IS = "".join(chr(c) for c in range(0x21, 0x7F) if chr(c) not in '"\\%')


def token_for(project, sub=None):
    """A token granting only `project` (with subject `sub`), signed with the local-api's secret."""
    command = [os.path.join(pipes.ROOT, "target", "debug", "local-api"), "token", "--jwt-secret",
               os.environ["API_JWT_SECRET"], "--projects", project] + (["--sub", sub] if sub else [])
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout.strip()


def principal(token):
    """The token's sub (read, not verified) as the functions record it in updated_by."""
    payload = token.split(".")[1]
    sub = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))["sub"]
    return urllib.parse.quote(sub, safe=PRINCIPAL_AS_IS, encoding="utf-8")


def put(path, body, project=None, token=None, if_match=None, method="PUT", key=None):
    """PUT (or PATCH, a merge patch) through the API: (status, the ETag's version or None, envelope)."""
    headers = {"Content-Type": "application/merge-patch+json" if method == "PATCH" else "application/json",
               "Authorization": f"Bearer {token or os.environ['API_TOKEN']}"}
    if if_match is not None:
        headers["If-Match"] = if_match
    if key is not None:
        headers["Idempotency-Key"] = key
    url = os.environ["API_URL"].rstrip("/") + path + (f"?project_id={project}" if project else "")
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            status, etag, text = response.status, response.headers.get("ETag"), response.read()
    except urllib.error.HTTPError as error:
        status, etag, text = error.code, error.headers.get("ETag"), error.read()
    return status, etag.strip('"') if etag else None, json.loads(text)


def check_event(pipe, record, expected, validator):
    """The event of the MODIFY `record`: the expected detail, valid, holding nothing written or sealed."""
    event = pipe.event(record)  # ValueError if it renders invalid JSON
    if event is None:
        raise AssertionError(f"{pipe.name}'s filter drops the MODIFY record {record['eventID']}")
    detail = event["detail"]  # updated_fields is a string set: its names compare in any order
    fields = detail.get("updated_fields") if isinstance(detail, dict) else None
    if isinstance(fields, list) and all(isinstance(names, list) for names in fields):
        detail = dict(detail, updated_fields=[sorted(names) for names in fields])
    if detail != expected:
        raise AssertionError(f"{pipe.name} announces {json.dumps(event['detail'])}, not {json.dumps(expected)}")
    error = jsonschema.exceptions.best_match(validator.iter_errors(event))
    if error:
        raise AssertionError(f"events.schema.json refuses {pipe.name}'s event: {error.message} at {list(error.path)}")
    text = json.dumps(event, ensure_ascii=False)
    sealed = re.findall(r'"B": "([^"]+)"', json.dumps(record))  # every binary value: api_key, headers
    leaked = [value for value in WRITTEN + sealed if value in text]
    if leaked:
        raise AssertionError(f"{pipe.name}'s event carries what the record holds, {leaked}: {text}")
    return f"{event['detail-type']!r} {json.dumps(event['detail'])}"


def route(table, record_id):
    """The path that updates `record_id` in `table`: its kind's route (tools/kinds.py)."""
    return pipes.kinds_by_table()[table]["route"].replace("{id}", record_id)


def main():
    if not all(os.environ.get(name) for name in ("API_URL", "API_TOKEN", "API_JWT_SECRET", "DYNAMODB_URL")):
        sys.exit("events-test: needs API_URL, API_TOKEN, API_JWT_SECRET and DYNAMODB_URL (scripts/events-test.sh)")
    pipes_by_table = pipes.load_pipes()
    validator = jsonschema.Draft202012Validator(pipes.load(pipes.SCHEMA), format_checker=jsonschema.FormatChecker())
    dynamodb, streams = pipes.clients(os.environ["DYNAMODB_URL"], os.environ.get("AWS_REGION", "us-east-1"))
    readers = {table: pipes.StreamReader(dynamodb, streams, pipe.table_name, "TRIM_HORIZON")
               for table, pipe in pipes_by_table.items()}
    passed, failed = [], []

    def step(description, action, *args, **kwargs):
        try:
            note = action(*args, **kwargs)
        except Exception as error:  # a failed check, or any error: the step fails, the run goes on
            failed.append(description)
            print(f"FAIL  {description}: {error if isinstance(error, AssertionError) else repr(error)}")
        else:
            passed.append(description)
            print(f"ok    {description}" + (f": {note}" if note else ""))

    def written(table=None):
        """Each table's new records; with `table`, the one a write made (a MODIFY there, none elsewhere)."""
        # DynamoDB Local writes a stream record with its item: wait for the one expected (or half a second
        # for none), then a margin in which any other would show.
        records = {name: [] for name in readers}
        deadline = time.monotonic() + (5 if table else 0.5)
        while time.monotonic() < deadline and not (table and records[table]):
            time.sleep(0.1)
            for name, reader in readers.items():
                records[name] += reader.read()
        time.sleep(0.2)
        for name, reader in readers.items():
            records[name] += reader.read()
        if table is None:
            return records
        kinds = {name: [record["eventName"] for record in found] for name, found in records.items() if found}
        if kinds != {table: ["MODIFY"]}:
            raise AssertionError(f"expected one MODIFY record, on {table} only; got {kinds}")
        return records[table][0]

    def loading_is_not_announced():
        loaded = written()
        count = sum(len(records) for records in loaded.values())
        announced = [record["dynamodb"].get("Keys") for table, records in loaded.items() for record in records
                     if pipes_by_table[table].passes(record)]
        if not count or announced:
            raise AssertionError(f"{count} records of the samples (streams at table creation?), {announced} announced")
        return f"{count} records of the loaded samples, none announced"

    def emulation_does_not_escape():
        """Else the hostile-sub steps could pass on an emulation kinder than AWS."""
        pipe, record = pipes_by_table[MODELS], pipes.sample_record(MODELS, pipes.kinds_by_table()[MODELS])
        members = set(pipe.detail(record))
        for raw in ['", "admin": "yes', "a\\b"]:  # escaped, each would come back as it is
            record["dynamodb"]["NewImage"]["updated_by"] = {"S": raw}
            try:
                detail = pipe.detail(record)
            except ValueError:
                continue  # invalid JSON, as on AWS
            if detail.get("updated_by") == raw and set(detail) == members:
                raise AssertionError(f"pipes.py escaped {raw!r}; AWS's input transformers do not")

    def request(table, record_id, body, status, project=None, token=None, holds=(), **options):
        """A 200 writes one MODIFY with the ETag's version, announced as expected (the record `holds`
        values, or the leak check proves nothing); any other status writes no record anywhere."""
        answered, version, envelope = put(route(table, record_id), body, project, token, **options)
        if answered != status:
            raise AssertionError(f"status {answered}, expected {status}: {json.dumps(envelope)}")
        if status != 200:
            records = written()
            if any(records.values()):
                raise AssertionError(f"a {status} wrote stream records: {records}")
            return f"{envelope['errorDetails']['code']}, no record"
        record = written(table)
        image = record["dynamodb"]["NewImage"]
        if version is None or image.get("version") != {"N": version}:
            raise AssertionError(f"the record's version is {image.get('version')}, the ETag's {version}")
        lacking = [value for value in holds if value not in json.dumps(image)]
        if lacking:
            raise AssertionError(f"the record lacks {lacking}: the leak check would prove nothing")
        key = options.get("key")
        published = urllib.parse.quote(key.strip('"').replace('\\"', '"'), safe=PRINCIPAL_AS_IS) if key else ""
        expected = {"id": record_id, "version": version, "updated_at": envelope["data"]["updated_at"],
                    "updated_by": principal(token or os.environ["API_TOKEN"]), "updated_fields": [sorted(body)],
                    "idempotency_key": published}
        if project:
            expected["project_id"] = project
        expected.update({name: [] for name in pipes.kinds_by_table()[table]["event_sets"]})  # nothing moved
        return f"version {version}; " + check_event(pipes_by_table[table], record, expected, validator)

    def replayed(key):
        answered, _, envelope = put(route(MODELS, MODEL_ID), {"name": NAME}, PROJECT_ID, key=key)
        if answered != 200:
            raise AssertionError(f"status {answered}: {json.dumps(envelope)}")
        records = written()
        if any(records.values()):
            raise AssertionError(f"a replay wrote stream records: {records}")
        return "200, no record"

    def changed_outside():
        pipe, updated_at = pipes_by_table[MCP_SERVERS], pipes.utc_now()
        dynamodb.update_item(
            TableName=pipe.table_name, Key={"project_id": {"S": PROJECT_ID}, "id": {"S": MCP_SERVER_ID}},
            UpdateExpression="SET version = version + :one, updated_at = :now REMOVE updated_by, updated_fields",
            ConditionExpression="attribute_exists(version)",
            ExpressionAttributeValues={":one": {"N": "1"}, ":now": {"S": updated_at}})
        record = written(MCP_SERVERS)
        image = record["dynamodb"]["NewImage"]
        if "updated_by" in image or "updated_fields" in image:
            raise AssertionError("the item still has updated_by or updated_fields: the check would prove nothing")
        expected = {"id": MCP_SERVER_ID, "project_id": PROJECT_ID, "version": image["version"]["N"],
                    "updated_at": updated_at, "updated_by": "", "updated_fields": [], "idempotency_key": "",
                    **{name: [] for name in pipes.kinds_by_table()[MCP_SERVERS]["event_sets"]}}
        return check_event(pipe, record, expected, validator)

    step("loading the samples (INSERTs) is not announced", loading_is_not_announced)
    step("pipes.py substitutes without escaping, as AWS does", emulation_does_not_escape)
    step("200 on an API key (secret, name)", request, API_KEYS, API_KEY_ID,
         {"api_key": SECRET_API_KEY, "name": NAME}, 200, holds=[NAME])
    step("200 on an MCP server (secret header, endpoint)", request, MCP_SERVERS, MCP_SERVER_ID,
         {"headers": {"Authorization": HEADER_VALUE, HEADER_NAME: "1"}, "endpoint": ENDPOINT}, 200, PROJECT_ID,
         holds=[HEADER_NAME, ENDPOINT])
    step("200 on a model (name, parameters)", request, MODELS, MODEL_ID,
         {"name": NAME, "parameters": {"temperature": 0.5, "note": PARAMETER}}, 200, PROJECT_ID,
         holds=[NAME, PARAMETER])
    step("200 on a model by PATCH (a parameter changed, one removed: updated_fields [parameters])", request,
         MODELS, MODEL_ID, {"parameters": {"temperature": 0.7, "note": None}}, 200, PROJECT_ID, method="PATCH")
    for what, sub in HOSTILE_SUBJECTS.items():
        step(f"200 on a model by a caller whose sub holds {what} (valid JSON, allow-listed members only)", request,
             MODELS, MODEL_ID, {"name": NAME}, 200, PROJECT_ID, token=token_for(PROJECT_ID, sub))
    for key in (f"retry-{RUN}", f'"retry-{RUN}-\\"quoted\\"%"'):
        step(f"200 on a model with Idempotency-Key {key} (the event carries it)", request, MODELS, MODEL_ID,
             {"name": NAME}, 200, PROJECT_ID, key=key)
        step(f"its retry answers again and writes no record", replayed, key)
    step('an MCP server changed outside the API: updated_by "", updated_fields []', changed_outside)
    for status, why, record_id, body, options in [
            (412, "a stale If-Match", MODEL_ID, {"name": NAME}, {"if_match": '"1"'}),
            (400, "a bad provider_type", MODEL_ID, {"provider_type": "openai"}, {}),
            (403, "a token for another project", MODEL_ID, {"name": NAME}, {"token": token_for(str(uuid.uuid4()))}),
            (404, "no such model", str(uuid.uuid4()), {"name": NAME}, {})]:
        step(f"{status} on a model ({why})", request, MODELS, record_id, body, status, PROJECT_ID, **options)
    print(f"events-test: {len(passed)} passed, {len(failed)} failed")
    return 1 if failed or not passed else 0


if __name__ == "__main__":
    sys.exit(main())
