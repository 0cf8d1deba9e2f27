#!/usr/bin/env bash
# make fuzz: each cargo-fuzz target for FUZZ_SECONDS from its corpus and seeds (logs in
# target/fuzz-<target>.log), then one line per target: executions, peak RSS, any finding.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root/fuzz"
seconds="${FUZZ_SECONDS:-600}"
limits=(-rss_limit_mb=1024 -malloc_limit_mb=64)
mkdir -p corpus/body corpus/event "$root/target"

declare -A seeds=(
  [body]="corpus-seed"
  [event]="corpus-seed-event $(python3 "$root/tools/kinds.py" functions | sed 's|[^ ]*|../events/&|g')"
)
declare -A extra=([body]="" [event]="-max_len=70000")

summary=()
failed=0
for target in body event; do
  log="$root/target/fuzz-$target.log"
  # shellcheck disable=SC2086 # the seed directories are words
  RUSTC_BOOTSTRAP=1 cargo fuzz run "$target" "corpus/$target" ${seeds[$target]} -- \
    -dict=json.dict ${extra[$target]} -max_total_time="$seconds" "${limits[@]}" -print_final_stats=1 \
    2>&1 | tee "$log"
  status=${PIPESTATUS[0]}
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  rss=$(grep -o 'stat::peak_rss_mb: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  line="$target: ${runs:-?} executions, peak RSS ${rss:-?} MB"
  if [ "$status" -ne 0 ]; then
    failed=1
    found=$(grep -m1 -E 'panicked at|ERROR: libFuzzer|ERROR: AddressSanitizer|out-of-memory|malloc\(' "$log")
    artifact=$(grep -m1 -o 'Test unit written to [^ ]*' "$log")
    line="$line; FINDING: ${found:-exit $status} (${artifact:-no artifact written}); log: $log"
  else
    line="$line; no finding"
  fi
  summary+=("$line")
done

echo
echo "make fuzz (${seconds} s per target):"
printf '  %s\n' "${summary[@]}"
exit "$failed"
