"""What the change-event pipes of template.yaml do to a DynamoDB stream record,
done here, offline, from the template itself: keep it or not (the pipe's
filter), turn it into the event's detail (the pipe's InputTemplate), and wrap
that in the EventBridge event the bus receives.

The input-template substitution follows AWS's documented rules for EventBridge
Pipes input transformation: a placeholder is `<$.json.path>` (dot notation,
array indices, into the record as the pipe receives it) or a reserved
`<aws.pipes.*>` variable; a placeholder inside a JSON string is replaced by
the value's text as it is, one outside a string by the value as JSON (so a
string stays a quoted string: a DynamoDB number, which a stream record carries
as a string under "N", stays a string either way; a string set, "SS", is a
JSON array).

The text placed inside a string is not escaped: AWS documents that input
transformers substitute values without escaping them (a reserved variable
holding JSON "is not escaped"), so a `"` or `\` in a value ends the string
early or starts an escape, and the rendered text may be invalid JSON or hold
members the template never wrote. This emulation does exactly that, so a
value that needs escaping shows up here as it would on AWS: as a rendering
that fails to parse, or as a detail with members outside the allow-list.

A path the record lacks renders as nothing: "If you specify a variable to
match a JSON path that doesn't exist in the event, that variable isn't
created and won't appear in the output" (EventBridge input transformation,
Common issues; the Pipes page has no rule of its own and shares the
placeholder syntax). So `"<$.missing>"` becomes `""`, and an unquoted
`<$.missing>` leaves nothing, which usually makes the text invalid JSON (an
error here; on AWS the event could not be put on the bus). This module is
stricter than AWS where AWS is not documented: a non-scalar inside a string
is an error here rather than whatever AWS would render.

Binary attributes ("B", "BS": the sealed api_key) reach the pipe base64-encoded,
as in every JSON rendering of a stream record; pipe_record does the same to
what boto3 returns as bytes.

Used by events_test.py (make events-test) and follow.py (make events).
"""

import base64
import datetime
import json
import os
import re
import uuid

from samcli.yamlhelper import yaml_parse

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TEMPLATE = os.path.join(ROOT, "template.yaml")
SCHEMA = os.path.join(ROOT, "events.schema.json")

# Each table of template.yaml, with the environment variable naming it and
# its local default (the contract's Storage table).
TABLES = {
    "ApiKeysTable": ("API_KEYS_TABLE", "agent-server-api-keys"),
    "McpServersTable": ("MCP_SERVERS_TABLE", "agent-server-mcp-servers"),
    "ModelsTable": ("MODELS_TABLE", "agent-server-models"),
}

# A stand-in account for the local envelope (DynamoDB Local's own).
LOCAL_ACCOUNT = "000000000000"


class TemplateError(Exception):
    """The input template cannot be applied to this record."""


class MissingPath(TemplateError):
    """A placeholder's path is not in the record (it renders as nothing)."""


class Pipe:
    """One AWS::Pipes::Pipe of the template, as far as a record's fate goes."""

    def __init__(self, name, table, properties):
        self.name = name
        self.table = table
        self.table_name = os.environ.get(TABLES[table][0], TABLES[table][1])
        source = properties.get("SourceParameters", {})
        self.patterns = [json.loads(f["Pattern"]) for f in source.get("FilterCriteria", {}).get("Filters", [])]
        target = properties.get("TargetParameters", {})
        self.input_template = target.get("InputTemplate")
        bus = target.get("EventBridgeEventBusParameters", {})
        self.source = bus.get("Source")
        self.detail_type = bus.get("DetailType")

    def passes(self, record):
        """The pipe's filter: no filter passes everything; several pass a
        record that matches any one of them."""
        return not self.patterns or any(matches(pattern, record) for pattern in self.patterns)

    def detail(self, record):
        """The event's detail, parsed: what the input template renders."""
        if self.input_template is None:
            return record  # no template: the whole record goes through
        text = render(self.input_template, record, self.reserved(record))
        try:
            return json.loads(text)
        except ValueError as error:
            raise TemplateError(f"{self.name}'s InputTemplate renders invalid JSON ({error}): {text}") from None

    def reserved(self, record):
        return {
            "aws.pipes.pipe-name": self.name,
            "aws.pipes.source-arn": record.get("eventSourceARN", ""),
            "aws.pipes.event.ingestion-time": utc_now(),
            "aws.pipes.event": json.dumps(record),
            "aws.pipes.event.json": record,
        }

    def event(self, record, region="us-east-1", account=LOCAL_ACCOUNT):
        """The EventBridge event as the bus receives it, or None if the
        filter drops the record."""
        if not self.passes(record):
            return None
        return {
            "version": "0",
            "id": str(uuid.uuid4()),
            "detail-type": self.detail_type,
            "source": self.source,
            "account": account,
            "time": utc_now(seconds=True),
            "region": region,
            "resources": [],
            "detail": self.detail(record),
        }


def utc_now(seconds=False):
    now = datetime.datetime.now(datetime.timezone.utc)
    return now.strftime("%Y-%m-%dT%H:%M:%SZ" if seconds else "%Y-%m-%dT%H:%M:%S.") + (
        "" if seconds else f"{now.microsecond // 1000:03d}Z")


def load_pipes(template_path=TEMPLATE):
    """The template's pipes, by the logical id of the table each reads."""
    with open(template_path) as template_file:
        template = yaml_parse(template_file.read())
    pipes = {}
    for name, resource in template.get("Resources", {}).items():
        if resource.get("Type") != "AWS::Pipes::Pipe":
            continue
        source = resource.get("Properties", {}).get("Source", {})
        table = source.get("Fn::GetAtt", [None])[0] if isinstance(source, dict) else None
        if table not in TABLES:
            raise ValueError(f"pipe {name} reads {json.dumps(source)}, not one of the tables' streams")
        pipes[table] = Pipe(name, table, json.loads(json.dumps(resource["Properties"])))
    return pipes


def load_schema(path=SCHEMA):
    with open(path) as schema_file:
        return json.load(schema_file)


# --- Event patterns (the subset a pipe filter of this project may use) ---

def matches(pattern, event):
    """EventBridge pattern matching for exact values: every key of the
    pattern is in the event, a list of values matches a value equal to one of
    them (or a list of values sharing one), a nested object matches
    recursively. Content filters ({"prefix": ...} and such) are not needed
    here and are refused rather than guessed."""
    if not isinstance(event, dict):
        return False
    for key, expected in pattern.items():
        if key not in event:
            return False
        value = event[key]
        if isinstance(expected, dict):
            if not matches(expected, value):
                return False
            continue
        if not isinstance(expected, list):
            raise ValueError(f"pattern value of {key} is not a list or an object: {expected!r}")
        for option in expected:
            if isinstance(option, (dict, list)):
                raise ValueError(f"content filter {option!r} is not supported by this emulation")
        values = value if isinstance(value, list) else [value]
        if not any(v in expected for v in values):
            return False
    return True


# --- Input templates ---

PLACEHOLDER = re.compile(r"<([^<>]*)>")
SEGMENT = re.compile(r"\.([A-Za-z0-9_\-/]+|\*)|\[([0-9]+|\*)\]")


def resolve(path, record):
    """The value at a JSON path of the supported syntax: $ then .name (letters,
    digits, _, -, /), [n] or .n on arrays."""
    if not path.startswith("$"):
        raise TemplateError(f"not a JSON path: {path}")
    value, rest = record, path[1:]
    while rest:
        match = SEGMENT.match(rest)
        if not match:
            raise TemplateError(f"unsupported JSON path syntax: {path}")
        key = match.group(1) if match.group(1) is not None else match.group(2)
        if key == "*":
            raise TemplateError(f"wildcards are not needed here and not emulated: {path}")
        if isinstance(value, list) and key.isdigit() and int(key) < len(value):
            value = value[int(key)]
        elif isinstance(value, dict) and key in value:
            value = value[key]
        else:
            raise MissingPath(f"{path} is not in the record")
        rest = rest[match.end():]
    return value


def render(template, record, reserved=None):
    """The text the pipe produces from `template` for `record`."""
    reserved = reserved or {}
    out, in_string, escaped, position = [], False, False, 0
    while position < len(template):
        char = template[position]
        if char == "<":
            match = PLACEHOLDER.match(template, position)
            if match:
                name = match.group(1)
                if name in reserved:
                    value = reserved[name]
                elif name.startswith("$"):
                    try:
                        value = resolve(name, record)
                    except MissingPath:
                        position = match.end()  # nothing appears in its place
                        continue
                else:
                    raise TemplateError(f"unknown variable <{name}>")
                out.append(inside_string(name, value) if in_string else json.dumps(value))
                position = match.end()
                continue
        out.append(char)
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        position += 1
    return "".join(out)


def inside_string(name, value):
    """A value placed inside a JSON string: its text as it is, unescaped, as
    AWS's input transformers place it (plain substitution)."""
    if isinstance(value, (dict, list)):
        raise TemplateError(f"<{name}> is an object or array, and sits inside a JSON string")
    return value if isinstance(value, str) else json.dumps(value)


# --- Stream records ---

def pipe_record(record, stream_arn):
    """A record from boto3's dynamodbstreams GetRecords, shaped as the pipe
    receives it (the Lambda-style DynamoDB event): ApproximateCreationDateTime
    in epoch seconds, binary values base64-encoded, plus the stream's ARN as
    eventSourceARN."""
    record = dict(record)
    dynamodb = dict(record.get("dynamodb", {}))
    created = dynamodb.get("ApproximateCreationDateTime")
    if isinstance(created, datetime.datetime):
        dynamodb["ApproximateCreationDateTime"] = int(created.timestamp())
    record["dynamodb"] = as_json(dynamodb)
    record["eventSourceARN"] = stream_arn
    return record


def as_json(value):
    """bytes (boto3's B and BS values) as the base64 text JSON carries."""
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, dict):
        return {k: as_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [as_json(v) for v in value]
    return value


class StreamReader:
    """Follows every shard of one table's stream with boto3's
    dynamodbstreams client, the way a pipe does: from the start of the
    stream (TRIM_HORIZON) or from now (LATEST), then each new record once,
    shards found later included (from their start)."""

    def __init__(self, streams, stream_arn, start="TRIM_HORIZON"):
        self.streams = streams
        self.arn = stream_arn
        self.iterators = {}  # shard id -> next iterator (None once the shard is closed and read)
        self.refresh(start)

    def refresh(self, start="TRIM_HORIZON"):
        shards, kwargs = [], {"StreamArn": self.arn}
        while True:
            description = self.streams.describe_stream(**kwargs)["StreamDescription"]
            shards += description.get("Shards", [])
            last = description.get("LastEvaluatedShardId")
            if not last:
                break
            kwargs["ExclusiveStartShardId"] = last
        for shard in shards:
            if shard["ShardId"] not in self.iterators:
                self.iterators[shard["ShardId"]] = self.streams.get_shard_iterator(
                    StreamArn=self.arn, ShardId=shard["ShardId"], ShardIteratorType=start)["ShardIterator"]

    def read(self):
        """Every record written since the last read, shard by shard."""
        self.refresh()
        records = []
        for shard, iterator in self.iterators.items():
            while iterator:
                response = self.streams.get_records(ShardIterator=iterator)
                batch = response.get("Records", [])
                records += [pipe_record(r, self.arn) for r in batch]
                next_iterator = response.get("NextShardIterator")
                if not batch:
                    iterator = next_iterator
                    break
                iterator = next_iterator
            self.iterators[shard] = iterator
        return records
