#!/usr/bin/env bash
# Usage: scripts/with-local-api.sh LOG_DIR COMMAND [ARG...]
#
# Starts a DynamoDB Local and a local-api (target/debug/local-api, built
# beforehand) of their own on free ports, loads the sample records
# (local/src/samples.rs), runs COMMAND with API_URL set to the local-api's
# base URL, API_TOKEN to a bearer token granting every project,
# DYNAMODB_URL to the DynamoDB Local endpoint, and the local KMS's
# AWS_ENDPOINT_URL_KMS, SECRETS_KEY_ID and KMS_PID, and stops them all, whatever
# COMMAND's outcome. Exits with COMMAND's
# status; fails at once if either server does not start. The servers' logs
# go to LOG_DIR. Used by make api-test, make clients and make events-test.
#
# With LAMBDA=1, local-api invokes the three real function binaries
# (target/debug/update-*, built beforehand), each under AWS's Lambda Runtime
# Interface Emulator, instead of running their code itself.
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

# The JWT authorizer emulation, with a secret made for this run; COMMAND
# gets a token granting every project (API_TOKEN) and the secret, to mint
# narrower ones (target/debug/local-api token --jwt-secret ...).
jwt_secret="$(python3 -c 'import secrets; print(secrets.token_urlsafe(32))')"
export AWS_ENDPOINT_URL_DYNAMODB="http://127.0.0.1:$dynamodb_port" AWS_REGION=us-east-1 \
  AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local ALLOW_PRIVATE_ENDPOINTS=true
# A local KMS seals api_key and MCP header values; COMMAND gets its endpoint (AWS_ENDPOINT_URL_KMS),
# the key (SECRETS_KEY_ID) and its pid (KMS_PID, to stop it mid-run).
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
