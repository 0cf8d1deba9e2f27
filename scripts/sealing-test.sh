#!/usr/bin/env bash
# make sealing-test: api_key is sealed end to end. Starts a DynamoDB Local, a
# local KMS and a local-api of their own (scripts/with-local-api.sh), sends a
# sentinel api_key through the API, and looks for it in every response, raw
# item, stream record, change event and log file; opens the stored
# ciphertext with KMS and with the two consumer examples; then stops the KMS
# and checks the 503: tools/sealing/sealing_test.py says what it checks.
# LAMBDA=1: the real function binaries under the Runtime Interface Emulator.
# Needs target/debug/local-api (and update-* with LAMBDA=1) and the Rust
# example (cargo build --workspace --bins --examples). Logs:
# target/sealing-test/ (target/sealing-test-lambda/), searched by the test.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="$root/.venv/bin/python"
[[ -x "$python" ]] || { echo "sealing-test: $python is missing (make tools)" >&2; exit 1; }
log_dir="$root/target/sealing-test${LAMBDA:+-lambda}"
# Fresh logs: the test reads every file in the directory.
rm -rf "$log_dir"
LOG_DIR="$log_dir" exec "$root/scripts/with-local-api.sh" "$log_dir" "$python" "$root/tools/sealing/sealing_test.py"
