#!/usr/bin/env bash
# make docs-test: the API reference (GET /docs) in headless Chromium (tools/docs/browser-test.mjs) against a
# local-api of its own, with two development tokens: every project, and the sample project only. Installs Debian's
# chromium when missing (as root, as on CI). Screenshots go to target/docs-test${LAMBDA:+-lambda}/.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
log_dir="$root/target/docs-test${LAMBDA:+-lambda}"
if ! command -v chromium >/dev/null; then
  [[ "$(id -u)" == 0 ]] || { echo "docs-test: chromium is missing; as root: apt-get install -y chromium" >&2; exit 1; }
  echo "docs-test: installing Debian's chromium (apt-get)..." >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
[[ -f "$root/tools/docs/node_modules/.installed" ]] || { echo "docs-test: install the docs tools first: make docs-tools" >&2; exit 1; }
rm -rf "$log_dir"
export root log_dir SAMPLE_PROJECT_ID=8a4b2c1d-3e5f-4a6b-8c7d-9e0f1a2b3c4d
# Single quotes: API_URL and the secret are only known inside with-local-api.sh.
# shellcheck disable=SC2016
exec "$root/scripts/with-local-api.sh" "$log_dir" bash -c '
  SAMPLE_TOKEN="$("$root/target/debug/local-api" token --jwt-secret "$API_JWT_SECRET" --projects "$SAMPLE_PROJECT_ID" \
    --sub docs-test-sample-project)" SHOTS="$log_dir" exec node "$root/tools/docs/browser-test.mjs"'
