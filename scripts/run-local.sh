#!/usr/bin/env bash
# make run: DynamoDB Local, a local KMS, the sample records and local-api (JWT authorizer
# emulated, API reference at /docs); LAMBDA=1 runs the functions under the Runtime Interface
# Emulator. Ctrl-C, SIGTERM or SIGHUP stops everything this script started.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/rie.sh
source "$root/scripts/rie.sh"
dynamodb_port="${DYNAMODB_PORT:-8000}"
kms_port="${KMS_PORT:-4566}"
api_addr="${API_ADDR:-127.0.0.1:3000}"
mcp_port="${MCP_PORT:-8931}"
provider_port="${PROVIDER_PORT:-8933}"
api_port="${api_addr##*:}"

if is_open "$dynamodb_port"; then
  echo "make run: port $dynamodb_port is already in use (another make run or DynamoDB Local?)." >&2
  echo "          Stop it, or choose another port: make run DYNAMODB_PORT=8001" >&2
  exit 1
fi
if is_open "$kms_port"; then
  echo "make run: port $kms_port is already in use (another make run or local KMS?)." >&2
  echo "          Stop it, or choose another port: make run KMS_PORT=4567" >&2
  exit 1
fi
if is_open "$api_port"; then
  echo "make run: port $api_port is already in use (another make run or local-api?)." >&2
  echo "          Stop it, or choose another address: make run API_ADDR=127.0.0.1:3001" >&2
  exit 1
fi

log="$root/target/dynamodb-local.log"
mkdir -p "$root/target"
"$root/tools/dynamodb-local/run" "$dynamodb_port" >"$log" 2>&1 &
dynamodb_pid=$!
api_pid=
pids=()
cleanup() {
  # local-api first, so nothing answers after its functions or database are gone.
  [[ -n "$api_pid" ]] && kill "$api_pid" 2>/dev/null || true
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  kill "$dynamodb_pid" 2>/dev/null || true
  wait 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

echo "make run: starting DynamoDB Local on 127.0.0.1:$dynamodb_port (log: target/dynamodb-local.log)" >&2
for _ in $(seq 1 120); do
  is_open "$dynamodb_port" && break
  kill -0 "$dynamodb_pid" 2>/dev/null || { echo "make run: DynamoDB Local failed to start:" >&2; tail -n 20 "$log" >&2; exit 1; }
  sleep 0.25
done
is_open "$dynamodb_port" || { echo "make run: DynamoDB Local did not open port $dynamodb_port in 30 s" >&2; exit 1; }

# DynamoDB Local accepts any credentials; these only satisfy the SDK.
export AWS_ENDPOINT_URL_DYNAMODB="http://127.0.0.1:$dynamodb_port"
export AWS_REGION="${AWS_REGION:-us-east-1}"
export AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-local}"
export AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-local}"
export ALLOW_PRIVATE_ENDPOINTS=true
# MCP's reference server, for verify=true; the API runs without it if its port is taken.
if is_open "$mcp_port"; then
  echo "make run: port $mcp_port is in use: no MCP reference server (choose one: make run MCP_PORT=8932)" >&2
  mcp_flags=()
else
  echo "make run: starting MCP's reference server on 127.0.0.1:$mcp_port (log: target/mcp-everything.log)" >&2
  "$root/tools/mcp-peers/run-everything" "$mcp_port" >"$root/target/mcp-everything.log" 2>&1 &
  pids+=($!)
  mcp_flags=(--mcp-example "http://localhost:$mcp_port/mcp")
fi
# A mock of the model providers (llmock), for verify=true on an API key: every provider's base
# points at it. Without it (its port taken) they stay the providers' own.
if is_open "$provider_port"; then
  echo "make run: port $provider_port is in use: no provider mock (choose one: make run PROVIDER_PORT=8934)" >&2
  key_flags=()
else
  echo "make run: starting a mock of the model providers on 127.0.0.1:$provider_port (log: target/llmock.log)" >&2
  "$root/tools/provider-peers/run-llmock" "$provider_port" >"$root/target/llmock.log" 2>&1 &
  pids+=($!)
  export OPENAI_BASE_URL="http://127.0.0.1:$provider_port/v1"
  export ANTHROPIC_BASE_URL="http://127.0.0.1:$provider_port/anthropic"
  export GEMINI_BASE_URL="http://127.0.0.1:$provider_port/gemini"
  export XAI_BASE_URL="http://127.0.0.1:$provider_port/xai/v1"
  key_flags=(--key-example)
fi
echo "make run: starting a local KMS on 127.0.0.1:$kms_port (log: target/kms-local.log)" >&2
kms_start "$root/target/kms-local.log" "$kms_port"
echo "make run: api_key and MCP header values are sealed under $SECRETS_KEY_ID (AWS_ENDPOINT_URL_KMS=$AWS_ENDPOINT_URL_KMS)" >&2
# A fresh HS256 secret each run: tokens from an earlier run stop working.
jwt_secret="$(python3 -c 'import secrets; print(secrets.token_urlsafe(32))')"
rie_flags=()
if [[ "${LAMBDA:-}" == 1 ]]; then
  rie="$(rie_path "$root")"
  rie_start_all "$rie" "$root/target"
  echo "make run: the functions run under AWS's Runtime Interface Emulator (logs: target/update-*.log)" >&2
fi
"$root/target/debug/local-api" --setup --addr "$api_addr" --jwt-secret "$jwt_secret" \
  --docs "$root/tools/docs/node_modules/swagger-ui-dist" "${rie_flags[@]}" "${mcp_flags[@]}" "${key_flags[@]}" &
api_pid=$!
# `wait` returns when a trapped signal arrives, so the trap runs at once.
wait "$api_pid"
