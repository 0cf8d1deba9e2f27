"""What neither cfn-guard nor cfn-lint can express: each change-event pipe's
InputTemplate builds exactly its allow-listed fields from their one place in
the stream record, what it renders (tools/events/pipes.py, following AWS's
rules) from a record written through the API and from one written outside it
is an event events.schema.json accepts, and the schema describes exactly the
pipes' events. Run by `make validate` with the tools virtualenv's Python;
tools/check_cases.py runs it on the breakages of tools/cases/events.yaml.
"""

import importlib.util
import json
import os
import re
import sys

import jsonschema
from samcli.yamlhelper import yaml_parse

HERE = os.path.dirname(os.path.abspath(__file__))
# tools/events/pipes.py, loaded by path (the standard library has a `pipes` too).
_spec = importlib.util.spec_from_file_location("agent_server_pipes", os.path.join(HERE, "events", "pipes.py"))
PIPES = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(PIPES)

# Per table: its pipe and the event's detail type.
CHANGE_PIPES = {"ApiKeysTable": ("ApiKeysChangePipe", "API key updated"),
                "McpServersTable": ("McpServersChangePipe", "MCP server updated"),
                "ModelsTable": ("ModelsChangePipe", "Model updated")}
# The allow-list: each field of an event's detail comes from one attribute
# of the new image, of one type; every event has every field but project_id,
# which API keys lack. Nothing else of the record (api_key, headers,
# parameters, name, endpoint...) may reach an event.
EVENT_FIELDS = {field: f"$.dynamodb.NewImage.{field}.{kind}" for field, kind in [
    ("id", "S"), ("project_id", "S"), ("version", "N"), ("updated_at", "S"), ("updated_by", "S"),
    ("updated_fields", "SS")]}
# Fields whose placeholder sits unquoted in brackets, [<path>]: a string set
# renders as a JSON array, and a set the item lacks as nothing, so the
# field is [[...]] or [] and the text stays JSON either way. Every other
# placeholder is quoted, "<path>" (an absent attribute renders as "").
LIST_FIELDS = {"updated_fields"}


def check_input_template(table, name, text):
    """The template is a JSON object of exactly the table's fields, each the
    quoted placeholder of its allow-listed attribute (in brackets for
    LIST_FIELDS): no other placeholder (no other attribute, no whole image,
    no aws.pipes.event), no constant, no field twice."""
    wanted = {field: [f"<{path}>"] if field in LIST_FIELDS else f"<{path}>"
              for field, path in EVENT_FIELDS.items() if field != "project_id" or table != "ApiKeysTable"}
    try:  # [<path>] reads as a list of one quoted placeholder; an unquoted one stays invalid JSON
        pairs = json.loads(re.sub(r"\[(<[^<>]*>)\]", r'["\1"]', text), object_pairs_hook=tuple)
    except (TypeError, ValueError) as error:
        return [f"{name}'s InputTemplate is not a JSON object of quoted placeholders ({error}): {text}"]
    if not isinstance(pairs, tuple) or len(pairs) != len(wanted) or dict(pairs) != wanted:
        return [f"{name}'s InputTemplate must build exactly {json.dumps(wanted)}, builds {text}"]
    return []


def sample_record(table, with_writer):
    """A MODIFY stream record of `table` as a pipe receives it, carrying
    every kind of content (a sealed secret, headers, parameters, a name);
    with or without the writer's updated_by and updated_fields."""
    image = {"id": {"S": "7c8d9e0f-1a2b-4c3d-9e4f-5a6b7c8d9e0f"}, "version": {"N": "2"},
             "created_at": {"S": "2026-01-01T00:00:00.000Z"}, "updated_at": {"S": "2026-01-02T03:04:05.678Z"},
             "name": {"S": "a name"}}
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
    """What each pipe's InputTemplate makes of a record written through the
    API, and of one written outside it (no updated_by, no updated_fields),
    is an event the schema accepts; the schema refuses the field list flat."""
    validator, problems = jsonschema.Draft202012Validator(schema), []
    for name, _ in CHANGE_PIPES.values():
        properties = template.get("Resources", {}).get(name, {}).get("Properties", {})
        source = properties.get("Source")  # the records of the table whose stream it reads
        table = source.get("Fn::GetAtt", [None])[0] if isinstance(source, dict) else None
        if table not in CHANGE_PIPES:
            continue  # no table's (the Guard rules say which)
        pipe = PIPES.Pipe(name, table, properties)
        for with_writer in (True, False):
            what = "an API write" if with_writer else "a record without updated_by and updated_fields"
            try:
                event = pipe.event(sample_record(table, with_writer))
            except PIPES.TemplateError as error:
                problems.append(f"{name} cannot render {what}: {error}")
                continue
            if event is None:
                problems.append(f"{name}'s filter drops a MODIFY record")
                continue
            error = next(validator.iter_errors(event), None)
            if error:
                problems.append(f"events.schema.json refuses what {name} makes of {what}: {error.message} "
                                f"at {list(error.path)}: {json.dumps(event['detail'])}")
            flat = dict(event, detail=dict(event["detail"], updated_fields=["name"]))
            if with_writer and validator.is_valid(flat):
                problems.append("events.schema.json accepts a flat updated_fields, which no pipe renders")
    return problems


def check_event_schema(schema, template):
    """The schema is valid JSON Schema (2020-12), with the pipes' source,
    detail types and detail fields, no other detail field, each required but
    project_id (its allOf requires that of MCP servers and models only)."""
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as error:
        return [f"events.schema.json is not a valid JSON Schema: {error.message}"]
    properties, detail = schema.get("properties", {}), schema.get("$defs", {}).get("detail", {})
    wanted_and_found = {
        "$schema": ("https://json-schema.org/draft/2020-12/schema", schema.get("$schema")),
        "source": ({"const": "agent-server"}, properties.get("source")),
        "detail-type enum": (sorted(t for _, t in CHANGE_PIPES.values()),
                             sorted(properties.get("detail-type", {}).get("enum", []))),
        "detail": ({"$ref": "#/$defs/detail"}, properties.get("detail")),
        "detail's additionalProperties": (False, detail.get("additionalProperties")),
        "detail's fields": (sorted(EVENT_FIELDS), sorted(detail.get("properties", {}))),
        "detail's required": (sorted(set(EVENT_FIELDS) - {"project_id"}), sorted(detail.get("required", []))),
    }
    problems = [f"events.schema.json's {key} must be {json.dumps(wanted)}, is {json.dumps(found)}"
                for key, (wanted, found) in wanted_and_found.items() if wanted != found]
    return problems or check_rendering(schema, template)


def check(template, schema):
    """Every pipe's InputTemplate, and the schema with what they render."""
    problems = []
    for table, (name, _) in CHANGE_PIPES.items():
        target = template.get("Resources", {}).get(name, {}).get("Properties", {}).get("TargetParameters", {})
        problems += check_input_template(table, name, target.get("InputTemplate"))
    return problems + check_event_schema(schema, template)


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "template.yaml"
    with open(path) as template_file:
        template = yaml_parse(template_file.read())
    # The change events' JSON Schema lives beside the template.
    with open(os.path.join(os.path.dirname(os.path.abspath(path)), "events.schema.json")) as schema_file:
        schema = json.load(schema_file)
    problems = list(dict.fromkeys(check(template, schema)))
    for problem in problems:
        print(f"events check: {problem}", file=sys.stderr)
    if problems:
        sys.exit(1)
    print("events check: each pipe's input template builds exactly its allow-listed fields, and what it "
          "renders is an event events.schema.json accepts")


if __name__ == "__main__":
    main()
