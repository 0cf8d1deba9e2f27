#!/usr/bin/env bash
# make clients: generates a Python client and TypeScript types from openapi.yaml into target/clients/, fails if
# a generator reports anything or misses an operation or response (tools/clients/check_generated.py), type-checks
# tools/clients/use.ts with tsc, then uses the Python client on local-api (tools/clients/live_test.py).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="$root/target/clients" venv="$root/.venv" node_bin="$root/tools/clients/node_modules/.bin"
check=("$venv/bin/python" "$root/tools/clients/check_generated.py")
for tool in "$venv/bin/openapi-python-client" "$node_bin/openapi-typescript" "$node_bin/tsc"; do
  [[ -x "$tool" ]] || { echo "clients: $tool is missing (make tools; npm ci --prefix tools/clients)" >&2; exit 1; }
done
rm -rf "$out" && mkdir -p "$out/typescript"

# The generator formats its output with ruff, which lives in the venv.
PATH="$venv/bin:$PATH" "$venv/bin/openapi-python-client" generate --path "$root/openapi.yaml" \
  --output-path "$out/python/agent_server_update_api_client" --meta none >"$out/python.log" 2>&1 || { cat "$out/python.log" >&2; exit 1; }
"${check[@]}" python "$root/openapi.yaml" "$out/python.log" "$out/python" || { cat "$out/python.log" >&2; exit 1; }
"$node_bin/openapi-typescript" "$root/openapi.yaml" -o "$out/typescript/api.d.ts" >"$out/typescript.log" 2>&1 \
  || { cat "$out/typescript.log" >&2; exit 1; }
"${check[@]}" typescript "$root/openapi.yaml" "$out/typescript.log" "$out/typescript/api.d.ts" \
  "$out/typescript/statuses.ts" || { cat "$out/typescript.log" >&2; exit 1; }
"$node_bin/tsc" --noEmit -p "$root/tools/clients/tsconfig.json"
PYTHONPATH="$out/python" "$root/scripts/with-local-api.sh" "$out/live${LAMBDA:+-lambda}" \
  "$venv/bin/python" "$root/tools/clients/live_test.py" -v
