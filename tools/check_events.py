"""What neither cfn-guard nor cfn-lint can express: each change-event pipe's
InputTemplate builds exactly its allow-listed fields from their one place in
the stream record (quoted, the field list in brackets), and what it renders
(tools/events/pipes.py, following AWS's rules) from a record written through
the API and from one written outside it is an event events.schema.json
accepts; and the schema describes exactly the pipes' events. A self-test
breaks copies of the template and of the schema and expects this check to
notice. Run by `make validate` with the tools virtualenv's Python.
"""

import copy
import importlib.util
import json
import os
import re
import sys

import jsonschema
from samcli.yamlhelper import yaml_parse

# Change events: per table, its pipe, the pipe's role, the event's detail
# type and the fields of the event's detail.
CHANGE_PIPES = {
    "ApiKeysTable": ("ApiKeysChangePipe", "ApiKeysChangePipeRole", "API key updated",
                     ("id", "version", "updated_at", "updated_by", "updated_fields")),
    "McpServersTable": ("McpServersChangePipe", "McpServersChangePipeRole", "MCP server updated",
                        ("id", "project_id", "version", "updated_at", "updated_by", "updated_fields")),
    "ModelsTable": ("ModelsChangePipe", "ModelsChangePipeRole", "Model updated",
                    ("id", "project_id", "version", "updated_at", "updated_by", "updated_fields")),
}
# The allow-list: each field of an event's detail, and the one place of the
# stream record it may come from. Nothing else of the record (api_key,
# headers, parameters, name, endpoint...) may reach an event.
EVENT_FIELDS = {
    "id": "$.dynamodb.NewImage.id.S",
    "project_id": "$.dynamodb.NewImage.project_id.S",
    "version": "$.dynamodb.NewImage.version.N",
    "updated_at": "$.dynamodb.NewImage.updated_at.S",
    "updated_by": "$.dynamodb.NewImage.updated_by.S",
    "updated_fields": "$.dynamodb.NewImage.updated_fields.SS",
}
# Fields whose placeholder sits unquoted in brackets, [<path>]: a string set
# renders as a JSON array, and a set the item lacks as nothing, so the
# field is [[...]] or [] and the text stays JSON either way. Every other
# placeholder is quoted, "<path>" (an absent attribute renders as "").
LIST_FIELDS = {"updated_fields"}
EVENT_SOURCE = "agent-server"


def check_input_template(name, text, fields):
    """The template is a JSON object of exactly `fields`, each the quoted
    placeholder of its allow-listed attribute (in brackets for LIST_FIELDS):
    no other placeholder (no other attribute, no whole image, no
    aws.pipes.event), no constant."""
    if not isinstance(text, str):
        return [f"{name}'s InputTemplate is not a plain string: {json.dumps(text)}"]
    problems = []
    allowed = {EVENT_FIELDS[field] for field in fields}
    for placeholder in re.findall(r"<([^<>]*)>", text):
        if placeholder not in allowed:
            problems.append(f"{name}'s InputTemplate references <{placeholder}>, outside the allow-list "
                            f"{sorted(allowed)}")
    # Placeholders become strings the JSON parser can read: a quoted one
    # stays a string value, a bracketed list field's a list of one string,
    # any other unquoted one makes the text invalid.
    marked = text
    for field in LIST_FIELDS & set(fields):
        marked = marked.replace(f"[<{EVENT_FIELDS[field]}>]", f'["\u27e8{EVENT_FIELDS[field]}\u27e9"]')
    marked = re.sub(r"<([^<>]*)>", lambda m: "\u27e8" + m.group(1) + "\u27e9", marked)

    def no_duplicates(pairs):
        keys = [k for k, _ in pairs]
        if len(keys) != len(set(keys)):
            raise ValueError(f"duplicate keys {keys}")
        return dict(pairs)
    try:
        detail = json.loads(marked, object_pairs_hook=no_duplicates)
    except ValueError as error:
        return problems + [f"{name}'s InputTemplate is not a JSON object of quoted placeholders ({error}): {text}"]
    if not isinstance(detail, dict) or sorted(detail) != sorted(fields):
        return problems + [f"{name}'s InputTemplate must build exactly {list(fields)}, builds {text}"]
    for field in fields:
        placeholder = "\u27e8" + EVENT_FIELDS[field] + "\u27e9"
        if field in LIST_FIELDS and detail[field] != [placeholder]:
            problems.append(f"{name}'s InputTemplate must set {field} to [<{EVENT_FIELDS[field]}>], "
                            f"sets {json.dumps(detail[field], ensure_ascii=False)}")
        elif field not in LIST_FIELDS and detail[field] != placeholder:
            problems.append(f"{name}'s InputTemplate must set {field} to \"<{EVENT_FIELDS[field]}>\", "
                            f"sets {json.dumps(detail[field], ensure_ascii=False)}")
    return problems


def load_pipes_module():
    """tools/events/pipes.py, the emulation of the pipes' filter and input
    template (loaded by path: the standard library has a `pipes` too)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "events", "pipes.py")
    spec = importlib.util.spec_from_file_location("agent_server_pipes", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def sample_record(table, with_writer):
    """A MODIFY stream record of `table` as a pipe receives it, carrying
    every kind of content (a sealed secret, headers, parameters, a name);
    with or without the writer's updated_by and updated_fields."""
    image = {
        "id": {"S": "7c8d9e0f-1a2b-4c3d-9e4f-5a6b7c8d9e0f"},
        "version": {"N": "2"},
        "created_at": {"S": "2026-01-01T00:00:00.000Z"},
        "updated_at": {"S": "2026-01-02T03:04:05.678Z"},
        "name": {"S": "a name"},
    }
    if table != "ApiKeysTable":
        image["project_id"] = {"S": "8a4b2c1d-3e5f-4a6b-8c7d-9e0f1a2b3c4d"}
    image.update({
        "ApiKeysTable": {"api_key": {"B": "c2VhbGVk"}, "enabled": {"BOOL": True}},
        "McpServersTable": {"endpoint": {"S": "https://mcp.example.com"},
                            "headers": {"M": {"Authorization": {"S": "Bearer x"}}}},
        "ModelsTable": {"model_id": {"S": "m"}, "parameters": {"M": {"t": {"N": "0.5"}}}},
    }[table])
    if with_writer:
        image["updated_by"] = {"S": "arn:aws:iam::123456789012:user/someone"}
        image["updated_fields"] = {"SS": ["name", "enabled"]}
    return {"eventID": "1", "eventName": "MODIFY", "eventVersion": "1.1", "eventSource": "aws:dynamodb",
            "awsRegion": "us-east-1", "dynamodb": {"Keys": {"id": image["id"]}, "NewImage": image,
                                                   "StreamViewType": "NEW_IMAGE"},
            "eventSourceARN": f"arn:aws:dynamodb:us-east-1:123456789012:table/{table}/stream/x"}


def check_rendering(schema, template):
    """What each pipe's InputTemplate (as pipes.py renders it, following
    AWS's rules) makes of a record written through the API, and of one
    written outside it (no updated_by, no updated_fields), is an event
    events.schema.json accepts; the schema refuses the field list flat."""
    pipes = load_pipes_module()
    validator = jsonschema.Draft202012Validator(schema)
    problems = []
    for name, resource in template.get("Resources", {}).items():
        if resource.get("Type") != "AWS::Pipes::Pipe":
            continue
        source = resource.get("Properties", {}).get("Source", {})
        table = source.get("Fn::GetAtt", [None])[0] if isinstance(source, dict) else None
        if table not in CHANGE_PIPES:
            continue
        pipe = pipes.Pipe(name, table, json.loads(json.dumps(resource["Properties"])))
        for with_writer in (True, False):
            what = "an API write" if with_writer else "a record without updated_by and updated_fields"
            try:
                event = pipe.event(sample_record(table, with_writer))
            except pipes.TemplateError as error:
                problems.append(f"{name} cannot render {what}: {error}")
                continue
            if event is None:
                problems.append(f"{name}'s filter drops a MODIFY record")
                continue
            errors = list(validator.iter_errors(event))
            if errors:
                problems.append(f"events.schema.json refuses what {name} makes of {what}: "
                                f"{errors[0].message} at {list(errors[0].path)}: {json.dumps(event['detail'])}")
            if with_writer:
                flat = {**event, "detail": {**event["detail"], "updated_fields": ["name"]}}
                if validator.is_valid(flat):
                    problems.append("events.schema.json accepts updated_fields as a flat list, which no pipe renders")
    return problems


def check_event_schema(schema, template=None):
    """events.schema.json describes what the pipes publish: a valid JSON
    Schema (2020-12) whose source, detail types and detail fields are the
    pipes', with no other detail field allowed, accepting what the pipes
    make of records with and without the writer's attributes."""
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as error:
        return [f"events.schema.json is not a valid JSON Schema: {error.message}"]
    problems = []
    if schema.get("$schema") != "https://json-schema.org/draft/2020-12/schema":
        problems.append("events.schema.json must declare draft 2020-12")
    properties = schema.get("properties", {})
    if properties.get("source") != {"const": EVENT_SOURCE}:
        problems.append(f"events.schema.json must fix source to {EVENT_SOURCE}")
    detail_types = sorted(detail_type for _, _, detail_type, _ in CHANGE_PIPES.values())
    if sorted(properties.get("detail-type", {}).get("enum", [])) != detail_types:
        problems.append(f"events.schema.json's detail-type enum must be {detail_types}")
    detail = schema.get("$defs", {}).get("detail", {})
    if properties.get("detail") != {"$ref": "#/$defs/detail"} or detail.get("additionalProperties") is not False:
        problems.append("events.schema.json's detail must be $defs/detail, with additionalProperties false")
    if sorted(detail.get("properties", {})) != sorted(EVENT_FIELDS):
        problems.append(f"events.schema.json's detail fields must be {sorted(EVENT_FIELDS)}, "
                        f"are {sorted(detail.get('properties', {}))}")
    # Every pipe renders every field (project_id on MCP servers and models
    # only, which the schema's allOf says).
    required = sorted(set(EVENT_FIELDS) - {"project_id"})
    if sorted(detail.get("required", [])) != required:
        problems.append(f"events.schema.json's detail must require {required}, requires {detail.get('required')}")
    if template is not None and not problems:
        problems += check_rendering(schema, template)
    return problems


SCHEMA_BREAKAGES = [
    ("a secret field in the schema", lambda s: s["$defs"]["detail"]["properties"].update(api_key={"type": "string"})),
    ("any detail field allowed", lambda s: s["$defs"]["detail"].pop("additionalProperties")),
    ("a detail type no pipe publishes", lambda s: s["properties"]["detail-type"]["enum"].append("Key deleted")),
    ("the absent caller refused", lambda s: s["$defs"]["detail"]["properties"]["updated_by"].update(minLength=1)),
    ("the absent field list refused", lambda s: s["$defs"]["detail"]["properties"]["updated_fields"].update(minItems=1)),
    ("the field list flat", lambda s: s["$defs"]["detail"]["properties"]["updated_fields"].update(
        items={"type": "string"})),
    ("the field list nested or flat", lambda s: s["$defs"]["detail"]["properties"]["updated_fields"].pop("items")),
    ("no caller required", lambda s: s["$defs"]["detail"]["required"].remove("updated_by")),
]


def _pipe(template, name):
    return template["Resources"][name]["Properties"]


_FIELD_LIST = "[<$.dynamodb.NewImage.updated_fields.SS>]"


def _edit_template(template, pipe, old, new):
    """Replaces `old` (which must be there) in a pipe's InputTemplate."""
    target = _pipe(template, pipe)["TargetParameters"]
    if old not in target["InputTemplate"]:
        raise KeyError(f"{old!r} is not in {pipe}'s InputTemplate")
    target["InputTemplate"] = target["InputTemplate"].replace(old, new)


# Ways to break the input templates, each of which check must notice:
# (what, how to break a copy of the template).
TEMPLATE_BREAKAGES = [
    ("a secret in the event", lambda t: _pipe(t, "ApiKeysChangePipe")["TargetParameters"].update(
        InputTemplate='{"id": "<$.dynamodb.NewImage.id.S>", "version": "<$.dynamodb.NewImage.version.N>", '
                      '"updated_at": "<$.dynamodb.NewImage.updated_at.S>", "api_key": "<$.dynamodb.NewImage.api_key.S>"}')),
    ("the headers in a field", lambda t: _pipe(t, "McpServersChangePipe")["TargetParameters"].update(
        InputTemplate=_pipe(t, "McpServersChangePipe")["TargetParameters"]["InputTemplate"].replace(
            "$.dynamodb.NewImage.updated_at.S", "$.dynamodb.NewImage.headers.M"))),
    ("the whole record", lambda t: _pipe(t, "ModelsChangePipe")["TargetParameters"].update(
        InputTemplate="<aws.pipes.event.json>")),
    ("the new image, unquoted", lambda t: _pipe(t, "ModelsChangePipe")["TargetParameters"].update(
        InputTemplate='{"id": "<$.dynamodb.NewImage.id.S>", "project_id": "<$.dynamodb.NewImage.project_id.S>", '
                      '"version": <$.dynamodb.NewImage>, "updated_at": "<$.dynamodb.NewImage.updated_at.S>"}')),
    ("a constant field", lambda t: _pipe(t, "ModelsChangePipe")["TargetParameters"].update(
        InputTemplate=_pipe(t, "ModelsChangePipe")["TargetParameters"]["InputTemplate"][:-1] + ', "name": "x"}')),
    ("no template (the whole record)", lambda t: _pipe(t, "ApiKeysChangePipe")["TargetParameters"].pop("InputTemplate")),
    ("the caller unquoted", lambda t: _edit_template(t, "ModelsChangePipe", '"<$.dynamodb.NewImage.updated_by.S>"',
                                                    "<$.dynamodb.NewImage.updated_by.S>")),
    ("the field list unbracketed", lambda t: _edit_template(t, "McpServersChangePipe", _FIELD_LIST,
                                                            "<$.dynamodb.NewImage.updated_fields.SS>")),
    ("the field list quoted", lambda t: _edit_template(t, "ApiKeysChangePipe", _FIELD_LIST,
                                                       '"<$.dynamodb.NewImage.updated_fields.SS>"')),
    ("no caller", lambda t: _edit_template(t, "ApiKeysChangePipe", ' "updated_by": "<$.dynamodb.NewImage.updated_by.S>",',
                                           "")),
    ("a name as the caller", lambda t: _edit_template(t, "ModelsChangePipe", "$.dynamodb.NewImage.updated_by.S",
                                                      "$.dynamodb.NewImage.name.S")),
    ("the headers as the field list", lambda t: _edit_template(t, "McpServersChangePipe", _FIELD_LIST,
                                                               "[<$.dynamodb.NewImage.headers.M>]")),
]




def check(template, schema):
    """Every pipe's InputTemplate, and the schema with what they render."""
    problems = []
    for pipe, _, _, fields in CHANGE_PIPES.values():
        properties = template.get("Resources", {}).get(pipe, {}).get("Properties", {})
        problems += check_input_template(pipe, properties.get("TargetParameters", {}).get("InputTemplate"), fields)
    return problems + check_event_schema(schema, template)


def self_test(template, schema):
    """Every breakage of TEMPLATE_BREAKAGES and SCHEMA_BREAKAGES is noticed."""
    problems = []
    for what, breakage in TEMPLATE_BREAKAGES:
        broken = copy.deepcopy(template)
        try:
            breakage(broken)
        except (KeyError, IndexError, TypeError) as error:
            problems.append(f"self-test: cannot make {what!r} ({error!r}); update TEMPLATE_BREAKAGES")
            continue
        if not check(broken, schema):
            problems.append(f"self-test: the check misses {what}")
    for what, breakage in SCHEMA_BREAKAGES:
        broken = copy.deepcopy(schema)
        breakage(broken)
        if not check(template, broken):
            problems.append(f"self-test: the event-schema check misses {what}")
    return problems


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "template.yaml"
    with open(path) as template_file:
        template = yaml_parse(template_file.read())
    # The change events' JSON Schema lives beside the template.
    with open(os.path.join(os.path.dirname(os.path.abspath(path)), "events.schema.json")) as schema_file:
        schema = json.load(schema_file)
    problems = check(template, schema)
    # The self-test assumes a template and a schema the check accepts.
    problems = list(dict.fromkeys(problems or self_test(template, schema)))
    for problem in problems:
        print(f"events check: {problem}", file=sys.stderr)
    if problems:
        sys.exit(1)
    print(f"events check: each pipe's input template builds exactly its allow-listed fields, and what it "
          f"renders is an event events.schema.json accepts "
          f"({len(TEMPLATE_BREAKAGES) + len(SCHEMA_BREAKAGES)} ways of breaking that are caught)")


if __name__ == "__main__":
    main()
