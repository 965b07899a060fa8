#!/usr/bin/env bash
# How long `gpulane simulate` takes for 100,000 jobs on 8 GPUs, per policy (issue 10 item 10: at
# most 10 s on the 2-core CI machine). A benchmark, not a timed test.
#
#   bench/simulate.sh [-n JOBS] [--gpus N] [--load X] [--trace FILE [--format F]]
#
# Without --trace the jobs are synthetic (bench/make_sim_trace.py, seed 1: 80 % with time limits,
# log-normal runtimes, 1-8 GPUs and some memory shares, offered load 0.9). Each policy runs as its
# own process; the baseline, measured in the same run, is the same command simulating one job
# (process start, reading and transforming the whole trace), so each ratio says what the
# simulation itself costs on top of reading the trace. gpulane is $GPULANE or build/gpulane.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=100000 gpus=8 load=0.9 trace="" format=csv
while [[ $# -gt 0 ]]; do
  case "$1" in
    -n) jobs=$2; shift 2 ;;
    --gpus) gpus=$2; shift 2 ;;
    --load) load=$2; shift 2 ;;
    --trace) trace=$2; shift 2 ;;
    --format) format=$2; shift 2 ;;
    *) echo "usage: $0 [-n JOBS] [--gpus N] [--load X] [--trace FILE [--format F]]" >&2; exit 2 ;;
  esac
done
gpulane=${GPULANE:-build/gpulane}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [[ -z $trace ]]; then
  python3 bench/make_sim_trace.py --jobs "$jobs" --gpus "$gpus" --load "$load" --seed 1 >"$tmp/trace.csv"
  trace=$tmp/trace.csv
  what="synthetic, $jobs jobs (bench/make_sim_trace.py --jobs $jobs --gpus $gpus --load $load --seed 1)"
  extra=()
else
  what="$trace ($format, load $load, first $jobs jobs, time limits factor:2)"
  extra=(--load "$load" --time-limit-from factor:2)
fi
common=("$gpulane" simulate "$trace" --format "$format" --gpus "$gpus" "${extra[@]}" --json)

seconds() {  # wall seconds of a command, its output kept in $tmp/out.json
  local start end
  start=$(date +%s.%N)
  "$@" >"$tmp/out.json"
  end=$(date +%s.%N)
  echo "$end - $start" | bc -l
}

base=$(seconds "${common[@]}" --policy fifo --limit-jobs 1)
reading=$(python3 -c 'import json,sys; print("%.3f" % json.load(open(sys.argv[1]))["trace"]["read_s"])' "$tmp/out.json")
echo "# gpulane simulate: $what on $gpus GPUs"
echo "host $(hostname), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo
printf '| %-9s | %8s | %10s | %9s | %12s | %11s |\n' policy "wall s" "x baseline" decisions "longest line" utilisation
printf '|%s|%s|%s|%s|%s|%s|\n' ----------- ---------- ------------ ----------- -------------- -------------
printf '| %-9s | %8.3f | %10s | %9s | %12s | %11s |\n' "baseline" "$base" "1" "-" "-" "-"
total=0
for policy in fifo firstfit easy default; do
  s=$(seconds "${common[@]}" --policy "$policy" --limit-jobs "$jobs")
  total=$(echo "$total + $s" | bc -l)
  read -r decisions line util < <(python3 -c 'import json,sys; p=json.load(open(sys.argv[1]))["policies"][0]; print(p["decisions"], p["max_waiting"], "%.3f" % p["utilisation"])' "$tmp/out.json")
  printf '| %-9s | %8.3f | %10.1f | %9s | %12s | %11s |\n' "$policy" "$s" "$(echo "$s / $base" | bc -l)" "$decisions" "$line" "$util"
done
echo
echo "baseline: the same command simulating 1 job (process start + reading and transforming the trace: $reading s of it)"
printf 'all four: %.3f s; the goal is at most 10 s for each\n' "$total"
