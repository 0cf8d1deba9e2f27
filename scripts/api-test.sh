#!/usr/bin/env bash
# make api-test: generated-case API testing. Runs schemathesis with every
# default check against openapi.yaml and a local-api of its own on DynamoDB
# Local (scripts/with-local-api.sh), with the sample records loaded, which the
# OpenAPI examples name, so positive cases reach real records. Then every
# metrics line the functions wrote is checked against the embedded metric
# format (tools/metrics/check_emf.py).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
log_dir="$root/target/api-test${LAMBDA:+-lambda}"
export API_TEST_EXAMPLES="${API_TEST_EXAMPLES:-100}" API_TEST_SEED="${API_TEST_SEED:-20261121}" root log_dir
# Endpoints are generated from public DNS names only (see the file).
export SCHEMATHESIS_HOOKS="$root/tools/schemathesis_hooks.py"

# Single quotes: API_URL is only known inside with-local-api.sh.
# shellcheck disable=SC2016
exec "$root/scripts/with-local-api.sh" "$log_dir" bash -c '
  set -euo pipefail
  "$root/.venv/bin/st" --config-file "$root/tools/schemathesis.toml" run "$root/openapi.yaml" \
    --url "$API_URL" --header "Authorization: Bearer $API_TOKEN" --max-examples "$API_TEST_EXAMPLES" --seed "$API_TEST_SEED" \
    ${API_TEST_PHASES:+--phases "$API_TEST_PHASES"} \
    --report har --report-dir "$log_dir" --no-color
  "$root/.venv/bin/python" "$root/tools/metrics/check_emf.py" "$log_dir"/*.log'
