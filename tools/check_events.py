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

# The allow-list: each detail field comes from one attribute of the new image, of one type. Every
# event has every field but project_id, which only kinds keyed by project have; nothing else of the
# record may reach it.
EVENT_FIELDS = {field: f"$.dynamodb.NewImage.{field}.{kind}" for field, kind in [("id", "S"), ("project_id", "S"),
                ("version", "N"), ("updated_at", "S"), ("updated_by", "S"), ("updated_fields", "SS"),
                ("idempotency_key", "S")]}
# A kind's own fields beside those, from the code (tools/kinds.py): string sets, such as the tools a
# verification moved in an MCP server's pin (percent-encoded names; docs/change-events.md).
KIND_SETS = sorted({name for kind in PIPES.KINDS.KINDS for name in kind["event_sets"]})
# Unquoted in brackets, [<path>]: a set renders [[...]], an absent one []. Others are "<path>" ("" if absent).
LIST_FIELDS = {"updated_fields", *KIND_SETS}
# Changes to a rendered detail that the schema must refuse, as no pipe renders them.
REFUSED = {"a flat updated_fields": {"updated_fields": ["name"]}, "a number as version": {"version": 2},
           "a tool name with a quote": {"tools_added": [['a"b']]}}


def check_input_template(kind, pipe):
    """A JSON object of exactly the kind's allow-listed fields and placeholders, each field once."""
    text = pipe.input_template
    fields = {**EVENT_FIELDS, **{name: f"$.dynamodb.NewImage.{name}.SS" for name in kind["event_sets"]}}
    wanted = {field: [f"<{path}>"] if field in LIST_FIELDS else f"<{path}>"
              for field, path in fields.items() if field != "project_id" or kind["scoped_by_project"]}
    try:  # [<path>] reads as a list of one quoted placeholder; an unquoted one stays invalid JSON
        pairs = json.loads(re.sub(r"\[(<[^<>]*>)\]", r'["\1"]', text), object_pairs_hook=tuple)
    except (TypeError, ValueError) as error:
        return [f"{pipe.name}'s InputTemplate is not a JSON object of quoted placeholders ({error}): {text}"]
    if not isinstance(pairs, tuple) or len(pairs) != len(wanted) or dict(pairs) != wanted:
        return [f"{pipe.name}'s InputTemplate must build exactly {json.dumps(wanted)}, builds {text}"]
    return []


def check_rendering(schema, pipes):
    """The schema accepts what each pipe (kind, pipe) makes of a MODIFY with and without updated_by and
    updated_fields."""
    validator, problems = jsonschema.Draft202012Validator(schema), []
    for kind, pipe in pipes:
        for with_writer in (True, False):
            what = f"a record {'with' if with_writer else 'without'} updated_by and updated_fields"
            try:
                event = pipe.event(PIPES.sample_record(pipe.table, kind, with_writer))
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
        "detail-type enum": (sorted(pipe.detail_type for _, pipe in pipes),
                             sorted(properties.get("detail-type", {}).get("enum", []))),
        "detail": ({"$ref": "#/$defs/detail"}, properties.get("detail")),
        "detail's additionalProperties": (False, detail.get("additionalProperties")),
        "detail's fields": (sorted([*EVENT_FIELDS, *KIND_SETS]),
                            sorted(detail.get("properties", {}))),
        "detail's required": (sorted(set(EVENT_FIELDS) - {"project_id"}), sorted(detail.get("required", []))),
    }
    problems = [f"events.schema.json's {key} must be {json.dumps(wanted)}, is {json.dumps(found)}"
                for key, (wanted, found) in wanted_and_found.items() if wanted != found]
    return problems or check_rendering(schema, pipes)


def check(template, schema):
    """Every problem of the pipes' InputTemplates (`template`: long form) and of the schema: each record
    kind's table (tools/kinds.py) has one pipe, of a detail type of its own."""
    template = PIPES.EXPAND.expanded(template)
    resources, problems = template.get("Resources", {}), []
    tables = PIPES.KINDS.by_table(template)
    problems += [f"no function of the template names the table of {kind['function']}"
                 for kind in PIPES.KINDS.KINDS if kind not in tables.values()]
    pipes = [PIPES.Pipe(name, resource.get("Properties", {})) for name, resource in resources.items()
             if resource.get("Type") == "AWS::Pipes::Pipe"]
    problems += [f"pipe {pipe.name} reads no record kind's table (its Source must name one, as !GetAtt or "
                 f"!Sub does)" for pipe in pipes if pipe.table not in tables]
    pipes = [(tables[pipe.table], pipe) for pipe in pipes if pipe.table in tables]
    for table, kind in tables.items():
        if [pipe.table for _, pipe in pipes].count(table) != 1:
            problems.append(f"{table} ({kind['function']}) must have one change-event pipe")
    detail_types = [pipe.detail_type for _, pipe in pipes]
    if any(not text or detail_types.count(text) > 1 for text in detail_types):
        problems.append(f"each change-event pipe must have a detail type of its own: {detail_types}")
    for kind, pipe in pipes:
        problems += check_input_template(kind, pipe)
    return problems + check_event_schema(schema, pipes)


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
