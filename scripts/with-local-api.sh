#!/usr/bin/env bash
# Usage: scripts/with-local-api.sh LOG_DIR COMMAND [ARG...]
# Runs COMMAND against a DynamoDB Local, local KMS and local-api of its own (logs in LOG_DIR;
# LAMBDA=1: functions under the RIE), then stops them; exits with COMMAND's status.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
[[ $# -ge 2 ]] || { echo "usage: $0 LOG_DIR COMMAND [ARG...]" >&2; exit 2; }
log_dir="$1"
shift

# shellcheck source=scripts/rie.sh
source "$root/scripts/rie.sh"

[[ -x "$root/target/debug/local-api" ]] || { echo "with-local-api: build local-api first (make run, make test, or: cargo build --workspace --bins --examples)" >&2; exit 1; }
dynamodb_port="$(free_port)"
api_port="$(free_port)"
mkdir -p "$log_dir"
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

"$root/tools/dynamodb-local/run" "$dynamodb_port" >"$log_dir/dynamodb-local.log" 2>&1 &
pids+=($!)
wait_open "$dynamodb_port" || { tail -n 20 "$log_dir/dynamodb-local.log" >&2; exit 1; }

# COMMAND gets a token granting every project (API_TOKEN) and this run's secret, to mint others.
jwt_secret="$(python3 -c 'import secrets; print(secrets.token_urlsafe(32))')"
export AWS_ENDPOINT_URL_DYNAMODB="http://127.0.0.1:$dynamodb_port" AWS_REGION=us-east-1 \
  AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local ALLOW_PRIVATE_ENDPOINTS=true
# COMMAND also gets AWS_ENDPOINT_URL_KMS, SECRETS_KEY_ID and KMS_PID (to stop the KMS mid-run).
kms_start "$log_dir/kms-local.log"
rie_flags=()
if [[ "${LAMBDA:-}" == 1 ]]; then
  rie="$(rie_path "$root")"
  rie_start_all "$rie" "$log_dir"
  echo "with-local-api: the functions run under the Runtime Interface Emulator (LAMBDA=1)" >&2
fi
"$root/target/debug/local-api" --setup --addr "127.0.0.1:$api_port" --jwt-secret "$jwt_secret" "${rie_flags[@]}" \
  >"$log_dir/local-api.log" 2>&1 &
pids+=($!)
wait_open "$api_port" || { tail -n 20 "$log_dir/local-api.log" >&2; exit 1; }

status=0
API_URL="http://127.0.0.1:$api_port" \
API_TOKEN="$("$root/target/debug/local-api" token --jwt-secret "$jwt_secret" --sub with-local-api)" \
API_JWT_SECRET="$jwt_secret" \
DYNAMODB_URL="http://127.0.0.1:$dynamodb_port" \
  "$@" || status=$?
exit "$status"
