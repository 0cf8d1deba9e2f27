"""make sealing-test: provider API keys and MCP header values are sealed end
to end, on real parts.

A sentinel api_key and a sentinel MCP header value go through a running
local-api (API_URL, with API_TOKEN) into DynamoDB Local (DYNAMODB_URL),
sealed by the local KMS (AWS_ENDPOINT_URL_KMS, SECRETS_KEY_ID). The test
checks that:

- the secret, in any form it looks for (the text, its random part, a prefix,
  a suffix, base64 at every alignment, hex, common hashes), appears in no
  response, no raw item of any table (boto3 GetItem and Scan, every
  attribute, bytes included), no stream record (boto3 dynamodbstreams, the
  tables' NEW_IMAGE streams, bytes included), no change event (each record
  put through its table's pipe from template.yaml, as tools/events/pipes.py
  renders it) and no log file in LOG_DIR (local-api's, and with LAMBDA=1 the
  functions' own);
- the stored api_key is Binary and opens with one KMS Decrypt and the
  context {"field": "api_key", "id": <record id>} to the sentinel, and not
  with another id, another field, an extra pair or no context;
- the two consumer examples, docs/examples/decrypt_api_key.py and
  ops/examples/decrypt_api_key.rs (built: target/debug/examples/), print it;
- the MCP server's headers are stored with their names readable and each
  value Binary; the record's data key (headers_key, B) opens with one KMS
  Decrypt and the context {"field": "headers", "project_id": ..., "id": ...}
  only; each value opens with AES-256-GCM under it as docs/secrets.md lays it
  out, and not as another header or another record's; the consumer examples
  docs/examples/open_mcp_headers.py and ops/examples/open_mcp_headers.rs
  print the headers sent; a PUT that only renames answers with them;
- the item's updated_fields is exactly the fields sent and updated_by the
  token's sub;
- with the local KMS stopped (KMS_PID, until its port closes), a PUT with
  api_key answers 503 with Retry-After and errorDetails.code "unavailable"
  and leaves the raw item unchanged, while a PUT without api_key still
  answers 200 and keeps the sealed value; a rename of the sealed MCP server
  and a PUT that sets headers are 503 with the item unchanged, while a
  rename of an MCP server with unsealed headers and a model update go on.

It never skips: a missing variable, example or log is a failure. It prints
`sealing: N passed, M failed` last and exits non-zero on any failure.
scripts/sealing-test.sh runs it under scripts/with-local-api.sh (plain, and
LAMBDA=1 for the real function binaries under the Runtime Interface
Emulator), with the tools virtualenv's Python (boto3; the SAM CLI's YAML
loader for pipes.py).
"""

import base64
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import secrets

import boto3
import botocore.config
import botocore.exceptions

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools", "events"))
import pipes  # noqa: E402  (tools/events/pipes.py)
from steps import Failed, Steps  # noqa: E402  (tools/events/steps.py)

# The sample records (local/src/samples.rs).
API_KEY_ID = "3f1c2a9e-7b4d-4e8a-9c21-5d6e7f8a9b01"
OTHER_ID = "5b6c7d8e-9f01-4a2b-8c3d-4e5f6a7b8c9d"
PROJECT_ID = "8a4b2c1d-3e5f-4a6b-8c7d-9e0f1a2b3c4d"
MCP_ID = "5b6c7d8e-9f01-4a2b-8c3d-4e5f6a7b8c9d"
MODEL_ID = "7c8d9e0f-1a2b-4c3d-9e4f-5a6b7c8d9e0f"
# An MCP server this test stores itself with plain headers, as written
# before sealing.
UNSEALED_MCP_ID = "6e5d4c3b-2a19-4f8e-9d7c-6b5a49382716"
ROUTE = "/api/agent-server/api-keys/"
MCP_ROUTE = "/api/agent-server/mcp-servers/"
ACCESS_ROUTE = '"route":"/api/agent-server/api-keys/{id}"'

# Fresh each run, so that a match can come from nowhere else. The secret
# sent while KMS is down is a second one: it must not land anywhere either.
SENTINEL = "sk-" + secrets.token_hex(16)
OUTAGE_SENTINEL = "sk-" + secrets.token_hex(16)
HEADER_SENTINEL = "hv-" + secrets.token_hex(16)
HEADER_OUTAGE_SENTINEL = "hv-" + secrets.token_hex(16)
HEADERS = {"Authorization": f"Bearer {HEADER_SENTINEL}", "X-Upstream-Key": HEADER_SENTINEL, "Accept": "*/*"}
NAME = f"Sealing test {secrets.token_hex(4)}"

PYTHON_EXAMPLE = os.path.join(ROOT, "docs", "examples", "decrypt_api_key.py")
EXAMPLES_DIR = os.path.join(os.environ.get("CARGO_TARGET_DIR") or os.path.join(ROOT, "target"), "debug", "examples")
RUST_EXAMPLE = os.path.join(EXAMPLES_DIR, "decrypt_api_key")
PYTHON_HEADERS_EXAMPLE = os.path.join(ROOT, "docs", "examples", "open_mcp_headers.py")
RUST_HEADERS_EXAMPLE = os.path.join(EXAMPLES_DIR, "open_mcp_headers")


def forms(secret):
    """The strings that would betray `secret`: itself, its random part and
    a prefix and suffix of it, base64 (standard and URL-safe) at each of the
    three alignments it could have inside a longer encoded value, hex, and
    the usual hashes."""
    random_part = secret[3:]
    raw = secret.encode()
    found = {secret, random_part, random_part[:12], random_part[-10:], raw.hex(),
             hashlib.sha256(raw).hexdigest(), hashlib.sha1(raw).hexdigest(), hashlib.md5(raw).hexdigest(),
             base64.b64encode(hashlib.sha256(raw).digest()).decode()}
    for shift in range(3):
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            found.add(encode(b"\0" * shift + raw).decode()[4:-4])
    return sorted(found)


SECRETS = [SENTINEL, OUTAGE_SENTINEL, HEADER_SENTINEL, HEADER_OUTAGE_SENTINEL]
FORMS = [form for secret in SECRETS for form in forms(secret)]


def redact(text):
    """`text` with every form of either secret replaced, for messages."""
    for form in sorted(FORMS, key=len, reverse=True):
        text = text.replace(form, "<REDACTED>")
    return text


def leaks(value, where="", found=None):
    """Every place in `value` (str, bytes, and the dicts and lists of a
    boto3 response or a parsed document, keys included) that holds a form
    of either secret, as `where` paths."""
    found = [] if found is None else found
    if isinstance(value, (bytes, bytearray)):
        if any(form.encode() in value for form in FORMS):
            found.append(where or "(bytes)")
    elif isinstance(value, str):
        if any(form in value for form in FORMS):
            found.append(where or "(text)")
    elif isinstance(value, dict):
        for key, item in value.items():
            leaks(key, f"{where}/{key} (key)", found)
            leaks(item, f"{where}/{key}", found)
    elif isinstance(value, (list, tuple, set, frozenset)):
        for index, item in enumerate(value):
            leaks(item, f"{where}[{index}]", found)
    return found


def subject_of(token):
    """The sub claim of a JWT (read, not verified: with-local-api minted it)."""
    try:
        payload = token.split(".")[1]
        return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))["sub"]
    except (IndexError, ValueError, KeyError, TypeError) as error:
        raise Failed(f"cannot read the sub of API_TOKEN: {error!r}") from None


def put(record_id, body, path=None):
    """PUT through local-api, on the API-key route unless `path` (with its
    query) is given: (status, headers by lowercase name, raw body bytes,
    parsed envelope)."""
    request = urllib.request.Request(
        os.environ["API_URL"].rstrip("/") + (path or ROUTE + record_id), data=json.dumps(body).encode(),
        method="PUT",
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {os.environ['API_TOKEN']}"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            status, headers, raw = response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        status, headers, raw = error.code, error.headers, error.read()
    try:
        envelope = json.loads(raw)
    except ValueError:
        raise Failed(f"status {status}, a body that is not JSON: {redact(raw.decode(errors='replace'))[:300]}") \
            from None
    return status, {k.lower(): v for k, v in headers.items()}, raw, envelope


def no_leak_in_response(status, headers, raw):
    places = leaks(raw, "body") + leaks(headers, "headers")
    if places:
        raise Failed(f"the {status} response carries the secret at {places}")


class Aws:
    """boto3 clients on the local endpoints."""

    def __init__(self):
        dynamodb_url = os.environ["DYNAMODB_URL"]
        region = os.environ.get("AWS_REGION", "us-east-1")
        credentials = dict(aws_access_key_id="local", aws_secret_access_key="local")
        self.dynamodb = boto3.client("dynamodb", endpoint_url=dynamodb_url, region_name=region, **credentials)
        self.streams = boto3.client("dynamodbstreams", endpoint_url=dynamodb_url, region_name=region,
                                    **credentials)
        self.kms = boto3.client("kms", endpoint_url=os.environ["AWS_ENDPOINT_URL_KMS"], region_name=region,
                                config=botocore.config.Config(retries={"max_attempts": 1}), **credentials)
        self.table = os.environ.get(*pipes.TABLES["ApiKeysTable"])
        self.tables = {logical: os.environ.get(*names) for logical, names in pipes.TABLES.items()}

    def item(self):
        """The raw sample API-key item, every attribute, as a reader of the table sees it."""
        item = self.dynamodb.get_item(TableName=self.table, Key={"id": {"S": API_KEY_ID}},
                                      ConsistentRead=True).get("Item")
        if item is None:
            raise Failed(f"{self.table} has no item {API_KEY_ID}")
        return item

    def all_items(self):
        """Every item of every table."""
        items = {}
        for logical, table in self.tables.items():
            items[logical], kwargs = [], {"TableName": table, "ConsistentRead": True}
            while True:
                page = self.dynamodb.scan(**kwargs)
                items[logical] += page.get("Items", [])
                if not page.get("LastEvaluatedKey"):
                    break
                kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        return items

    def stream_records(self):
        """Every record each table's stream holds, from its start, raw (bytes
        as bytes): {logical table: (stream ARN, [record])}."""
        out = {}
        for logical, table in self.tables.items():
            description = self.dynamodb.describe_table(TableName=table)["Table"]
            spec = description.get("StreamSpecification", {})
            if not spec.get("StreamEnabled") or spec.get("StreamViewType") != "NEW_IMAGE":
                raise Failed(f"{table} has no NEW_IMAGE stream ({spec})")
            arn, records, kwargs = description["LatestStreamArn"], [], {"StreamArn": description["LatestStreamArn"]}
            shards = []
            while True:
                stream = self.streams.describe_stream(**kwargs)["StreamDescription"]
                shards += stream.get("Shards", [])
                if not stream.get("LastEvaluatedShardId"):
                    break
                kwargs["ExclusiveStartShardId"] = stream["LastEvaluatedShardId"]
            for shard in shards:
                iterator = self.streams.get_shard_iterator(StreamArn=arn, ShardId=shard["ShardId"],
                                                           ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
                while iterator:
                    response = self.streams.get_records(ShardIterator=iterator)
                    batch = response.get("Records", [])
                    records += batch
                    iterator = response.get("NextShardIterator") if batch else None
            out[logical] = (arn, records)
        return out

    def decrypt(self, blob, context):
        """KMS Decrypt of `blob` with `context` (None: no context at all)."""
        kwargs = {"CiphertextBlob": blob}
        if context is not None:
            kwargs["EncryptionContext"] = context
        return self.kms.decrypt(**kwargs)["Plaintext"]


def put_mcp(record_id, body):
    return put(None, body, f"{MCP_ROUTE}{record_id}?project_id={PROJECT_ID}")


def mcp_item(aws, record_id=MCP_ID):
    """A raw MCP-server item of the sample project."""
    item = aws.dynamodb.get_item(TableName=aws.tables["McpServersTable"],
                                 Key={"project_id": {"S": PROJECT_ID}, "id": {"S": record_id}},
                                 ConsistentRead=True).get("Item")
    if item is None:
        raise Failed(f"no MCP server {record_id}")
    return item


def sealed_headers(item):
    """(sealed data key, {name: sealed value}) of an MCP-server item."""
    key = item.get("headers_key", {})
    if set(key) != {"B"}:
        raise Failed(f"headers_key is stored as {sorted(key) or 'nothing'}, not a sealed data key (B)")
    members = item.get("headers", {}).get("M")
    if members is None:
        raise Failed("headers is not a map (M)")
    values = {}
    for name, value in members.items():
        if set(value) != {"B"}:
            raise Failed(f"header {name!r} is stored as {sorted(value)}, not sealed (B)")
        values[name] = bytes(value["B"])
    return bytes(key["B"]), values


def headers_context(record_id=MCP_ID, project_id=PROJECT_ID):
    return {"field": "headers", "project_id": project_id, "id": record_id}


def sealed_bytes(item):
    stored = item.get("api_key", {})
    if set(stored) != {"B"}:
        raise Failed(f"api_key is stored as {sorted(stored) or 'nothing'}, not sealed (B)")
    return bytes(stored["B"])


def port_of(url):
    parsed = urllib.parse.urlsplit(url)
    return parsed.hostname, parsed.port


def is_open(host, port):
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def log_files(log_dir):
    files = []
    for directory, _, names in os.walk(log_dir):
        files += [os.path.join(directory, name) for name in names]
    return sorted(files)


def main():
    missing = [v for v in ("API_URL", "API_TOKEN", "DYNAMODB_URL", "AWS_ENDPOINT_URL_KMS", "SECRETS_KEY_ID",
                           "KMS_PID", "LOG_DIR") if not os.environ.get(v)]
    if missing:
        print(f"sealing: set {', '.join(missing)} (scripts/sealing-test.sh sets them, through "
              "scripts/with-local-api.sh)", file=sys.stderr)
        print("sealing: 0 passed, 1 failed")
        return 2
    lambda_mode = os.environ.get("LAMBDA") == "1"
    log_dir = os.environ["LOG_DIR"]
    aws = Aws()
    caller = subject_of(os.environ["API_TOKEN"])
    state = {}
    step = Steps("sealing",
                 errors=(botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError, OSError, KeyError),
                 redact=redact)

    # --- KMS up: a sentinel through the API ---

    def sealed_write():
        status, headers, raw, envelope = put(API_KEY_ID, {"api_key": SENTINEL, "name": NAME})
        no_leak_in_response(status, headers, raw)
        if status != 200:
            raise Failed(f"status {status}, expected 200: {redact(raw.decode())}")
        if "api_key" in (envelope.get("data") or {}):
            raise Failed("the response's data has an api_key field")
        return f"200, ETag {headers.get('etag')}, no api_key in the response"
    step("PUT with api_key and name: 200, and the response holds no form of the secret", sealed_write)

    def headers_write():
        status, headers, raw, envelope = put_mcp(MCP_ID, {"headers": HEADERS, "name": NAME})
        if leaks(headers, "headers"):
            raise Failed("the response's HTTP headers carry a header value")
        if status != 200:
            raise Failed(f"status {status}, expected 200: {redact(raw.decode())}")
        if (envelope.get("data") or {}).get("headers") != HEADERS:
            raise Failed("the response's data.headers are not the headers sent")
        return f"200, ETag {headers.get('etag')}, data.headers as sent"
    step("PUT of an MCP server's headers and name: 200, and the answer shows the headers sent", headers_write)

    def unsealed_record():
        # A record as written before sealing: plain headers, no data key.
        aws.dynamodb.put_item(TableName=aws.tables["McpServersTable"], Item={
            "project_id": {"S": PROJECT_ID}, "id": {"S": UNSEALED_MCP_ID}, "name": {"S": "Unsealed"},
            "endpoint": {"S": "http://localhost:8931/mcp"}, "headers": {"M": {"X-Plain": {"S": "plain"}}},
            "created_at": {"S": "2026-01-01T00:00:00.000Z"}, "updated_at": {"S": "2026-01-01T00:00:00.000Z"},
            "version": {"N": "1"}})
        return f"MCP server {UNSEALED_MCP_ID} stored with a plain header"
    step("an MCP server with headers written before sealing is stored (PutItem)", unsealed_record)

    def raw_item_is_sealed():
        item = aws.item()
        state["sealed"] = sealed_bytes(item)
        state["item"] = item
        places = leaks(item, "item")
        if places:
            raise Failed(f"the raw item carries the secret at {places}")
        everywhere = [p for logical, items in aws.all_items().items() for p in leaks(items, logical)]
        if everywhere:
            raise Failed(f"a raw item carries the secret at {everywhere}")
        return (f"api_key is B ({len(state['sealed'])} bytes of ciphertext); no form of the secret in any "
                f"attribute of any item of the three tables")
    step("the raw items (GetItem, Scan; every attribute, bytes included) hold no form of the secret",
         raw_item_is_sealed)

    def writer_recorded():
        item = state.get("item") or aws.item()
        fields = item.get("updated_fields", {})
        if set(fields) != {"SS"} or sorted(fields["SS"]) != ["api_key", "name"]:
            raise Failed(f"updated_fields is {fields}, expected SS [api_key, name]")
        if item.get("updated_by") != {"S": caller}:
            raise Failed(f"updated_by is {item.get('updated_by')}, expected the token's sub {caller!r}")
        if item.get("name") != {"S": NAME}:
            raise Failed(f"name is {item.get('name')}, expected {NAME!r}")
        return f"updated_fields SS {sorted(fields['SS'])}, updated_by {caller!r}"
    step("updated_fields is exactly the fields sent, updated_by the token's sub", writer_recorded)

    def opens_with_its_context():
        sealed = state.get("sealed") or sealed_bytes(aws.item())
        plaintext = aws.decrypt(sealed, {"field": "api_key", "id": API_KEY_ID})
        if plaintext != SENTINEL.encode():
            raise Failed("Decrypt with the record's context gives something other than the secret sent")
        return "Decrypt with {\"field\": \"api_key\", \"id\": <id>} gives the secret sent"
    step("the stored ciphertext opens with KMS Decrypt and the record's context", opens_with_its_context)

    def opens_with_nothing_else():
        sealed = state.get("sealed") or sealed_bytes(aws.item())
        refused = []
        for what, context in (("another record's id", {"field": "api_key", "id": OTHER_ID}),
                              ("no context", None),
                              ("an empty context", {}),
                              ("the field alone", {"field": "api_key"}),
                              ("another field", {"field": "name", "id": API_KEY_ID}),
                              ("an extra pair", {"field": "api_key", "id": API_KEY_ID, "extra": "x"})):
            try:
                aws.decrypt(sealed, context)
            except botocore.exceptions.ClientError as error:
                refused.append(f"{what}: {error.response.get('Error', {}).get('Code')}")
                continue
            raise Failed(f"Decrypt with {what} opened it")
        return "; ".join(refused)
    step("...and not with another id, without context, or with any other context", opens_with_nothing_else)

    def headers_sealed_at_rest():
        item = mcp_item(aws)
        data_key, values = sealed_headers(item)
        if sorted(values) != sorted(HEADERS):
            raise Failed(f"the stored header names are {sorted(values)}, expected {sorted(HEADERS)}")
        fields = item.get("updated_fields", {})
        if sorted(fields.get("SS", [])) != ["headers", "name"]:
            raise Failed(f"updated_fields is {fields}, expected SS [headers, name]")
        state["data_key"], state["values"] = data_key, values
        return (f"names readable ({', '.join(sorted(values))}), each value B, headers_key B "
                f"({len(data_key)} bytes)")
    step("the MCP server's header names are stored readable, each value and the data key sealed (B)",
         headers_sealed_at_rest)

    def data_key_opens_with_its_context_only():
        data_key = state.get("data_key") or sealed_headers(mcp_item(aws))[0]
        plain = aws.decrypt(data_key, headers_context())
        if len(plain) != 32:
            raise Failed(f"the data key is {len(plain)} bytes, not an AES-256 key")
        state["plain_key"] = plain
        refused = []
        for what, context in (("another record's id", headers_context(MODEL_ID)),
                              ("another project", headers_context(MCP_ID, MODEL_ID)),
                              ("the api_key context", {"field": "api_key", "id": MCP_ID}),
                              ("no project", {"field": "headers", "id": MCP_ID}),
                              ("no context", None)):
            try:
                aws.decrypt(data_key, context)
            except botocore.exceptions.ClientError as error:
                refused.append(f"{what}: {error.response.get('Error', {}).get('Code')}")
                continue
            raise Failed(f"Decrypt with {what} opened the data key")
        return "Decrypt with the record's context gives a 256-bit key; " + "; ".join(refused)
    step("the data key opens with KMS Decrypt and the record's context only", data_key_opens_with_its_context_only)

    def values_open_as_documented():
        sys.path.insert(0, os.path.dirname(PYTHON_HEADERS_EXAMPLE))
        import open_mcp_headers  # noqa: E402  (docs/examples/open_mcp_headers.py)
        plain_key, values = state["plain_key"], state["values"]
        for name, sealed in values.items():
            if open_mcp_headers.open_value(plain_key, PROJECT_ID, MCP_ID, name, sealed) != HEADERS[name]:
                raise Failed(f"header {name!r} opens to something other than the value sent")
            for other_name, other_project, other_id in ((n, PROJECT_ID, MCP_ID) for n in values if n != name):
                try:
                    open_mcp_headers.open_value(plain_key, other_project, other_id, other_name, sealed)
                except Exception:  # cryptography's InvalidTag: what a moved value must give
                    continue
                raise Failed(f"header {name!r}'s value opens as {other_name!r}")
            for project, record in ((PROJECT_ID, MODEL_ID), (MODEL_ID, MCP_ID)):
                try:
                    open_mcp_headers.open_value(plain_key, project, record, name, sealed)
                except Exception:
                    continue
                raise Failed(f"header {name!r}'s value opens as another record's")
        return f"{len(values)} values open under their own name and record only (AES-256-GCM, cryptography)"
    step("each header value opens as docs/secrets.md lays it out, and not as another header or record",
         values_open_as_documented)

    def headers_example(program, command, name):
        def run():
            if not os.path.isfile(program):
                raise Failed(f"{program} is missing (cargo build --workspace --bins --examples)")
            done = subprocess.run(command, capture_output=True, timeout=60)
            if done.returncode != 0:
                raise Failed(f"{name} exited {done.returncode}: {redact(done.stderr.decode(errors='replace'))}")
            try:
                printed = json.loads(done.stdout)
            except ValueError:
                raise Failed(f"{name} printed something other than JSON") from None
            if printed != HEADERS:
                raise Failed(f"{name} printed other headers than those sent")
            return f"{name} {PROJECT_ID} {MCP_ID} prints the headers sent"
        return run
    step("docs/examples/open_mcp_headers.py opens the record's headers",
         headers_example(PYTHON_HEADERS_EXAMPLE, [sys.executable, PYTHON_HEADERS_EXAMPLE, PROJECT_ID, MCP_ID],
                         "open_mcp_headers.py"))
    step("ops/examples/open_mcp_headers.rs opens the record's headers",
         headers_example(RUST_HEADERS_EXAMPLE, [RUST_HEADERS_EXAMPLE, PROJECT_ID, MCP_ID], "open_mcp_headers (Rust)"))

    def rename_shows_headers():
        before = sealed_headers(mcp_item(aws))
        status, headers, raw, envelope = put_mcp(MCP_ID, {"name": NAME + " renamed"})
        if status != 200:
            raise Failed(f"status {status}, expected 200: {redact(raw.decode())}")
        if (envelope.get("data") or {}).get("headers") != HEADERS:
            raise Failed("a rename's answer does not show the stored headers")
        if sealed_headers(mcp_item(aws)) != before:
            raise Failed("a rename changed the sealed values or the data key")
        return "200, data.headers as stored (opened), the sealed values and key as they were"
    step("a PUT that only renames the MCP server answers with its headers", rename_shows_headers)

    def no_leak_in_streams():
        records = aws.stream_records()
        places = [p for logical, (_, rs) in records.items() for p in leaks(rs, logical)]
        if places:
            raise Failed(f"stream records carry the secret at {places}")
        ours = [r for r in records["ApiKeysTable"][1] if r.get("eventName") == "MODIFY"
                and r["dynamodb"].get("Keys", {}).get("id") == {"S": API_KEY_ID}]
        if not ours:
            raise Failed("the API-key stream holds no MODIFY record of the update: the check proves nothing")
        image = ours[-1]["dynamodb"].get("NewImage", {})
        if bytes(image.get("api_key", {}).get("B", b"")) != state.get("sealed"):
            raise Failed("the update's stream record does not hold the stored ciphertext as api_key (B)")
        count = sum(len(rs) for _, rs in records.values())
        return f"{count} records on the three streams; the update's MODIFY holds the ciphertext only"
    step("no stream record (dynamodbstreams, bytes included) holds a form of the secret", no_leak_in_streams)

    def no_leak_in_events():
        pipes_by_table = pipes.load_pipes()
        ciphertext = base64.b64encode(state.get("sealed", b"\0")).decode()
        events, ours = 0, 0
        for logical, (arn, records) in aws.stream_records().items():
            pipe = pipes_by_table.get(logical)
            if pipe is None:
                raise Failed(f"template.yaml has no pipe on {logical}")
            for record in records:
                try:
                    event = pipe.event(pipes.pipe_record(record, arn))
                except pipes.TemplateError as error:
                    raise Failed(f"{pipe.name} cannot render a record: {error}") from None
                if event is None:
                    continue
                events += 1
                text = json.dumps(event, ensure_ascii=False)
                places = leaks(event, pipe.name)
                if places or ciphertext in text:
                    raise Failed(f"{pipe.name}'s event carries the secret or its ciphertext at "
                                 f"{places or ['(the ciphertext)']}")
                if logical == "ApiKeysTable" and event["detail"].get("id") == API_KEY_ID:
                    ours += 1
        if ours == 0:
            raise Failed("no change event announces the update: the check proves nothing")
        return f"{events} events rendered by the pipes of template.yaml, {ours} of the update; none holds it"
    step("no change event (tools/events/pipes.py) holds a form of the secret or its ciphertext", no_leak_in_events)

    def example(program, command, name):
        def run():
            if not os.path.isfile(program):
                raise Failed(f"{program} is missing (make sealing-test builds the Rust one: "
                             "cargo build --workspace --bins --examples)")
            done = subprocess.run(command, capture_output=True, timeout=60)
            if done.returncode != 0:
                raise Failed(f"{name} exited {done.returncode}: {redact(done.stderr.decode(errors='replace'))}")
            if done.stdout.decode(errors="replace").strip() != SENTINEL:
                raise Failed(f"{name} printed something other than the secret sent "
                             f"({len(done.stdout.splitlines())} lines)")
            return f"{name} {API_KEY_ID} prints the secret sent"
        return run
    python = sys.executable
    step("docs/examples/decrypt_api_key.py opens the record it wrote",
         example(PYTHON_EXAMPLE, [python, PYTHON_EXAMPLE, API_KEY_ID], "decrypt_api_key.py"))
    step("ops/examples/decrypt_api_key.rs opens the record it wrote",
         example(RUST_EXAMPLE, [RUST_EXAMPLE, API_KEY_ID], "decrypt_api_key (Rust)"))

    def no_leak_in_logs(statuses):
        def run():
            files = log_files(log_dir)
            names = {os.path.basename(f) for f in files}
            wanted = {"local-api.log"} | ({"update-api-key.log", "update-mcp-server.log", "update-model.log"}
                                          if lambda_mode else set())
            if wanted - names:
                raise Failed(f"{log_dir} lacks {sorted(wanted - names)}: the check would prove nothing")
            leaked, access = [], []
            for path in files:
                with open(path, "rb") as log:
                    content = log.read()
                if leaks(content):
                    leaked.append(os.path.relpath(path, log_dir))
                access += [line for line in content.decode(errors="replace").splitlines() if ACCESS_ROUTE in line]
            if leaked:
                raise Failed(f"log files carry the secret: {leaked}")
            # The requests' own lines are in the files read (under LAMBDA=1
            # the function's), so the search covered what they logged.
            where = "update-api-key.log" if lambda_mode else "local-api.log"
            with open(os.path.join(log_dir, where), "rb") as log:
                own = log.read().decode(errors="replace")
            for status in statuses:
                if not any(ACCESS_ROUTE in line and f'"status":{status}' in line for line in own.splitlines()):
                    raise Failed(f"{where} has no access line of the {status} on the API-key route: the "
                                 "check would prove nothing")
            return f"{len(files)} files ({', '.join(sorted(names))}), {len(access)} API-key access lines"
        return run
    step("no log file in LOG_DIR holds a form of the secret", no_leak_in_logs([200]))

    # --- KMS down ---

    def stop_kms():
        host, port = port_of(os.environ["AWS_ENDPOINT_URL_KMS"])
        pid = int(os.environ["KMS_PID"])
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                command = cmdline.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            raise Failed(f"KMS_PID {pid} is not a running process") from None
        if "moto_server" not in command:
            raise Failed(f"KMS_PID {pid} is not the local KMS: {command[:200]}")
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        while is_open(host, port):
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                time.sleep(1)
                if is_open(host, port):
                    raise Failed(f"port {port} still open 15 s after SIGTERM and a SIGKILL to {pid}")
                break
            time.sleep(0.1)
        return f"pid {pid} stopped, nothing listens on {host}:{port}"
    step("the local KMS stops (KMS_PID), and its port closes", stop_kms)

    def outage_is_503():
        before = aws.item()
        started = time.monotonic()
        status, headers, raw, envelope = put(API_KEY_ID, {"api_key": OUTAGE_SENTINEL, "name": "Not written"})
        took = time.monotonic() - started
        no_leak_in_response(status, headers, raw)
        if status != 503:
            raise Failed(f"status {status}, expected 503: {redact(raw.decode())}")
        retry_after = headers.get("retry-after")
        if not retry_after or not retry_after.isdigit() or int(retry_after) < 1:
            raise Failed(f"Retry-After is {retry_after!r}, expected a positive number of seconds")
        details = envelope.get("errorDetails") or {}
        if details.get("code") != "unavailable" or envelope.get("status") != 503 or envelope.get("error") is not True \
                or envelope.get("data") is not None:
            raise Failed(f"the envelope is {json.dumps(envelope)}, expected error true, status 503, data null, "
                         "errorDetails.code unavailable")
        after = aws.item()
        if after != before:
            changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
            raise Failed(f"the raw item changed: {changed}")
        return f"503 in {took:.1f} s, Retry-After {retry_after}, code unavailable; the raw item unchanged"
    step("with KMS down, a PUT with api_key is 503 with Retry-After, code unavailable, nothing written",
         outage_is_503)

    def plain_write_goes_on():
        before = aws.item()
        status, headers, raw, envelope = put(API_KEY_ID, {"enabled": False})
        no_leak_in_response(status, headers, raw)
        if status != 200:
            raise Failed(f"status {status}, expected 200: {redact(raw.decode())}")
        after = aws.item()
        if sealed_bytes(after) != sealed_bytes(before):
            raise Failed("the sealed api_key changed on a write that did not set it")
        if after.get("enabled") != {"BOOL": False} or after.get("updated_fields") != {"SS": ["enabled"]}:
            raise Failed(f"enabled {after.get('enabled')}, updated_fields {after.get('updated_fields')}: "
                         "expected false and SS [enabled]")
        return f"200, ETag {headers.get('etag')}; the sealed api_key as it was, updated_fields SS [enabled]"
    step("with KMS down, a PUT without api_key is 200 and keeps the sealed value", plain_write_goes_on)

    def mcp_outage_is_503():
        done = []
        for what, body in (("a rename", {"name": "Not written"}),
                           ("a PUT of headers", {"headers": {"Authorization": HEADER_OUTAGE_SENTINEL}})):
            before = mcp_item(aws)
            status, headers, raw, envelope = put_mcp(MCP_ID, body)
            no_leak_in_response(status, headers, raw)
            if status != 503 or (envelope.get("errorDetails") or {}).get("code") != "unavailable" \
                    or not headers.get("retry-after"):
                raise Failed(f"{what}: status {status}, expected 503 unavailable with Retry-After: "
                             f"{redact(raw.decode())}")
            if mcp_item(aws) != before:
                raise Failed(f"{what}: the raw item changed")
            done.append(f"{what}: 503, unchanged")
        return "; ".join(done)
    step("with KMS down, a rename of the sealed MCP server and a PUT of headers are 503, nothing written",
         mcp_outage_is_503)

    def what_needs_no_kms_goes_on():
        status, _, raw, envelope = put_mcp(UNSEALED_MCP_ID, {"name": "Renamed without KMS"})
        if status != 200 or (envelope.get("data") or {}).get("headers") != {"X-Plain": "plain"}:
            raise Failed(f"the unsealed MCP server's rename: status {status}: {redact(raw.decode())}")
        status, _, raw, _ = put(None, {"name": "Model without KMS"},
                                f"/api/agent-server/models/{MODEL_ID}?project_id={PROJECT_ID}")
        if status != 200:
            raise Failed(f"the model update: status {status}: {redact(raw.decode())}")
        return "the unsealed MCP server's rename: 200 with its plain header; the model update: 200"
    step("with KMS down, a rename of an MCP server without sealed headers and a model update are 200",
         what_needs_no_kms_goes_on)

    # --- Afterwards: neither secret anywhere ---

    def nowhere_after():
        items = [p for logical, items in aws.all_items().items() for p in leaks(items, logical)]
        records = [p for logical, (_, rs) in aws.stream_records().items() for p in leaks(rs, logical)]
        if items or records:
            raise Failed(f"the secrets are in raw items at {items} and stream records at {records}")
        return "no raw item and no stream record holds a form of either secret"
    step("after the outage, neither secret is in any raw item or stream record", nowhere_after)
    step("after the outage, no log file in LOG_DIR holds a form of either secret",
         no_leak_in_logs([200, 503]))

    return step.finish()


if __name__ == "__main__":
    sys.exit(main())
