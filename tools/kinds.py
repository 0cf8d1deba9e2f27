"""The record kinds as the code declares them (tools/resources.json, written from shared/src/records.rs
by tests/tests/integration/resources.rs) and where a template puts each: the function whose binary is
the kind's, and the table that function's variable names. What the template's and the events' tools
read, so that none of them restates a kind, a table or a route."""

import json
import pathlib
import re
import sys

KINDS = json.loads((pathlib.Path(__file__).parent / "resources.json").read_text())["kinds"]


def refs(value):
    """Every logical id `value` refers to (Ref, GetAtt, ${X} or ${X.Attr} in Sub)."""
    if isinstance(value, dict):
        for key, inner in value.items():
            if key == "Ref" and isinstance(inner, str):
                yield inner
            elif key == "Fn::GetAtt":
                yield inner[0] if isinstance(inner, list) else str(inner).split(".")[0]
            elif key == "Fn::Sub":
                text = inner[0] if isinstance(inner, list) else inner
                yield from (name.split(".")[0] for name in re.findall(r"\$\{([^}!]+)\}", str(text)))
                yield from refs(inner[1] if isinstance(inner, list) and len(inner) > 1 else {})
            else:
                yield from refs(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from refs(inner)


def kind_of_function(resource):
    """The kind whose function `resource` is (by its BuildProperties.Binary), else None."""
    binary = resource.get("Metadata", {}).get("BuildProperties", {}).get("Binary")
    return next((kind for kind in KINDS if kind["function"] == binary), None)


def environment(template, function):
    """The variables `function` (a resource of `template`) runs with: the template's globals, then its own."""
    globals_env = template.get("Globals", {}).get("Function", {}).get("Environment", {}).get("Variables", {})
    return {**globals_env, **function.get("Properties", {}).get("Environment", {}).get("Variables", {})}


def by_table(template):
    """Each kind `template` (long form) deploys, by its table's logical id: the table its function's
    variable refers to (a plain Ref). A kind without such a function is left out: callers that need
    every kind compare the result with KINDS."""
    resources = template.get("Resources", {})
    found = {}
    for resource in resources.values():
        kind = kind_of_function(resource)
        if kind is None:
            continue
        ref = environment(template, resource).get(kind["table_variable"])
        table = ref.get("Ref") if isinstance(ref, dict) else None
        if resources.get(table, {}).get("Type") == "AWS::DynamoDB::Table":
            found[table] = kind
    return found


def functions(which="all"):
    """The kinds' functions: all, those that seal (`sealing`), or those whose verify dials a client
    (`mcp`, `provider`)."""
    return [kind["function"] for kind in KINDS if which == "all" or (which == "sealing" and kind["kms"])
            or kind["verify_client"] == which]


def main(argv):
    """For the Makefile and scripts/ (python3, no dependency):
    functions [all|sealing|mcp|provider]   the functions, space-separated
    env FUNCTION                           its table's variable and local name (VAR=name)"""
    if not KINDS:
        print("kinds.py: tools/resources.json lists no kind", file=sys.stderr)
        return 2
    if len(argv) >= 1 and argv[0] == "functions" and len(argv) <= 2 and \
            (len(argv) == 1 or argv[1] in ("all", "sealing", "mcp", "provider")):
        print(" ".join(functions(*argv[1:])))
        return 0
    kind = next((kind for kind in KINDS if len(argv) == 2 and argv[0] == "env" and kind["function"] == argv[1]), None)
    if kind is None:
        print(f"kinds.py: usage: functions [all|sealing|mcp|provider] | env {'|'.join(functions())}", file=sys.stderr)
        return 2
    print(f"{kind['table_variable']}={kind['table_default']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
