#!/usr/bin/env bash
# make test (and CI): every check and test in docs/testing.md's order, then the arm64
# package, built in the background at nice 19 (target/package.log); lints and tests share
# one build through clippy-driver. Any failing step fails the run; prints each step's time.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
make=("${MAKE:-make}" --no-print-directory)

timings=()
step() {
  local started=$SECONDS
  if ! "$@"; then
    echo "make test: failed in '$*' after $((SECONDS - started))s (output above)" >&2
    exit 1
  fi
  timings+=("$(printf '%4ds  %s' $((SECONDS - started)) "$*")")
}

mkdir -p target
# Starts once the tools are installed. set -m: its own process group, so a failure stops all
# of it; </dev/null: in its own group, a prompt would hang the run forever.
package_log="$root/target/package.log"
set -m
bash -c 'until "$@" -q .venv/.installed; do sleep 1; done; exec nice -n 19 "$@" package' \
  package "${make[@]}" </dev/null >"$package_log" 2>&1 &
package=$!
set +m
trap 'kill -- -"$package" 2>/dev/null || true' EXIT

# docs-test's browser, where the machine lacks it (as root, as on CI): Debian's chromium installs
# beside the build, mostly waiting on the network and the disk, instead of alone before docs-test.
browser=
if ! command -v chromium >/dev/null && [[ "$(id -u)" == 0 ]]; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) \
    </dev/null >"$root/target/chromium-install.log" 2>&1 &
  browser=$!
fi
# dpkg is never stopped halfway: a run that fails before docs-test waits for the install to end.
# (A trap's commands run under set -e too: neither may end it early or change the exit status.)
trap '{ [[ -z "$browser" ]] || wait "$browser"; } 2>/dev/null || true; kill -- -"$package" 2>/dev/null || true' EXIT

# From here on, workspace crates compile through clippy-driver (not the package build above).
CLIPPY_DRIVER="$("${RUSTC:-rustc}" --print sysroot)/bin/clippy-driver"
[ -x "$CLIPPY_DRIVER" ] || { echo "make test: $CLIPPY_DRIVER not found (rustup component add clippy)" >&2; exit 1; }
export CLIPPY_DRIVER RUSTC_WORKSPACE_WRAPPER="$root/scripts/clippy-rustc"

step "${make[@]}" format-check
step "${make[@]}" -j2 --output-sync=target tools dynamodb-local client-tools docs-tools guard-tool build

for target in validate unit events-rie-test api-test events-test clients docs-test lambda-test; do
  if [[ "$target" == docs-test && -n "$browser" ]] && ! wait "$browser"; then
    cat "$root/target/chromium-install.log" >&2
    echo "make test: installing chromium failed (output above)" >&2
    exit 1
  fi
  step "${make[@]}" "$target"
done

waited=$SECONDS
if ! wait "$package"; then
  cat "$package_log" >&2
  echo "make test: failed in 'make package' (output above: $package_log)" >&2
  exit 1
fi
trap - EXIT
timings+=("$(printf '%4ds  make package (in the background; waited %ds for it)' $SECONDS $((SECONDS - waited)))")
tail -n 3 "$package_log"

echo
echo "make test: every step passed, in ${SECONDS}s:"
printf '  %s\n' "${timings[@]}"
