#!/usr/bin/env bash
# make validate: openapi.yaml under redocly's recommended rules (exceptions in .redocly.lint-ignore.yaml) and
# Spectral with the OWASP API Security ruleset (.spectral.yaml); a warning fails as an error does.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bin="$root/tools/docs/node_modules/.bin"
[[ -x "$bin/redocly" && -x "$bin/spectral" ]] || { echo "openapi-lint: install the linters first: make docs-tools" >&2; exit 1; }
# No usage data, no update check; the box redocly draws about Node.js versions is noise here.
export REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true
status=0
output="$("$bin/redocly" lint --extends recommended openapi.yaml 2>&1)" || status=$?
grep -v '[║╔╚]' <<<"$output" || true
if [[ $status -ne 0 ]] || grep -qE 'You have [0-9]+ warning' <<<"$output"; then
  echo "openapi-lint: redocly found problems in openapi.yaml (above)" >&2
  exit 1
fi
"$bin/spectral" lint openapi.yaml --ruleset .spectral.yaml --fail-severity warn --format text --display-only-failures
echo "openapi-lint: redocly (recommended) and Spectral (OWASP API Security): no problems"
