#!/bin/bash
# Issue 12, item 6: gpulane on Slurm, measured on the test cluster (tests/slurm/cluster.sh).
#   1. submissions per second: `gpulane submit --cluster slurm` vs plain `sbatch`, same run, same
#      options (held, so nothing runs), alternating rounds;
#   2. the poll load: Slurm commands per minute while WAITERS `gpulane wait` clients wait for one
#      running job (squeue/sacct/scontrol counted by wrapper scripts first on PATH);
#   3. hand-over: from the job's last command (it writes a timestamp) to each `gpulane wait`
#      returning, for a job that ends by itself.
#   bench/slurm.sh [BUILD_DIR] [SUBMITS] [WAITERS] [WINDOW_S]      (defaults: build 100 100 30)
# Prints a Markdown report on stdout.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$src/build}" && pwd)
submits=${2:-100}
waiters=${3:-100}
window_s=${4:-30}
gpulane=$build/gpulane; [ -x "$gpulane" ] || gpulane=$build/src/gpulane
work=$(mktemp -d /tmp/gpulane-slurm-bench.XXXXXX)
cleanup() { "$src/tests/slurm/cluster.sh" stop "$work/cluster" || true; }
trap cleanup EXIT
"$src/tests/slurm/cluster.sh" start "$work/cluster"
export SLURM_CONF=$work/cluster/slurm.conf
export GPULANE_STATE_DIR=$work/state GPULANE_CONFIG=$work/config.toml GPULANE_SYSTEM_DAEMON=0
export GPULANE_NVML_LIBRARY=$build/fake_nvml/current/libnvidia-ml.so.1 GPULANE_LEASE_DIR=$work/leases
export FAKE_NVML_STATE=$src/tests/fixtures/h200x2-2026-11-30/nvml_snapshot.json
: > "$GPULANE_CONFIG"
mkdir -p "$work/bin" "$work/jobs"
cd "$work/jobs"
now() { date +%s.%N; }

# 1. Submissions per second (held jobs; cancelled afterwards), alternating rounds of 10.
t_gpulane=0; t_sbatch=0
for ((round = 0; round < submits / 10; round++)); do
  s=$(now); for i in $(seq 10); do "$gpulane" submit --cluster slurm -g 1 --hold --name b -- true >/dev/null; done
  t_gpulane=$(echo "$t_gpulane + $(now) - $s" | bc)
  s=$(now); for i in $(seq 10); do sbatch --parsable --hold --gres=gpu:1 --job-name=b --wrap true >/dev/null; done
  t_sbatch=$(echo "$t_sbatch + $(now) - $s" | bc)
done
scancel --name=b
n=$((submits / 10 * 10))

# 2. + 3. WAITERS clients wait for one job; Slurm calls counted by wrappers on PATH.
for tool in squeue sacct scontrol sbatch scancel sinfo; do
  real=$(command -v $tool)
  printf '#!/bin/sh\necho "$(date +%%s.%%N) %s" >> %s/calls.log\nexec %s "$@"\n' "$tool" "$work" "$real" > "$work/bin/$tool"
  chmod +x "$work/bin/$tool"
done
export PATH=$work/bin:$PATH
: > "$work/calls.log"
id=$("$gpulane" submit --cluster slurm -g 1 --name waited -- sh -c "while [ ! -e '$work/go' ]; do sleep 0.05; done; date +%s.%N > '$work/ended'")
for ((i = 0; i < waiters; i++)); do
  (  "$gpulane" wait "$id" >/dev/null 2>&1; date +%s.%N >> "$work/returned" ) &
done
sleep 2  # the waiters start (not measured)
: > "$work/calls.log"
sleep "$window_s"
calls_window=$(wc -l < "$work/calls.log")
squeue_window=$(grep -c ' squeue$' "$work/calls.log" || true)
touch "$work/go"
wait
ended=$(cat "$work/ended")
sort -n "$work/returned" > "$work/returned.sorted"
first=$(head -1 "$work/returned.sorted"); last=$(tail -1 "$work/returned.sorted"); median=$(sed -n "$(( (waiters + 1) / 2 ))p" "$work/returned.sorted")
returned=$(wc -l < "$work/returned.sorted")

cat <<REPORT
## gpulane on Slurm ($(date -u +%Y-%m-%d), $(nproc) cores, $(slurmctld -V), test cluster of tests/slurm/cluster.sh)

Command: \`bench/slurm.sh $build $submits $waiters $window_s\`

| measure | value |
|---|---|
| \`gpulane submit --cluster slurm -g 1 --hold\`, $n submissions | $(printf %.1f "$(echo "$n / $t_gpulane" | bc -l)") /s ($(printf %.1f "$(echo "$t_gpulane * 1000 / $n" | bc -l)") ms each) |
| plain \`sbatch --hold --gres=gpu:1 --wrap true\`, $n submissions, same run | $(printf %.1f "$(echo "$n / $t_sbatch" | bc -l)") /s ($(printf %.1f "$(echo "$t_sbatch * 1000 / $n" | bc -l)") ms each) |
| Slurm commands while $waiters \`gpulane wait\` clients wait, ${window_s} s window | $calls_window ($squeue_window squeue) = $(printf %.1f "$(echo "$calls_window * 60 / $window_s" | bc -l)") per minute (poll_interval 5 s) |
| hand-over, job's last command to \`gpulane wait\` returning: first / median / last of $returned | $(printf %.3f "$(echo "$first - $ended" | bc -l)") / $(printf %.3f "$(echo "$median - $ended" | bc -l)") / $(printf %.3f "$(echo "$last - $ended" | bc -l)") s |
REPORT
