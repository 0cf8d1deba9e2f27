#!/usr/bin/env bash
# make test (and CI): every check and test, then the arm64 package, with
# the machine's cores kept busy. The steps are the make targets docs/testing.md
# lists, run in that order; two run in the background beside the others:
#
# - `make check` (cargo fmt and clippy) starts first, beside the tools'
#   installs (pip, npm: mostly one core), its output in target/check.log,
#   printed once it is done and before the tests;
# - `make package` (a release build for arm64 with fat LTO, the longest
#   step) starts once the tools are installed (it needs cargo-lambda and
#   zig from .venv), at the lowest CPU priority, so it takes mostly the CPU
#   the other steps leave idle (clippy's and the linker's single-threaded
#   stretches, the acceptance runs' waits on emulators and sockets); disk
#   and memory it still shares. Its output is in target/package.log, the
#   sizes printed at the end.
#
# Any failing step fails the run (the background builds are then
# stopped); at the end each step's wall-clock time is printed.
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
background=()
stop_background() { for group in "${background[@]}"; do kill -- -"$group" 2>/dev/null || true; done; }
trap stop_background EXIT
# Job control gives each background build a process group of its own, so
# a failing step can stop all of it (cargo, rustc, zig) at once. Neither
# reads the terminal: in a group of its own, a prompt would stop it for
# good and the run would wait forever.
background() {
  local log=$1
  shift
  set -m
  "$@" </dev/null >"$log" 2>&1 &
  set +m
  background+=("$!")
}
# Waits for the background job `pid` and records the time since `started`
# under `name`; if it failed, prints its output (`log`) and stops the run.
finish() {
  local pid=$1 log=$2 name=$3 started=$4 waited=$SECONDS
  if ! wait "$pid"; then
    cat "$log" >&2
    echo "make test: failed in '$name' (output above: $log)" >&2
    exit 1
  fi
  timings+=("$(printf '%4ds  %s (in the background; waited %ds for it)' \
    $((SECONDS - started)) "$name" $((SECONDS - waited)))")
}

check_log="$root/target/check.log"
background "$check_log" "${make[@]}" check
check=$!
check_started=$SECONDS
step "${make[@]}" -j2 --output-sync=target tools dynamodb-local client-tools

package_log="$root/target/package.log"
background "$package_log" nice -n 19 "${make[@]}" package
package=$!
package_started=$SECONDS

finish "$check" "$check_log" "make check" "$check_started"
cat "$check_log"

for target in validate unit events-rie-test api-test events-test sealing-test clients lambda-test; do
  step "${make[@]}" "$target"
done

finish "$package" "$package_log" "make package" "$package_started"
trap - EXIT
tail -n 3 "$package_log"

echo
echo "make test: every step passed, in ${SECONDS}s:"
printf '  %s\n' "${timings[@]}"
