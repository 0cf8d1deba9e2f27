#!/usr/bin/env bash
# make invoke FN=update-model EVENT=events/update-model/200-switch-provider.json
# Posts EVENT to FN's real binary under the Lambda Runtime Interface Emulator (no Docker) and
# prints its log lines and response; uses make run's DynamoDB Local and KMS if they listen.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
fn="${FN:-}"
event="${EVENT:-}"
functions="$(python3 "$root/tools/kinds.py" functions)"
[[ -n "$fn" && " $functions " == *" $fn "* ]] || {
  echo "usage: make invoke FN=${functions// /|} EVENT=events/<fn>/<file>.json" >&2; exit 2; }
[[ -f "$event" ]] || { echo "invoke: no event file '$event' (see events/$fn/)" >&2; exit 2; }
# shellcheck source=scripts/rie.sh
source "$root/scripts/rie.sh"
rie="$(rie_path "$root")"

log_dir="$root/target/invoke"
mkdir -p "$log_dir"
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

export AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local ALLOW_PRIVATE_ENDPOINTS=true
kms_port="${KMS_PORT:-4566}"
if is_open "$kms_port"; then
  echo "invoke: using the local KMS on 127.0.0.1:$kms_port (make run)" >&2
  export AWS_ENDPOINT_URL_KMS="http://127.0.0.1:$kms_port" SECRETS_KEY_ID=alias/agent-server-secrets
else
  echo "invoke: starting a local KMS" >&2
  kms_start "$log_dir/kms-local.log"
fi
dynamodb_port="${DYNAMODB_PORT:-8000}"
if is_open "$dynamodb_port"; then
  echo "invoke: using the DynamoDB Local on 127.0.0.1:$dynamodb_port (make run)" >&2
else
  dynamodb_port="$(free_port)"
  echo "invoke: starting DynamoDB Local on 127.0.0.1:$dynamodb_port with the sample records" >&2
  "$root/tools/dynamodb-local/run" "$dynamodb_port" >"$log_dir/dynamodb-local.log" 2>&1 &
  pids+=($!)
  wait_open "$dynamodb_port" || { tail -n 20 "$log_dir/dynamodb-local.log" >&2; exit 1; }
  AWS_ENDPOINT_URL_DYNAMODB="http://127.0.0.1:$dynamodb_port" "$root/target/debug/local-api" --setup-only
fi
export AWS_ENDPOINT_URL_DYNAMODB="http://127.0.0.1:$dynamodb_port"

rie_port="$(free_port)"
pids+=("$(rie_start "$rie" "$fn" "$rie_port" "$log_dir/$fn.log")")
wait_open "$rie_port" || { echo "invoke: the emulator did not start:" >&2; cat "$log_dir/$fn.log" >&2; exit 1; }

response="$(rie_invoke "$rie_port" "$event")"
sleep 0.2
echo "--- the function's log lines"
grep '^{' "$log_dir/$fn.log" || true
echo "--- response"
printf '%s\n' "$response"
