#!/usr/bin/env bash
# What telling the daemon "ending" costs a short `gpulane run` before its GPUs go to the next job:
# 15 `gpulane run -g 1 -- true` against a per-user daemon with telemetry on (a 60 s interval: each
# run is shorter than two, so it asks "ending" while it holds its lease) and with telemetry off
# (nothing asked); prints the median of GPULANE_TIMING's "release after the job's end" of each.
# Usage: bench/run_ending_cost.sh [BUILD_DIR]   (default build; the fake NVML's recorded H200s)
set -u
M=$(cd "$(dirname "$0")/.." && pwd)
B=${1:-$M/build}
export GPULANE_NVML_LIBRARY=$B/fake_nvml/current/libnvidia-ml.so.1 GPULANE_DIRECT_NVML=1
export FAKE_NVML_STATE=$M/tests/fixtures/h200x2-2026-11-30-idle/nvml_snapshot.json
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for mode in on off; do
  d=$work/$mode
  mkdir -p "$d"
  export GPULANE_SOCKET=$d/sock GPULANE_STATE_DIR=$d/state GPULANE_SYSTEM_DAEMON=0 GPULANE_LEASE_DIR=$d/leases GPULANE_CONFIG=$d/config.toml
  if [ "$mode" = on ]; then telemetry='interval = "60s"'; else telemetry='enabled = false'; fi
  printf '[telemetry]\n%s\n[web]\nlisten = "off"\n' "$telemetry" > "$d/config.toml"
  "$B/gpulane" daemon --user > "$d/daemon.out" 2>&1 &
  until "$B/gpulane" daemon status > /dev/null 2>&1; do sleep 0.1; done
  for _ in $(seq 1 15); do
    GPULANE_TIMING=1 "$B/gpulane" run -g 1 -- true 2>&1 | grep -o "release after the job's end [0-9.]* ms"
  done | awk '{print $6}' | sort -n | awk -v m="$mode" '{a[NR]=$1} END {print "telemetry " m ": median release after the job'"'"'s end " a[int((NR+1)/2)] " ms (n=" NR ")"}'
  "$B/gpulane" daemon stop > /dev/null 2>&1
done
