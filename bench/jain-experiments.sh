#!/usr/bin/env bash
# The experiments of docs/simulate-results.md, "What was tried for Jain's index": other orders of
# `default`'s waiting line, tried in the simulator only. bench/jain-experiments.patch (against commit
# 95b88d6; not gpulane's code: src/ is unchanged) lets GPULANE_EXP_* variables pick the order
# (the patch's comment defines each). This script builds the patched gpulane in a temporary copy of
# that commit (git archive; the gpulane target only: 10-20 min on 2 cores, once), then prints per variant, for each
# trace and load, default's figures and what it misses of issue 10's goal against fifo and easy.
#
#   bench/jain-experiments.sh [TRACES_DIR] > /tmp/jain.md
#   LOADS="0.6 0.7 0.8 0.9 0.95" bench/jain-experiments.sh ...   # other loads (default 0.7 0.9)
#   GPULANE=path/to/patched/gpulane ...                           # skip the build
#   VARIANTS="g3 gu3" ...                                         # some of the variants below
set -euo pipefail
cd "$(dirname "$0")/.."
traces=$(realpath "${1:-../shared/traces}")
loads=${LOADS:-0.7 0.9}
exp_dir=${EXP_DIR:-/tmp/gpulane-jain-exp}
declare -A env_of=(
  [default]=""
  [sld]="GPULANE_EXP_PRIORITY=sld GPULANE_EXP_K=1"
  [pure]="GPULANE_EXP_PRIORITY=pure"
  [lin]="GPULANE_EXP_PRIORITY=lin"
  [gu3]="GPULANE_EXP_PRIORITY=gu GPULANE_EXP_W=3"
  [g1]="GPULANE_EXP_PRIORITY=g GPULANE_EXP_W=1 GPULANE_EXP_K=1"
  [g3]="GPULANE_EXP_PRIORITY=g GPULANE_EXP_W=3 GPULANE_EXP_K=1"
  [gx1h]="GPULANE_EXP_PRIORITY=gx GPULANE_EXP_W=3 GPULANE_EXP_K=1 GPULANE_EXP_X=3600"
  [gc3]="GPULANE_EXP_PRIORITY=gc GPULANE_EXP_W=3 GPULANE_EXP_K=1"
  [admit16]="GPULANE_EXP_PRIORITY=base GPULANE_EXP_ADMIT=16"
)
variants=${VARIANTS:-default sld pure lin gu3 g1 g3 gx1h gc3 admit16}
if [[ -z ${GPULANE:-} ]]; then
  if [[ ! -x $exp_dir/build/gpulane ]]; then
    rm -rf "$exp_dir" && mkdir -p "$exp_dir"
    git archive 95b88d6 | tar -x -C "$exp_dir"
    (cd "$exp_dir" && git apply "$OLDPWD/bench/jain-experiments.patch")
    cmake -S "$exp_dir" -B "$exp_dir/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >&2
    cmake --build "$exp_dir/build" --target gpulane -j1 >&2
  fi
  GPULANE=$exp_dir/build/gpulane
fi
declare -a names=(msr-itp philly alibaba)
declare -A path=([msr-itp]=msr-itp [philly]=dirlab-philly-15k/philly_data_training.csv
                 [alibaba]=alibaba-gpu-v2023/openb_pod_list_default.csv)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for name in "${names[@]}"; do
  for load in $loads; do
    "$GPULANE" simulate "$traces/${path[$name]}" --format "$name" --gpus 8 --load "$load" --time-limit-from factor:2 \
      --policy fifo,easy --json > "$out/base.$name.$load.json"
  done
done
echo "Each: \`VARS $GPULANE simulate TRACES/<trace> --format <trace> --gpus 8 --load <load> --time-limit-from factor:2 --policy default --json\`"
echo "(fifo and easy from the same binary, which the variables do not change); misses: what default loses of the goal"
for v in $variants; do
  echo
  echo "#### $v: \`${env_of[$v]:-no variable: the default as it is}\`"
  echo
  echo "| trace, load | wait mean | p99 | bsld mean | util (easy) | Jain (fifo) | misses |"
  echo "|---|---|---|---|---|---|---|"
  for name in "${names[@]}"; do
    for load in $loads; do
      env ${env_of[$v]} "$GPULANE" simulate "$traces/${path[$name]}" --format "$name" --gpus 8 --load "$load" \
        --time-limit-from factor:2 --policy default --json > "$out/$v.$name.$load.json"
      python3 - "$out/base.$name.$load.json" "$out/$v.$name.$load.json" "$name $load" <<'PY'
import json, sys
base = {p["policy"]: p for p in json.load(open(sys.argv[1]))["policies"]}
m = json.load(open(sys.argv[2]))["policies"][0]
fifo, easy = base["fifo"], base["easy"]
miss = [name for key, name in (("wait_mean_s", "mean"), ("wait_p99_s", "p99"), ("bounded_slowdown_mean", "bsld"))
        if not (m[key] < fifo[key] and m[key] < easy[key])]
if m["utilisation"] < max(fifo["utilisation"], easy["utilisation"]): miss.append("util")
if m["jain_slowdown"] < fifo["jain_slowdown"]: miss.append("Jain")
print("| %s | %.1f d | %.1f d | %.0f | %.1f %% (%.1f %%) | %.4f (%.4f) | %s |" % (
    sys.argv[3], m["wait_mean_s"] / 86400, m["wait_p99_s"] / 86400, m["bounded_slowdown_mean"],
    100 * m["utilisation"], 100 * easy["utilisation"], m["jain_slowdown"], fifo["jain_slowdown"],
    ", ".join(miss) if miss else "none"))
PY
    done
  done
done
