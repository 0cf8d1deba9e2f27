#!/usr/bin/env bash
# Usage: scripts/with-local-api.sh LOG_DIR COMMAND [ARG...]
#
# Starts a DynamoDB Local and a local-api (target/debug/local-api, built
# beforehand) of their own on free ports, loads the sample records
# (local/src/samples.rs), runs COMMAND with API_URL set to the local-api's
# base URL, API_TOKEN to a bearer token granting every project, and
# DYNAMODB_URL to the DynamoDB Local endpoint, and stops both, whatever
# COMMAND's outcome. Exits with COMMAND's
# status; fails at once if either server does not start. The servers' logs
# go to LOG_DIR. Used by make api-test and make clients.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
[[ $# -ge 2 ]] || { echo "usage: $0 LOG_DIR COMMAND [ARG...]" >&2; exit 2; }
log_dir="$1"
shift

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
is_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
wait_open() {
  for _ in $(seq 1 240); do is_open "$1" && return 0; sleep 0.25; done
  echo "with-local-api: nothing listens on port $1 after 60 s" >&2; return 1
}

[[ -x "$root/target/debug/local-api" ]] || { echo "with-local-api: build local-api first (cargo build -p local-api)" >&2; exit 1; }
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
AWS_ENDPOINT_URL_DYNAMODB="http://127.0.0.1:$dynamodb_port" AWS_REGION=us-east-1 \
AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local ALLOW_PRIVATE_ENDPOINTS=true \
  "$root/target/debug/local-api" --setup --addr "127.0.0.1:$api_port" --jwt-secret "$jwt_secret" \
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
