#!/usr/bin/env bash
# make events-rie-test: every event in events/<function>/ through that
# function's real binary (target/debug/<function>) under AWS's Lambda Runtime
# Interface Emulator, against a DynamoDB Local of its own holding the sample
# records; each must answer the status its file name starts with. Fails,
# never skips, if the emulator (from .venv's aws-sam-cli) is missing.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
arch="$(uname -m)"; [[ "$arch" == aarch64 ]] && arch=arm64
rie="$(ls "$root"/.venv/lib/python3*/site-packages/samcli/local/rapid/aws-lambda-rie-"$arch" 2>/dev/null | head -n 1)"
[[ -x "$rie" ]] || { echo "events-rie-test: the Runtime Interface Emulator is missing from .venv (make tools)" >&2; exit 1; }

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
is_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
wait_open() { for _ in $(seq 1 240); do is_open "$1" && return 0; sleep 0.25; done; return 1; }

log_dir="$root/target/events-rie-test"
rm -rf "$log_dir"; mkdir -p "$log_dir"
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

export AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local ALLOW_PRIVATE_ENDPOINTS=true
dynamodb_port="$(free_port)"
"$root/tools/dynamodb-local/run" "$dynamodb_port" >"$log_dir/dynamodb-local.log" 2>&1 &
pids+=($!)
wait_open "$dynamodb_port" || { tail -n 20 "$log_dir/dynamodb-local.log" >&2; exit 1; }
export AWS_ENDPOINT_URL_DYNAMODB="http://127.0.0.1:$dynamodb_port"
"$root/target/debug/local-api" --setup-only

passed=0 failed=0
for fn in update-api-key update-mcp-server update-model; do
  case "$fn" in
    update-api-key) table_var=API_KEYS_TABLE table=agent-server-api-keys ;;
    update-mcp-server) table_var=MCP_SERVERS_TABLE table=agent-server-mcp-servers ;;
    update-model) table_var=MODELS_TABLE table=agent-server-models ;;
  esac
  port="$(free_port)"
  env "$table_var=$table" AWS_LAMBDA_FUNCTION_NAME="$fn" AWS_LAMBDA_FUNCTION_MEMORY_SIZE=128 \
    "$rie" --runtime-interface-emulator-address "127.0.0.1:$port" "$root/target/debug/$fn" \
    >"$log_dir/$fn.log" 2>&1 &
  rie_pid=$!
  pids+=("$rie_pid")
  wait_open "$port" || { echo "events-rie-test: the emulator did not start for $fn" >&2; cat "$log_dir/$fn.log" >&2; exit 1; }
  for event in "$root"/events/"$fn"/*.json; do
    name="$(basename "$event")"
    want="${name%%-*}"
    got="$(curl -sS --max-time 30 -X POST "http://127.0.0.1:$port/2015-03-31/functions/function/invocations" \
      -H 'Content-Type: application/json' --data-binary "@$event" \
      | python3 -c 'import json, sys; r = json.load(sys.stdin); b = json.loads(r["body"]); assert b["status"] == r["statusCode"]; print(r["statusCode"])' \
      || echo "no valid answer")"
    if [[ "$got" == "$want" ]]; then
      passed=$((passed + 1)); echo "ok   $fn/$name -> $got"
    else
      failed=$((failed + 1)); echo "FAIL $fn/$name -> $got, want $want"
    fi
  done
  # The emulator's own Runtime API always binds 127.0.0.1:9001: one at a time.
  kill "$rie_pid" 2>/dev/null || true
  wait "$rie_pid" 2>/dev/null || true
done
echo "events under the RIE: $passed passed, $failed failed"
[[ $failed -eq 0 && $passed -gt 0 ]]
