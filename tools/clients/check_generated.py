"""Usage: check_generated.py python OPENAPI LOG PACKAGE_DIR | typescript OPENAPI LOG TYPES_FILE STATUSES_FILE

Fails if the generator's LOG says anything beyond progress lines, or if an operation or documented response of
OPENAPI is missing from the generated code. For TypeScript it writes STATUSES_FILE, one type-level assertion per
documented response (status, `error`, an error's `errorDetails.code` a string), for `tsc --noEmit` to prove."""

import re
import sys
from pathlib import Path

import yaml

# The only lines each generator prints when it has nothing to report.
PROGRESS = {
    "python": re.compile(r"^Generating \S+$"),
    "typescript": re.compile(r"^(✨ openapi-typescript \d+\.\d+\.\d+|🚀 \S+ → \S+ \[[\d.]+m?s\])$"),
}
STATUSES_HEADER = """\
// Written by tools/clients/check_generated.py from openapi.yaml: each documented response, typed.
import type { operations, paths } from "./api";

type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
type Expect<T extends true> = T;
type IsString<T> = 0 extends 1 & T ? false : [T] extends [never] ? false : [T] extends [string] ? true : false;
type Json<O extends keyof operations, S extends keyof operations[O]["responses"]> =
  operations[O]["responses"][S] extends { content: { "application/json": infer B } } ? B : never;
"""


def resolve(doc, node):
    while isinstance(node, dict) and "$ref" in node:
        target = doc
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part.replace("~1", "/").replace("~0", "~")]
        node = target
    return node


def operations(doc):
    """(path, method, operationId, {status: its JSON body's schema, or None}) for every operation."""
    found = []
    for path, item in doc.get("paths", {}).items():
        for method in ("get", "put", "post", "patch", "delete"):
            if method in item:
                responses = {str(status): resolve(doc, resolve(doc, response).get("content", {}))
                             for status, response in item[method].get("responses", {}).items()}
                bodies = {s: resolve(doc, c["application/json"].get("schema", {})) if "application/json" in c else None
                          for s, c in responses.items()}
                found.append((path, method, item[method]["operationId"], bodies))
    return found or sys.exit("check_generated: the document has no operations")


def check_python(ops, package_dir):
    modules = {p.stem: p for p in Path(package_dir).glob("*/api/*/*.py")}
    for path, method, operation_id, bodies in ops:
        module = modules.get(re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", operation_id).lower())
        if module is None:
            yield f"python: {operation_id} ({method.upper()} {path}) was not generated"
            continue
        code = module.read_text(encoding="utf-8")
        for status, body in bodies.items():
            parsed = rf"\s*response_{status} = \w+\.from_dict\(response\.json\(\)\)" if body is not None else ""
            if not re.search(rf"if response\.status_code == {status}:{parsed}", code):
                yield f"python: {operation_id} does not parse its {status} response"


def check_typescript(ops, types_file, statuses_file):
    types, lines = Path(types_file).read_text(encoding="utf-8"), [STATUSES_HEADER]
    for path, method, operation_id, bodies in ops:
        if not re.search(rf"^    {re.escape(operation_id)}: \{{$", types, re.MULTILINE):
            yield f"typescript: {operation_id} ({method.upper()} {path}) was not generated"
        op = f'"{operation_id}"'
        lines.append(f'export type {operation_id}Path = Expect<Equal<paths["{path}"]["{method}"], operations[{op}]>>;')
        for status, schema in bodies.items():
            name, body = f"{operation_id}{status}", f"Json<{op}, {status}>"
            if schema is None:
                lines.append(f'export type {name} = operations[{op}]["responses"][{status}];')
            elif "status" not in schema.get("properties", {}):  # API Gateway's own body: a message
                lines.append(f'export type {name}Message = Expect<IsString<{body}["message"]>>;')
            else:
                error = "false" if status.startswith("2") else "true"
                lines.append(f'export type {name}Status = Expect<Equal<{body}["status"], {status}>>;')
                lines.append(f'export type {name}Error = Expect<Equal<{body}["error"], {error}>>;')
                if error == "true":
                    lines.append(f'export type {name}Code = Expect<IsString<{body}["errorDetails"]["code"]>>;')
    Path(statuses_file).write_text("\n".join(lines) + "\n", encoding="utf-8")


def main(argv):
    if len(argv) != {"python": 5, "typescript": 6}.get(argv[1] if len(argv) > 1 else None):
        sys.exit(__doc__)
    kind, doc, log = argv[1], yaml.safe_load(Path(argv[2]).read_text(encoding="utf-8")), argv[3]
    ops = operations(doc)
    problems = [f"{kind} generator said: {line}" for line in Path(log).read_text(encoding="utf-8").splitlines()
                if line.strip() and not PROGRESS[kind].match(line.strip())]
    problems += check_python(ops, argv[4]) if kind == "python" else check_typescript(ops, *argv[4:])
    if problems:
        print(*problems, sep="\n", file=sys.stderr)
        sys.exit(f"check_generated: {kind} client is incomplete ({len(problems)} problems)")
    print(f"check_generated: {kind} client has all {len(ops)} operations and {sum(len(b) for *_, b in ops)} responses")


if __name__ == "__main__":
    main(sys.argv)
