#!/usr/bin/env bash
# make events-rie-test: every events/<fn>/*.json through target/debug/<fn> under the Runtime
# Interface Emulator; each must answer the status its file name starts with.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/rie.sh
source "$root/scripts/rie.sh"
rie="$(rie_path "$root")"

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
kms_start "$log_dir/kms-local.log"
"$root/target/debug/local-api" --setup-only

passed=0 failed=0
functions="$(python3 "$root/tools/kinds.py" functions)"
for fn in $functions; do
  port="$(free_port)"
  rie_pid="$(rie_start "$rie" "$fn" "$port" "$log_dir/$fn.log")"
  pids+=("$rie_pid")
  wait_open "$port" || { echo "events-rie-test: the emulator did not start for $fn" >&2; cat "$log_dir/$fn.log" >&2; exit 1; }
  for event in "$root"/events/"$fn"/*.json; do
    name="$(basename "$event")"
    want="${name%%-*}"
    got="$(rie_invoke "$port" "$event" \
      | python3 -c 'import json, sys; r = json.load(sys.stdin); b = json.loads(r["body"]); assert b["status"] == r["statusCode"]; print(r["statusCode"])' \
      || echo "no valid answer")"
    if [[ "$got" == "$want" ]]; then
      passed=$((passed + 1)); echo "ok   $fn/$name -> $got"
    else
      failed=$((failed + 1)); echo "FAIL $fn/$name -> $got, want $want"
    fi
  done
done
echo "events under the RIE: $passed passed, $failed failed"
[[ $failed -eq 0 && $passed -gt 0 ]]
