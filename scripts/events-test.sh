#!/usr/bin/env bash
# make events-test: change events end to end. Starts a DynamoDB Local and a
# local-api of their own (scripts/with-local-api.sh; the tables get NEW_IMAGE
# streams at creation, as on AWS), sends updates and rejected requests through
# the API, reads the tables' streams, and applies each table's pipe from
# template.yaml (filter and input template) to the real records:
# tools/events/events_test.py says what it checks. Logs: target/events-test/.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="$root/.venv/bin/python"
[[ -x "$python" ]] || { echo "events-test: $python is missing (make tools)" >&2; exit 1; }
exec "$root/scripts/with-local-api.sh" "$root/target/events-test${LAMBDA:+-lambda}" "$python" "$root/tools/events/events_test.py"
