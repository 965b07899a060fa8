#!/usr/bin/env bash
# Where the time of one `gpulane run -g 1 -- true` goes without a daemon (GPULANE_DIRECT_NVML=1):
# runs it N times (default 6) with GPULANE_TIMING=1, one line of timing marks per run, then the
# medians of N=20 fresh processes of `true`, `status`, `pick`, `run -g 1` and `run -g 0` (no NVML).
# Leases go to a fresh lease directory on /dev/shm. gpulane: .carry/bin first on PATH (the device
# machine), else build/.
#   bench/run_timing.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PWD/.carry/bin:$PWD/build:$PATH
n=${1:-6}
GPULANE_LEASE_DIR=$(mktemp -d /dev/shm/gpulane-timing.XXXXXX)
export GPULANE_LEASE_DIR
chmod 1777 "$GPULANE_LEASE_DIR"
trap 'rm -rf "$GPULANE_LEASE_DIR"' EXIT
for _ in $(seq "$n"); do
  GPULANE_DIRECT_NVML=1 GPULANE_TIMING=1 gpulane run -g 1 -- true 2>&1 | tr '\n' ' '
  echo
done
python3 - <<'PY'
import os, statistics, subprocess, time
env = dict(os.environ, GPULANE_DIRECT_NVML="1")
def median_ms(cmd, n=20):
    xs = []
    for _ in range(n):
        a = time.perf_counter()
        subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        xs.append((time.perf_counter() - a) * 1000)
    return statistics.median(xs)
for name, cmd in [("true", ["true"]), ("status", ["gpulane", "status"]), ("pick", ["gpulane", "pick"]),
                  ("run", ["gpulane", "run", "-g", "1", "--", "true"]), ("run -g0", ["gpulane", "run", "-g", "0", "--", "true"])]:
    print(name, median_ms(cmd))
PY
