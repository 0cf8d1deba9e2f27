# Sourced helpers: AWS's Lambda Runtime Interface Emulator and each function's configuration
# under it (as in template.yaml), the local KMS, loopback ports.

# Prints this machine's emulator (from .venv's aws-sam-cli); exits, never skips, if missing.
rie_path() {
  local root="$1" arch
  arch="$(uname -m)"; [[ "$arch" == aarch64 ]] && arch=arm64
  local rie
  rie="$(ls "$root"/.venv/lib/python3*/site-packages/samcli/local/rapid/aws-lambda-rie-"$arch" 2>/dev/null | head -n 1)"
  [[ -x "$rie" ]] || { echo "the Runtime Interface Emulator is missing from .venv (make tools)" >&2; exit 1; }
  printf '%s\n' "$rie"
}

# Starts target/debug/$2 under emulator $1 on 127.0.0.1:$3, logging to $4; prints its pid.
# Its Runtime API gets a free port of its own, so several emulators can run at once.
rie_start() {
  local rie="$1" fn="$2" port="$3" log="$4" root table_env
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  table_env="$(python3 "$root/tools/kinds.py" env "$fn")" || return 2
  # As template.yaml: a function whose records seal nothing has neither the secrets key nor KMS.
  local no_kms=()
  local sealing
  sealing="$(python3 "$root/tools/kinds.py" functions sealing)" || return 2
  [[ " $sealing " == *" $fn "* ]] || no_kms=(-u SECRETS_KEY_ID -u AWS_ENDPOINT_URL_KMS)
  env "${no_kms[@]}" "$table_env" AWS_LAMBDA_FUNCTION_NAME="$fn" AWS_LAMBDA_FUNCTION_MEMORY_SIZE=128 \
    "$rie" --runtime-interface-emulator-address "127.0.0.1:$port" \
    --runtime-api-address "127.0.0.1:$(free_port)" "$root/target/debug/$fn" >"$log" 2>&1 &
  echo $!
}

# Starts tools/kms-local on port $2 (default: a free one), logging to $1; appends its pid to
# `pids` and exports KMS_PID, AWS_ENDPOINT_URL_KMS and SECRETS_KEY_ID (a new key).
kms_start() {
  local log="$1" port="${2:-}" root
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  [[ -n "$port" ]] || port="$(free_port)"
  "$root/tools/kms-local/run" "$port" >"$log" 2>&1 &
  KMS_PID=$!
  pids+=("$KMS_PID")
  wait_open "$port" || { tail -n 20 "$log" >&2; return 1; }
  export AWS_ENDPOINT_URL_KMS="http://127.0.0.1:$port"
  SECRETS_KEY_ID="$("$root/tools/kms-local/create-key" "$AWS_ENDPOINT_URL_KMS")" || return 1
  export SECRETS_KEY_ID KMS_PID
}

# Posts event file $2 to the emulator on port $1; prints the proxy result.
rie_invoke() {
  curl -sS --max-time 30 -X POST "http://127.0.0.1:$1/2015-03-31/functions/function/invocations" \
    -H 'Content-Type: application/json' --data-binary "@$2"
}

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
is_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
wait_open() {
  for _ in $(seq 1 240); do is_open "$1" && return 0; sleep 0.25; done
  echo "nothing listens on port $1 after 60 s" >&2; return 1
}

# Starts every kind's function under emulator $1 (logs in $2), appends their pids to `pids`,
# sets `rie_flags` for local-api. Export the AWS environment first.
rie_start_all() {
  local rie="$1" log_dir="$2" fn port
  rie_flags=()
  local functions
  # A failed substitution would not stop the loop: it would start nothing, and local-api would run
  # the functions in process while claiming the emulator.
  functions="$(python3 "$root/tools/kinds.py" functions)" && [[ -n "$functions" ]] || return 1
  for fn in $functions; do
    [[ -x "$root/target/debug/$fn" ]] || { echo "build $fn first (make run, make test, or: cargo build --workspace --bins --examples)" >&2; return 1; }
    port="$(free_port)"
    pids+=("$(rie_start "$rie" "$fn" "$port" "$log_dir/$fn.log")")
    wait_open "$port" || { cat "$log_dir/$fn.log" >&2; return 1; }
    rie_flags+=(--rie "$fn=127.0.0.1:$port")
  done
}
