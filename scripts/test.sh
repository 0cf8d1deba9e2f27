#!/usr/bin/env bash
# make test (and CI): every check and test, then the arm64 package, with
# the machine's cores kept busy. The steps are the make targets docs/testing.md
# lists, run in that order; two things run beside them:
#
# - the tools' installs (pip, npm: one core) run beside `make check`
#   (cargo fmt and clippy), which takes the other core and both once they
#   are done;
# - `make package` (a release build for arm64 with fat LTO, the longest
#   step) runs in the background at the lowest CPU priority, so it takes
#   mostly the CPU the tests leave idle (the acceptance runs spend much of
#   their time waiting on emulators and sockets); disk and memory it still
#   shares. No input (a prompt would stop it for good), its output in
#   target/package.log, printed at the end.
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

step "${make[@]}" -j2 --output-sync=target tools dynamodb-local client-tools check

mkdir -p target
package_log="$root/target/package.log"
# Job control gives the background build a process group of its own, so a
# failing step can stop all of it (cargo, rustc, zig) at once.
set -m
nice -n 19 "${make[@]}" package </dev/null >"$package_log" 2>&1 &
package=$!
set +m
stop_package() { kill -- -"$package" 2>/dev/null || true; }
trap stop_package EXIT
package_started=$SECONDS

for target in validate unit events-rie-test api-test events-test sealing-test clients lambda-test; do
  step "${make[@]}" "$target"
done

waited=$SECONDS
if ! wait "$package"; then
  cat "$package_log" >&2
  echo "make test: make package failed (log above: $package_log)" >&2
  exit 1
fi
trap - EXIT
timings+=("$(printf '%4ds  make package (beside the steps above, then %ds more)' \
  $((SECONDS - package_started)) $((SECONDS - waited)))")
tail -n 3 "$package_log"

echo
echo "make test: every step passed, in ${SECONDS}s:"
printf '  %s\n' "${timings[@]}"
