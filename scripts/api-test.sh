#!/usr/bin/env bash
# make api-test: generated-case API testing. Starts a DynamoDB Local and a
# local-api of its own on free ports, loads the sample records (which the
# OpenAPI examples name, so positive cases reach real records), runs
# schemathesis with every default check against openapi.yaml, and stops both.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
examples="${API_TEST_EXAMPLES:-150}"
seed="${API_TEST_SEED:-20261121}"

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
is_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
wait_open() {
  for _ in $(seq 1 240); do is_open "$1" && return 0; sleep 0.25; done
  echo "api-test: nothing listens on port $1 after 60 s" >&2; return 1
}

dynamodb_port="$(free_port)"
api_port="$(free_port)"
log_dir="$root/target/api-test"
mkdir -p "$log_dir"
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

"$root/tools/dynamodb-local/run" "$dynamodb_port" >"$log_dir/dynamodb-local.log" 2>&1 &
pids+=($!)
wait_open "$dynamodb_port" || { tail -n 20 "$log_dir/dynamodb-local.log" >&2; exit 1; }

AWS_ENDPOINT_URL_DYNAMODB="http://127.0.0.1:$dynamodb_port" AWS_REGION=us-east-1 \
AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local ALLOW_PRIVATE_ENDPOINTS=true \
  "$root/target/debug/local-api" --setup --addr "127.0.0.1:$api_port" >"$log_dir/local-api.log" 2>&1 &
pids+=($!)
wait_open "$api_port" || { tail -n 20 "$log_dir/local-api.log" >&2; exit 1; }

"$root/.venv/bin/st" --config-file "$root/tools/schemathesis.toml" run "$root/openapi.yaml" \
  --url "http://127.0.0.1:$api_port" --max-examples "$examples" --seed "$seed" \
  --report har --report-dir "$log_dir" --no-color
