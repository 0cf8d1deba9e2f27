#!/usr/bin/env bash
# make test (and CI): every check and test, then the arm64 package, with
# the machine's cores kept busy. The steps are the make targets docs/testing.md
# lists, run in that order; three things make it cheaper than running them
# one by one:
#
# - the workspace compiles once for lints and tests alike: every cargo
#   command below (not the package's) compiles the workspace's own crates
#   through clippy-driver, the compiler `cargo clippy` runs, with warnings
#   denied (scripts/clippy-rustc). `make check` would compile every
#   dependency a second time, in check mode, for the same lints; here
#   `make build` lints what the tests then run, and a lint stops the run
#   there;
# - the tools' installs (uv, npm) run beside that build, under one make -j2;
# - `make package` (a release build for arm64 with fat LTO, the longest
#   step) runs in the background from the moment the tools are installed,
#   at the lowest CPU priority, so it takes mostly the CPU the other steps
#   leave idle (single-threaded compiles and links, the acceptance runs'
#   waits on emulators and sockets); disk and memory it still shares. Its
#   output is in target/package.log, the sizes printed at the end. It
#   builds with plain rustc, as every shipped binary is built.
#
# Any failing step fails the run (the package build is then stopped); at
# the end each step's wall-clock time is printed.
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
# The package build needs the tools (cargo-lambda, zig): it starts the
# moment they are installed, while the workspace still compiles. Job control gives it
# a process group of its own, so a failing step can stop all of it (cargo,
# rustc, zig) at once. It reads no terminal: in a group of its own, a
# prompt would stop it for good and the run would wait forever.
package_log="$root/target/package.log"
set -m
bash -c 'until "$@" -q .venv/.installed; do sleep 1; done; exec nice -n 19 "$@" package' \
  package "${make[@]}" </dev/null >"$package_log" 2>&1 &
package=$!
set +m
trap 'kill -- -"$package" 2>/dev/null || true' EXIT

# From here on, cargo compiles the workspace's own crates with
# scripts/clippy-rustc (clippy-driver, warnings denied); the package build
# above keeps the environment it was started with.
CLIPPY_DRIVER="$("${RUSTC:-rustc}" --print sysroot)/bin/clippy-driver"
[ -x "$CLIPPY_DRIVER" ] || { echo "make test: $CLIPPY_DRIVER not found (rustup component add clippy)" >&2; exit 1; }
export CLIPPY_DRIVER RUSTC_WORKSPACE_WRAPPER="$root/scripts/clippy-rustc"

step "${make[@]}" format-check
step "${make[@]}" -j2 --output-sync=target tools dynamodb-local client-tools docs-tools guard-tool build

for target in validate unit events-rie-test api-test events-test clients docs-test lambda-test; do
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
