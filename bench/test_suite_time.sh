#!/usr/bin/env bash
# Wall time of the whole test suite as CI runs it (ctest -j$(nproc) over an existing build), and
# the slowest tests, so that a test that waits instead of synchronising shows up.
#
#   bench/test_suite_time.sh [BUILD_DIR]     (default build; builds it first)
#
# Prints a markdown table on stdout: machine, wall time, test count, the 10 slowest tests.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" >/dev/null
log=$(mktemp)
trap 'rm -f "$log"' EXIT
start=$(date +%s.%N)
ctest --test-dir "$build" -j "$(nproc)" --timeout 300 >"$log" 2>&1 || true
end=$(date +%s.%N)
wall=$(python3 -c "print(f'{$end - $start:.1f}')")
summary=$(grep -E "tests passed|tests failed" "$log" | tail -1)
echo "## Test suite wall time"
echo
echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ); commit $(git rev-parse --short HEAD)$(git diff --quiet || echo ' + working tree')"
echo "- machine: $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)); load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "- command: ctest --test-dir $build -j $(nproc) (what ./scripts/test.sh runs after building)"
echo "- result: $summary"
echo "- wall time: **$wall s**"
echo
echo "| slowest tests | seconds |"
echo "|---|---:|"
grep -E "^ *[0-9]+/[0-9]+ Test +#[0-9]+: " "$log" | sed -E 's/.*Test +#[0-9]+: ([^ ]+) .* ([0-9.]+) sec$/\2 \1/' | sort -rn | head -10 |
  while read -r sec name; do echo "| $name | $sec |"; done
