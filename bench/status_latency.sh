#!/usr/bin/env bash
# How long a user waits for an answer: `gpulane status --json` and `gpulane pick` against
# nvidia-smi (query and plain) and a hand-written pynvml picker, each run end to end as a fresh
# process (N timed runs after W warm-ups, interleaved). Prints a markdown report on stdout.
#
# Usage: bench/status_latency.sh [-n N] [-w W] [--json FILE]
#   gpulane: $GPULANE if set, else .carry/bin/gpulane (with LD_LIBRARY_PATH=.carry/lib), else build/gpulane.
#   Rows whose tool is missing (nvidia-smi, pynvml) are listed as skipped. Against the fake NVML
#   (GPULANE_NVML_LIBRARY set) the report says so: those numbers are not GPU numbers.
set -euo pipefail
cd "$(dirname "$0")/.."

n=30
w=3
json_out=""
while (($#)); do
  case "$1" in
    -n) n=$2; shift 2 ;;
    -w) w=$2; shift 2 ;;
    --json) json_out=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/{/^set -euo/!s/^# \{0,1\}//p}' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
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

# Describe the machine, so that a committed table says where it came from.
summary=$("$gl" status --json 2>/dev/null | python3 -c '
import json, sys
from collections import Counter
try:
    d = json.load(sys.stdin)
except ValueError:
    print("unknown (gpulane status --json failed)"); sys.exit()
names = Counter(g.get("name", "?") for g in d["gpus"])
gpus = ", ".join("%d × %s" % (c, n) for n, c in names.items()) or "no GPU"
print("%s; driver %s; CUDA %s" % (gpus, d.get("driver_version", "?"), d.get("cuda_driver_version", "?")))' || true)
build_commit=$(sed -n 's/^commit: //p' .carry/BUILD_INFO 2>/dev/null || true)
[ -n "$build_commit" ] || build_commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)

echo "## gpulane status latency"
echo
echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ); host: $(hostname); $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME"); $(nproc) CPUs"
echo "- GPUs: $summary"
echo "- gpulane: $gl (build $build_commit)"
if [ -n "${GPULANE_NVML_LIBRARY:-}" ]; then
  echo "- **NVML: $GPULANE_NVML_LIBRARY (FAKE_NVML_STATE=${FAKE_NVML_STATE:-unset}) — a dry run, not GPU numbers**"
fi
echo "- method: bench/timeit.py, each command a fresh process (fork+exec to exit, output discarded), $w warm-ups, then $n interleaved rounds; p90 is nearest-rank"
echo

# Without a daemon each command initialises NVML itself (GPULANE_DIRECT_NVML=1, through env(1));
# with one it asks the daemon for the snapshot. A per-user daemon in a temporary folder serves the
# second pair of rows.
bench_state=$(mktemp -d "${TMPDIR:-/tmp}/gpulane-bench-daemon.XXXXXX")
export GPULANE_SOCKET=$bench_state/gpulane.sock GPULANE_STATE_DIR=$bench_state/state
"$gl" daemon --user >"$bench_state/daemon.log" 2>&1 &
bench_daemon=$!
trap 'kill "$bench_daemon" 2>/dev/null; rm -rf "$bench_state"' EXIT
for _ in $(seq 100); do [ -S "$GPULANE_SOCKET" ] && break; sleep 0.1; done
echo "- daemon rows: \`gpulane daemon --user\` running (pid $bench_daemon), commands take its snapshot; other gpulane rows: GPULANE_DIRECT_NVML=1 (NVML in the command; \`env\` adds its own start, see the reference rows)"
echo
cases=(--case "gpulane status --json" "env GPULANE_DIRECT_NVML=1 $gl status --json"
       --case "gpulane pick" "env GPULANE_DIRECT_NVML=1 $gl pick"
       --case "gpulane status --json (daemon running)" "$gl status --json"
       --case "gpulane pick (daemon running)" "$gl pick")
if command -v nvidia-smi >/dev/null 2>&1; then
  cases+=(--case "nvidia-smi --query-gpu=index,uuid,memory.used,memory.total,utilization.gpu --format=csv"
                 "nvidia-smi --query-gpu=index,uuid,memory.used,memory.total,utilization.gpu --format=csv"
          --case "nvidia-smi" "nvidia-smi")
else
  cases+=(--skip "nvidia-smi --query-gpu=index,uuid,memory.used,memory.total,utilization.gpu --format=csv" "no nvidia-smi"
          --skip "nvidia-smi" "no nvidia-smi")
fi
if python3 -c 'import pynvml' >/dev/null 2>&1; then
  cases+=(--case "python3 bench/pick_pynvml.py" "python3 bench/pick_pynvml.py")
else
  cases+=(--skip "python3 bench/pick_pynvml.py" "no pynvml module")
fi
# Floors, for reading the rows above: starting any process, and starting Python.
cases+=(--case "true (process start, reference)" "$(command -v true)"
        --case "env true (env's start, reference)" "env true"
        --case "python3 -c pass (Python start, reference)" "python3 -c pass")

args=(-n "$n" -w "$w")
[ -z "$json_out" ] || args+=(--json "$json_out")
python3 bench/timeit.py "${args[@]}" "${cases[@]}"
