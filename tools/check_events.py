"""Each change-event pipe's InputTemplate builds exactly its allow-listed fields, renders (as
tools/events/pipes.py does) events that events.schema.json accepts, and the schema describes exactly
the pipes' events. Run by `make validate`; tools/check_cases.py calls check(template, schema)."""

import importlib.util
import json
import os
import re
import sys

import jsonschema

# tools/events/pipes.py, loaded by path (the standard library has a `pipes` too).
_spec = importlib.util.spec_from_file_location(
    "agent_server_pipes", os.path.join(os.path.dirname(os.path.abspath(__file__)), "events", "pipes.py"))
PIPES = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(PIPES)

# Per table: its pipe and the event's detail type.
CHANGE_PIPES = {"ApiKeysTable": ("ApiKeysChangePipe", "API key updated"),
                "McpServersTable": ("McpServersChangePipe", "MCP server updated"),
                "ModelsTable": ("ModelsChangePipe", "Model updated")}
# The allow-list: each detail field comes from one attribute of the new image, of one type. Every
# event has every field but project_id, which API keys lack; nothing else of the record may reach it.
EVENT_FIELDS = {field: f"$.dynamodb.NewImage.{field}.{kind}" for field, kind in [("id", "S"), ("project_id", "S"),
                ("version", "N"), ("updated_at", "S"), ("updated_by", "S"), ("updated_fields", "SS"),
                ("idempotency_key", "S")]}
# A table's own fields beside those: an MCP server's event names the tools a verification moved in its
# pin (string sets of percent-encoded names; docs/change-events.md).
TABLE_FIELDS = {"McpServersTable": {field: f"$.dynamodb.NewImage.{field}.SS"
                                    for field in ("tools_added", "tools_removed", "tools_changed")}}
# Unquoted in brackets, [<path>]: a set renders [[...]], an absent one []. Others are "<path>" ("" if absent).
LIST_FIELDS = {"updated_fields", *TABLE_FIELDS["McpServersTable"]}
# Changes to a rendered detail that the schema must refuse, as no pipe renders them.
REFUSED = {"a flat updated_fields": {"updated_fields": ["name"]}, "a number as version": {"version": 2},
           "a tool name with a quote": {"tools_added": [['a"b']]}}


def check_input_template(table, pipe):
    """A JSON object of exactly the table's allow-listed fields and placeholders, each field once."""
    text = pipe.input_template
    fields = {**EVENT_FIELDS, **TABLE_FIELDS.get(table, {})}
    wanted = {field: [f"<{path}>"] if field in LIST_FIELDS else f"<{path}>"
              for field, path in fields.items() if field != "project_id" or table != "ApiKeysTable"}
    try:  # [<path>] reads as a list of one quoted placeholder; an unquoted one stays invalid JSON
        pairs = json.loads(re.sub(r"\[(<[^<>]*>)\]", r'["\1"]', text), object_pairs_hook=tuple)
    except (TypeError, ValueError) as error:
        return [f"{pipe.name}'s InputTemplate is not a JSON object of quoted placeholders ({error}): {text}"]
    if not isinstance(pairs, tuple) or len(pairs) != len(wanted) or dict(pairs) != wanted:
        return [f"{pipe.name}'s InputTemplate must build exactly {json.dumps(wanted)}, builds {text}"]
    return []


def check_rendering(schema, pipes):
    """The schema accepts what each pipe makes of a MODIFY with and without updated_by and updated_fields."""
    validator, problems = jsonschema.Draft202012Validator(schema), []
    for pipe in pipes:
        if pipe.table not in CHANGE_PIPES:
            continue  # it reads no table's stream (the Guard rules say so)
        for with_writer in (True, False):
            what = f"a record {'with' if with_writer else 'without'} updated_by and updated_fields"
            try:
                event = pipe.event(PIPES.sample_record(pipe.table, with_writer))
            except ValueError as error:
                problems.append(f"{pipe.name} cannot render {what}: {error}")
                continue
            if event is None:
                problems.append(f"{pipe.name}'s filter drops a MODIFY record")
                continue
            error = jsonschema.exceptions.best_match(validator.iter_errors(event))
            if error:
                problems.append(f"events.schema.json refuses what {pipe.name} makes of {what}: {error.message} "
                                f"at {list(error.path)}: {json.dumps(event['detail'])}")
                continue
            for change, fields in REFUSED.items():
                if validator.is_valid(dict(event, detail=dict(event["detail"], **fields))):
                    problems.append(f"events.schema.json accepts {change}, which no pipe renders")
    return problems


def check_event_schema(schema, pipes):
    """Valid JSON Schema 2020-12, of exactly the pipes' source, detail types and detail fields."""
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
        "detail's fields": (sorted([*EVENT_FIELDS, *TABLE_FIELDS["McpServersTable"]]),
                            sorted(detail.get("properties", {}))),
        "detail's required": (sorted(set(EVENT_FIELDS) - {"project_id"}), sorted(detail.get("required", []))),
    }
    problems = [f"events.schema.json's {key} must be {json.dumps(wanted)}, is {json.dumps(found)}"
                for key, (wanted, found) in wanted_and_found.items() if wanted != found]
    return problems or check_rendering(schema, pipes)


def check(template, schema):
    """Every problem of the pipes' InputTemplates (`template`: long form) and of the schema."""
    resources, problems = template.get("Resources", {}), []
    pipes = {table: PIPES.Pipe(name, resources.get(name, {}).get("Properties", {}))
             for table, (name, _) in CHANGE_PIPES.items()}
    for table, pipe in pipes.items():
        problems += check_input_template(table, pipe)
    return problems + check_event_schema(schema, pipes.values())


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "template.yaml"
    schema = PIPES.load(os.path.join(os.path.dirname(os.path.abspath(path)), "events.schema.json"))
    problems = list(dict.fromkeys(check(PIPES.load(path), schema)))
    if problems:
        sys.exit("\n".join(f"events check: {problem}" for problem in problems))
    print("events check: each pipe's input template builds exactly its allow-listed fields, and what it "
          "renders is an event events.schema.json accepts")


if __name__ == "__main__":
    main()
