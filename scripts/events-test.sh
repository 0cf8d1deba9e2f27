#!/usr/bin/env bash
# make events-test: tools/events/events_test.py against a DynamoDB Local and local-api of its own. Logs: target/events-test/.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="$root/.venv/bin/python"
[[ -x "$python" ]] || { echo "events-test: $python is missing (make tools)" >&2; exit 1; }
exec "$root/scripts/with-local-api.sh" "$root/target/events-test${LAMBDA:+-lambda}" "$python" "$root/tools/events/events_test.py"
