"""Checks what the code generators made of openapi.yaml (make clients).

    check_generated.py python     OPENAPI LOG PACKAGE_DIR
    check_generated.py typescript OPENAPI LOG TYPES_FILE STATUSES_FILE

Fails (exit 1, every problem listed) if the generator's output LOG says
anything beyond its progress lines (a warning, an endpoint "will not be
generated", a response "omitted"), or if an operation or a documented
response of OPENAPI is missing from the generated code. The operations and
statuses come from the document itself, so a response added to openapi.yaml
is checked without editing this file. For TypeScript it writes
STATUSES_FILE: one type-level assertion per documented response, which
`tsc --noEmit` then proves against the generated types.
"""

import re
import sys
from pathlib import Path

import yaml

METHODS = ("get", "put", "post", "patch", "delete")
# The only lines each generator prints when it has nothing to report.
PROGRESS = {
    "python": re.compile(r"^Generating \S+$"),
    "typescript": re.compile(r"^(✨ openapi-typescript \d+\.\d+\.\d+|🚀 \S+ → \S+ \[[\d.]+m?s\])$"),
}


def resolve(doc, node):
    """Follows local `$ref`s."""
    while isinstance(node, dict) and "$ref" in node:
        target = doc
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part.replace("~1", "/").replace("~0", "~")]
        node = target
    return node


def envelope(doc, response):
    """Whether a response's JSON body is the envelope (API Gateway's own 401 is not)."""
    schema = resolve(doc, resolve(doc, response).get("content", {}).get("application/json", {}).get("schema", {}))
    return "status" in schema.get("properties", {})


def operations(doc):
    """(path, method, operationId, {status: has JSON body}) for every operation."""
    found = []
    for path, item in doc.get("paths", {}).items():
        for method in METHODS:
            if method in item:
                operation = item[method]
                responses = {
                    str(status): "application/json" in resolve(doc, response).get("content", {})
                    for status, response in operation.get("responses", {}).items()
                }
                found.append((path, method, operation["operationId"], responses))
    if not found:
        sys.exit("check_generated: the document has no operations")
    return found


def quiet_output(kind, log):
    """Every line of the generator's output that is not a progress line."""
    lines = Path(log).read_text(encoding="utf-8").splitlines()
    return [f"{kind} generator said: {line}" for line in lines if line.strip() and not PROGRESS[kind].match(line.strip())]


def snake(name):
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


def check_python(doc, package_dir):
    problems = []
    modules = {p.stem: p for p in Path(package_dir).glob("*/api/*/*.py")}
    for path, method, operation_id, responses in operations(doc):
        module = modules.get(snake(operation_id))
        if module is None:
            problems.append(f"python: {operation_id} ({method.upper()} {path}) was not generated")
            continue
        code = module.read_text(encoding="utf-8")
        for status, has_body in responses.items():
            parsed = (
                rf"if response\.status_code == {status}:\s*response_{status} = \w+\.from_dict\(response\.json\(\)\)"
                if has_body
                else rf"if response\.status_code == {status}:"
            )
            if not re.search(parsed, code):
                problems.append(f"python: {operation_id} does not parse its {status} response")
    return problems


STATUSES_HEADER = """\
// Written by tools/clients/check_generated.py from openapi.yaml: each
// documented response must exist in the generated types with its status and
// `error` pinned, and an error's `errorDetails.code` typed as a string.
import type { operations, paths } from "./api";

type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
type Expect<T extends true> = T;
type IsString<T> = 0 extends 1 & T ? false : [T] extends [never] ? false : [T] extends [string] ? true : false;
type Json<O extends keyof operations, S extends keyof operations[O]["responses"]> =
  operations[O]["responses"][S] extends { content: { "application/json": infer B } } ? B : never;
"""


def write_statuses(doc, out):
    lines = [STATUSES_HEADER]
    for path, method, operation_id, responses in operations(doc):
        op = f'"{operation_id}"'
        lines.append(f'export type {operation_id}Path = Expect<Equal<paths["{path}"]["{method}"], operations[{op}]>>;')
        documented = doc["paths"][path][method]["responses"]
        for status, has_body in responses.items():
            name = f"{operation_id}{status}"
            if not has_body:
                lines.append(f"export type {name} = operations[{op}][\"responses\"][{status}];")
                continue
            body = f"Json<{op}, {status}>"
            if not envelope(doc, documented[int(status)] if int(status) in documented else documented[status]):
                # API Gateway's body: a message, typed.
                lines.append(f'export type {name}Message = Expect<IsString<{body}["message"]>>;')
                continue
            error = "false" if status.startswith("2") else "true"
            lines.append(f'export type {name}Status = Expect<Equal<{body}["status"], {status}>>;')
            lines.append(f'export type {name}Error = Expect<Equal<{body}["error"], {error}>>;')
            if error == "true":
                lines.append(f'export type {name}Code = Expect<IsString<{body}["errorDetails"]["code"]>>;')
    Path(out).write_text("\n".join(lines) + "\n", encoding="utf-8")


def check_typescript(doc, types_file):
    problems = []
    types = Path(types_file).read_text(encoding="utf-8")
    for path, method, operation_id, _ in operations(doc):
        if not re.search(rf"^    {re.escape(operation_id)}: \{{$", types, re.MULTILINE):
            problems.append(f"typescript: {operation_id} ({method.upper()} {path}) was not generated")
    return problems


def main(argv):
    if len(argv) < 4 or argv[1] not in PROGRESS:
        sys.exit(__doc__)
    kind, openapi, log = argv[1], argv[2], argv[3]
    doc = yaml.safe_load(Path(openapi).read_text(encoding="utf-8"))
    problems = quiet_output(kind, log)
    if kind == "python" and len(argv) == 5:
        problems += check_python(doc, argv[4])
    elif kind == "typescript" and len(argv) == 6:
        problems += check_typescript(doc, argv[4])
        write_statuses(doc, argv[5])
    else:
        sys.exit(__doc__)
    for problem in problems:
        print(problem, file=sys.stderr)
    count = sum(len(responses) for *_, responses in operations(doc))
    if problems:
        sys.exit(f"check_generated: {kind} client is incomplete ({len(problems)} problems)")
    print(f"check_generated: {kind} client has all {len(operations(doc))} operations and {count} responses")


if __name__ == "__main__":
    main(sys.argv)
