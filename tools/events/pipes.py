"""template.yaml's change-event pipes (filter, InputTemplate, envelope) applied offline to stream
records, and the tables' streams read as a pipe reads them.

Substitution follows AWS's documented rules: `<$.path>` outside a JSON string becomes the value as JSON
(an "N" stays a string, an "SS" is an array); inside one, its text NOT escaped, so a `"` or `\\` in it
can break the JSON or add members, here as on AWS. A missing path renders as nothing. What no template
here needs (`<aws.pipes.*>`, wildcards, content filters) is an error rather than a guess."""

import base64
import datetime
import functools
import importlib.util
import json
import os
import re
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TEMPLATE = os.path.join(ROOT, "template.yaml")
SCHEMA = os.path.join(ROOT, "events.schema.json")
# tools/kinds.py, loaded by path: the record kinds and where the template puts each.
_spec = importlib.util.spec_from_file_location("agent_server_kinds", os.path.join(ROOT, "tools", "kinds.py"))
KINDS = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(KINDS)
# tools/expand.py, likewise: a template's loops expanded.
_spec = importlib.util.spec_from_file_location("agent_server_expand", os.path.join(ROOT, "tools", "expand.py"))
EXPAND = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(EXPAND)
PLACEHOLDER = re.compile(r"<([^<>]*)>")
JSON_PATH = re.compile(r"\$(\.[A-Za-z0-9_\-/]+|\[[0-9]+\])*")  # the syntax emulated: no wildcards
MISSING = object()  # what a path the record lacks resolves to


class Pipe:
    """One AWS::Pipes::Pipe of the template, as far as a record's fate goes."""

    def __init__(self, name, properties):
        self.name = name
        # The table whose records it gets (!GetAtt Table.StreamArn, or the same through Fn::Sub); None
        # unless its Source names exactly one resource.
        named = set(KINDS.refs(properties.get("Source")))
        self.table = named.pop() if len(named) == 1 else None
        kind = kinds_by_table().get(self.table)
        self.table_name = os.environ.get(kind["table_variable"], kind["table_default"]) if kind else None
        filters = properties.get("SourceParameters", {}).get("FilterCriteria", {}).get("Filters", [])
        self.patterns = [json.loads(f["Pattern"]) for f in filters]
        target = properties.get("TargetParameters", {})
        self.input_template = target.get("InputTemplate")
        bus = target.get("EventBridgeEventBusParameters", {})
        self.source, self.detail_type = bus.get("Source"), bus.get("DetailType")

    def passes(self, record):
        """No filter passes everything; several pass what any one of them matches."""
        return not self.patterns or any(matches(pattern, record) for pattern in self.patterns)

    def detail(self, record):
        """The event's detail, parsed: what the InputTemplate renders (without one, the record)."""
        if self.input_template is None:
            return record
        text = render(self.input_template, record)
        try:
            return json.loads(text)
        except ValueError as error:
            raise ValueError(f"{self.name}'s InputTemplate renders invalid JSON ({error}): {text}") from None

    def event(self, record, region="us-east-1", account="000000000000"):
        """The EventBridge event the bus receives, or None if the filter drops the record."""
        if not self.passes(record):
            return None
        return {"version": "0", "id": str(uuid.uuid4()), "detail-type": self.detail_type, "source": self.source,
                "account": account, "time": utc_now(seconds=True), "region": region, "resources": [],
                "detail": self.detail(record)}


def utc_now(seconds=False):
    now = datetime.datetime.now(datetime.timezone.utc)
    return now.isoformat(timespec="seconds" if seconds else "milliseconds").replace("+00:00", "Z")


def load(path=TEMPLATE):
    """A template (long form, as SAM reads it, its loops expanded) or a JSON file."""
    return EXPAND.load(path)


@functools.cache
def kinds_by_table():
    """template.yaml's record kinds (tools/kinds.py), by their tables' logical ids."""
    return KINDS.by_table(load())


def load_pipes(template_path=TEMPLATE):
    """The template's pipes, by the logical id of the table each reads."""
    pipes = {}
    for name, resource in load(template_path).get("Resources", {}).items():
        if resource.get("Type") == "AWS::Pipes::Pipe":
            pipe = Pipe(name, resource.get("Properties", {}))
            if pipe.table not in kinds_by_table():
                raise ValueError(f"pipe {name} reads no table's stream")
            pipes[pipe.table] = pipe
    return pipes


def matches(pattern, event):
    """EventBridge matching of exact values: each key's value (or one in its list) listed, objects alike."""
    for key, expected in pattern.items():
        if not isinstance(event, dict) or key not in event:
            return False
        if isinstance(expected, dict):
            if not matches(expected, event[key]):
                return False
            continue
        if any(isinstance(option, (dict, list)) for option in expected):
            raise ValueError(f"content filters are not emulated: {expected!r}")
        values = event[key] if isinstance(event[key], list) else [event[key]]
        if not any(value in expected for value in values):
            return False
    return True


def resolve(path, record):
    """The value at `path` ($ then .name or [n] segments; .n on an array too), or MISSING."""
    if not JSON_PATH.fullmatch(path):
        raise ValueError(f"<{path}> is not emulated (no reserved variable, no wildcard)")
    value = record
    for key in re.findall(r"[A-Za-z0-9_\-/]+", path[1:]):  # the segments' names and indices
        if isinstance(value, list) and key.isdigit() and int(key) < len(value):
            value = value[int(key)]
        elif isinstance(value, dict) and key in value:
            value = value[key]
        else:
            return MISSING
    return value


def render(template, record):
    """The text the pipe makes of `template` for `record`."""
    out, literal, position = [], "", 0
    for match in PLACEHOLDER.finditer(template):
        out.append(template[position:match.start()])
        literal += out[-1]
        position = match.end()
        value = resolve(match.group(1), record)
        if value is MISSING:
            continue  # nothing appears in its place
        # Inside a string if the template so far has an odd number of unescaped quotes.
        if re.sub(r"\\.", "", literal).count('"') % 2 == 0:
            out.append(json.dumps(value))
        elif isinstance(value, (dict, list)):
            raise ValueError(f"<{match.group(1)}> is an object or array, and sits inside a JSON string")
        else:
            out.append(value if isinstance(value, str) else json.dumps(value))  # unescaped, as on AWS
    return "".join(out) + template[position:]


def sample_record(table, kind, with_writer=True):
    """A MODIFY record of `table`, which holds `kind` (tools/kinds.py), as a pipe receives it, with or
    without updated_by, updated_fields, idempotency_key and the kind's own string sets (each but the
    last: an absent one renders as an empty list)."""
    image = {"id": {"S": "7c8d9e0f-1a2b-4c3d-9e4f-5a6b7c8d9e0f"}, "version": {"N": "2"},
             "updated_at": {"S": "2026-01-02T03:04:05.678Z"}, "name": {"S": "a name"}}
    if kind["scoped_by_project"]:
        image["project_id"] = {"S": "8a4b2c1d-3e5f-4a6b-8c7d-9e0f1a2b3c4d"}
    if with_writer:
        image.update(updated_by={"S": "arn:aws:iam::123456789012:user/someone"}, updated_fields={"SS": ["name"]},
                     idempotency_key={"S": "retry-1%22"})
        image.update({name: {"SS": ["search", "read%22file"]} for name in kind["event_sets"][:-1]})
    return {"eventID": "1", "eventName": "MODIFY", "dynamodb": {"Keys": {"id": image["id"]}, "NewImage": image},
            "eventSourceARN": f"arn:aws:dynamodb:us-east-1:123456789012:table/{table}/stream/x"}


def pipe_record(record, stream_arn):
    """A record of boto3's GetRecords as the pipe receives it: ApproximateCreationDateTime in epoch
    seconds, bytes (B, BS) as base64 text, and the stream's ARN as eventSourceARN."""
    dynamodb = dict(record.get("dynamodb", {}))
    created = dynamodb.get("ApproximateCreationDateTime")
    if isinstance(created, datetime.datetime):
        dynamodb["ApproximateCreationDateTime"] = int(created.timestamp())
    dynamodb = json.loads(json.dumps(dynamodb, default=lambda data: base64.b64encode(data).decode("ascii")))
    return dict(record, dynamodb=dynamodb, eventSourceARN=stream_arn)


def clients(endpoint, region, **options):
    """boto3's dynamodb and dynamodbstreams clients on a local endpoint."""
    import boto3  # here, so that tools/check_events.py need not load it
    options.update(endpoint_url=endpoint, region_name=region, aws_access_key_id="local", aws_secret_access_key="local")
    return boto3.client("dynamodb", **options), boto3.client("dynamodbstreams", **options)


class StreamReader:
    """One table's NEW_IMAGE stream, every shard read as a pipe reads it, each new record once."""

    def __init__(self, dynamodb, streams, table_name, start):
        description = dynamodb.describe_table(TableName=table_name)["Table"]
        spec = description.get("StreamSpecification", {})
        if not spec.get("StreamEnabled") or spec.get("StreamViewType") != "NEW_IMAGE":
            raise ValueError(f"{table_name} has no NEW_IMAGE stream ({spec}): rebuild local-api (local/src/setup.rs)")
        self.streams, self.arn = streams, description["LatestStreamArn"]
        self.iterators = {}  # shard id -> next iterator
        self.add_shards(start)

    def add_shards(self, start="TRIM_HORIZON"):
        request = {"StreamArn": self.arn}
        while True:
            description = self.streams.describe_stream(**request)["StreamDescription"]
            for shard in description.get("Shards", []):
                if shard["ShardId"] not in self.iterators:
                    self.iterators[shard["ShardId"]] = self.streams.get_shard_iterator(
                        StreamArn=self.arn, ShardId=shard["ShardId"], ShardIteratorType=start)["ShardIterator"]
            if not description.get("LastEvaluatedShardId"):
                return
            request["ExclusiveStartShardId"] = description["LastEvaluatedShardId"]

    def read(self):
        """Every record written since the last read."""
        self.add_shards()
        records = []
        for shard, iterator in self.iterators.items():
            if iterator:  # None: the shard is closed and read
                response = self.streams.get_records(ShardIterator=iterator)
                records += [pipe_record(record, self.arn) for record in response.get("Records", [])]
                self.iterators[shard] = response.get("NextShardIterator")
        return records
