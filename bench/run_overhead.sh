#!/usr/bin/env bash
# What `gpulane run` costs a job, measured in ONE run against baselines measured in the same run:
#   1. per-job overhead: `gpulane run -g 1 -- true` against plain `true` (fork+exec to exit);
#   2. hand-over latency: job A `sh -c 'sleep 0.2; date +%s.%N >> ends'` holds the GPU, job B waits
#      behind it with `sh -c 'date +%s.%N >> starts'`; latency = B's start - A's end. The same with
#      task-spooler (`tsp -S 1`, one slot, its own TS_SOCKET) as the baseline.
# Prints a markdown report (preamble + one table) on stdout; progress and errors on stderr.
#
# Usage: bench/run_overhead.sh [-n N] [-w W] [--rounds R] [--gpu INDEX] [--fake] [--no-tsp] [--json FILE] [--note TEXT]
#   -n N        timed runs of each per-job case (default 30), after W warm-ups (default 3)
#   --rounds R  hand-over rounds for gpulane and for tsp (default 20), after 2 warm-up rounds each
#   --gpu I     the GPU that A and B both ask for (--gpus I); default: what `gpulane pick` prints
#   --fake      use the fake NVML even where a driver is installed
#   --no-tsp    leave out the task-spooler rows
#   --json F    write every sample and the medians to F
#   --note T    one more line for the preamble (e.g. how the binary was built)
#
# NVML: the real driver's libnvidia-ml.so.1 when one is installed (GPULANE_NVML_LIBRARY and
# FAKE_NVML_STATE are then unset). Without a driver, or with --fake, it sets up the fake NVML
# itself: build/fake_nvml/current/libnvidia-ml.so.1 and a copy of the recorded 2 x H200 fixture
# (tests/fixtures) whose recorded process gets an unused pid. If the caller
# already set GPULANE_NVML_LIBRARY (e.g. the dry run of scripts/gpu-acceptance.sh), that is used
# as given. The report says which NVML it used; fake numbers are not GPU numbers.
#
# Leases go to a fresh temporary GPULANE_LEASE_DIR (mode 1777; on tmpfs, /run or /dev/shm, like
# /run/gpulane/leases), removed at the end, so other users' leases neither delay nor see these jobs. gpulane: $GPULANE if set, else .carry/bin/gpulane
# (with LD_LIBRARY_PATH=.carry/lib), else build/gpulane.
set -euo pipefail
cd "$(dirname "$0")/.."

n=30
w=3
rounds=20
gpu=""
fake=0
use_tsp=1
json_out=""
note=""
while (($#)); do
  case "$1" in
    -n) n=$2; shift 2 ;;
    -w) w=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --gpu) gpu=$2; shift 2 ;;
    --fake) fake=1; shift ;;
    --no-tsp) use_tsp=0; shift ;;
    --json) json_out=$2; shift 2 ;;
    --note) note=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/{/^set -euo/!s/^# \{0,1\}//p}' "$0"; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done

if [ -n "${GPULANE:-}" ]; then
  gl=$GPULANE
elif [ -x .carry/bin/gpulane ]; then
  gl=$PWD/.carry/bin/gpulane
  export LD_LIBRARY_PATH="$PWD/.carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
else
  gl=$PWD/build/gpulane
fi
[ -x "$gl" ] || { echo "error: no gpulane binary ($gl); run scripts/make-carry.sh or build" >&2; exit 1; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/run-overhead.XXXXXX")
tsp_bin=""
lease_dir=""
cleanup() {
  if [ -n "$tsp_bin" ]; then TS_SOCKET=$tmp/ts.sock "$tsp_bin" -K >/dev/null 2>&1 || true; fi
  rm -rf "$tmp" "${lease_dir:-}"
}
trap cleanup EXIT

# ---------------------------------------------------------------- NVML
driver_present() {
  [ -e /proc/driver/nvidia/version ] || ldconfig -p 2>/dev/null | grep -q 'libnvidia-ml\.so\.1'
}
setup_fake() {
  local lib=$PWD/build/fake_nvml/current/libnvidia-ml.so.1 fixture=$PWD/tests/fixtures/h200x2-2026-11-30/nvml_snapshot.json
  [ -f "$lib" ] || { echo "error: no fake NVML at $lib (cmake --build build)" >&2; exit 1; }
  [ -f "$fixture" ] || { echo "error: no fixture $fixture" >&2; exit 1; }
  # The recorded processes (pid 673 in this fixture) get pids that no process here has, so they
  # stay "another container's process" and cannot be mistaken for one of ours.
  python3 - "$fixture" "$tmp/fake_state.json" <<'PY'
import json, os, sys
d = json.load(open(sys.argv[1]))
pid_max = int(open("/proc/sys/kernel/pid_max").read())
free = (p for p in range(pid_max - 1, 300, -1) if not os.path.exists(f"/proc/{p}"))
for dev in d["devices"]:
    for p in dev.get("processes", []):
        p["pid"] = next(free)
json.dump(d, open(sys.argv[2], "w"), indent=1)
PY
  export GPULANE_NVML_LIBRARY=$lib FAKE_NVML_STATE=$tmp/fake_state.json
  nvml_line="**FAKE NVML: $lib, state = copy of $fixture (recorded pid replaced by an unused one) — a dry run, not GPU numbers**"
}
if [ "$fake" -eq 1 ]; then
  setup_fake
elif [ -n "${GPULANE_NVML_LIBRARY:-}" ]; then
  if [ -n "${FAKE_NVML_STATE:-}" ]; then
    nvml_line="**FAKE NVML (given by the caller): $GPULANE_NVML_LIBRARY, FAKE_NVML_STATE=$FAKE_NVML_STATE — a dry run, not GPU numbers**"
  else
    nvml_line="NVML given by the caller: GPULANE_NVML_LIBRARY=$GPULANE_NVML_LIBRARY"
  fi
elif driver_present; then
  unset FAKE_NVML_STATE
  nvml_line="real NVML: $(ldconfig -p 2>/dev/null | grep -m1 'libnvidia-ml\.so\.1' | sed 's/^[[:space:]]*//' || echo libnvidia-ml.so.1); driver $(sed -n 's/.*Kernel Module *\([0-9.]*\).*/\1/p' /proc/driver/nvidia/version 2>/dev/null | head -1)"
else
  setup_fake
fi

# ---------------------------------------------------------------- lease dir, GPU, tsp
# On tmpfs, as /run/gpulane/leases is in production: on a disk file system (ext4) rewriting a lease
# file makes its close start a writeback, which is not what users pay.
lease_dir=""
for base in /run /dev/shm; do
  if [ -d "$base" ] && [ -w "$base" ] && [ "$(stat -f -c %T "$base" 2>/dev/null)" = tmpfs ]; then
    lease_dir=$(mktemp -d "$base/gpulane-bench-leases.XXXXXX") && break
  fi
done
[ -n "$lease_dir" ] || lease_dir=$(mktemp -d "$tmp/leases.XXXXXX")
chmod 1777 "$lease_dir"
export GPULANE_LEASE_DIR=$lease_dir
unset CUDA_VISIBLE_DEVICES  # an inherited one would restrict which GPUs gpulane may lease

status_json=$("$gl" status --json 2>"$tmp/status.err") || {
  echo "error: gpulane status --json failed: $(cat "$tmp/status.err")" >&2
  exit 1
}
summary=$(python3 -c '
import json, sys
from collections import Counter
d = json.loads(sys.argv[1])
names = Counter(g.get("name", "?") for g in d["gpus"])
print("%s; driver %s; CUDA %s" % (", ".join("%d × %s" % (c, n) for n, c in names.items()) or "no GPU",
      d.get("driver_version", "?"), d.get("cuda_driver_version", "?")))' "$status_json")
if [ -z "$gpu" ]; then
  gpu=$("$gl" pick 2>"$tmp/pick.err" | tr -d '[:space:]') || true
  [ -n "$gpu" ] || { echo "error: gpulane pick found no GPU for the hand-over jobs: $(cat "$tmp/pick.err")" >&2; exit 1; }
fi

tsp_args=()
if [ "$use_tsp" -eq 0 ]; then
  tsp_args=(--tsp-skip "left out (--no-tsp)")
elif ! command -v tsp >/dev/null 2>&1; then
  tsp_args=(--tsp-skip "task-spooler not installed (Debian/Ubuntu: apt-get install -y task-spooler)")
else
  tsp_bin=$(command -v tsp)
  # Its own server: socket and output files in $tmp, one slot.
  if TS_SOCKET=$tmp/ts.sock TMPDIR=$tmp "$tsp_bin" -S 1 >/dev/null 2>"$tmp/tsp.err"; then
    tsp_args=(--tsp "$tsp_bin" --tsp-socket "$tmp/ts.sock")
  else
    tsp_args=(--tsp-skip "tsp -S 1 failed: $(head -1 "$tmp/tsp.err")")
    tsp_bin=""
  fi
fi

if [ "$gl" -ef .carry/bin/gpulane ]; then
  build_commit=$(sed -n 's/^commit: //p' .carry/BUILD_INFO 2>/dev/null || true)
elif [[ "$(realpath "$gl")" == "$PWD"/* ]]; then
  build_commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- src 2>/dev/null || echo ' + uncommitted changes in src/') (working tree now; the binary may be older)"
else
  build_commit="unknown: not this checkout's binary"
fi

echo "## gpulane run: per-job overhead and hand-over latency"
echo
echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ); host: $(hostname); $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME"); kernel $(uname -r); $(nproc) CPUs"
echo "- GPUs: $summary"
echo "- NVML: $nvml_line"
[ -z "$note" ] || echo "- note: $note"
echo "- load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "- gpulane: $gl (build $build_commit)"
echo "- lease dir: a fresh temporary one, mode 1777, on $(stat -f -c %T "$lease_dir") ($lease_dir)"
if [ -n "$tsp_bin" ]; then
  echo "- task-spooler: $tsp_bin ($(dpkg-query -W -f='${Version}' task-spooler 2>/dev/null || echo 'version unknown')), \`tsp -S 1\`, own TS_SOCKET"
fi
echo "- method: bench/run_overhead.py; per job: $w warm-ups, then $n interleaved runs, each a fresh process from fork to exit; hand-over: 2 warm-up rounds, then $rounds interleaved rounds of A (\`sleep 0.2\`, then \`date +%s.%N\`) and B (\`date +%s.%N\`, waiting behind A), both on GPU $gpu (\`--gpus $gpu\`); p90 is nearest-rank"
echo

# A per-user daemon in the temporary folder, for the "daemon running" row (commands then take its
# GPU snapshot instead of starting NVML themselves). The other gpulane rows run with GPULANE_DIRECT_NVML=1.
GPULANE_SOCKET=$tmp/gpulane.sock GPULANE_STATE_DIR=$tmp/state GPULANE_LEASE_DIR=$lease_dir "$gl" daemon --user >"$tmp/daemon.log" 2>&1 &
bench_daemon=$!
for _ in $(seq 100); do [ -S "$tmp/gpulane.sock" ] && break; sleep 0.1; done
echo "- daemon row: \`gpulane daemon --user\` running (pid $bench_daemon); other gpulane rows: GPULANE_DIRECT_NVML=1"
echo
args=(--gpulane "$gl" --gpu "$gpu" --lease-dir "$lease_dir" --work "$tmp" -n "$n" -w "$w" --rounds "$rounds" "${tsp_args[@]}"
      --daemon-socket "$tmp/gpulane.sock")
[ -z "$json_out" ] || args+=(--json "$json_out")
rc=0
GPULANE_DIRECT_NVML=1 python3 bench/run_overhead.py "${args[@]}" || rc=$?
kill "$bench_daemon" 2>/dev/null || true
wait "$bench_daemon" 2>/dev/null || true
exit $rc
