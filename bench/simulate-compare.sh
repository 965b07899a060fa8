#!/usr/bin/env bash
# The policy comparison of docs/simulate-results.md: each public trace in ../shared/traces (read in
# place; a missing one is reported and skipped) on 8 GPUs at offered load 0.7 and 0.9, time limits
# twice the runtime (factor:2), users as in the trace (philly) or 8 by a hash (msr-itp, alibaba).
# Prints Markdown: per trace and load, one row per policy, with the exact command.
#
#   bench/simulate-compare.sh [TRACES_DIR] > table.md
set -euo pipefail
cd "$(dirname "$0")/.."
traces=${1:-../shared/traces}
gpulane=${GPULANE:-build/gpulane}
limits=${TIME_LIMIT_FROM:-factor:2}
declare -a names=(msr-itp philly alibaba)
declare -A path=([msr-itp]=msr-itp [philly]=dirlab-philly-15k/philly_data_training.csv
                 [alibaba]=alibaba-gpu-v2023/openb_pod_list_default.csv)
for name in "${names[@]}"; do
  file=$traces/${path[$name]}
  if [[ ! -e $file ]]; then
    echo "_${name}: $file is not here; skipped_"
    echo
    continue
  fi
  for load in 0.7 0.9; do
    cmd=("$gpulane" simulate "$file" --format "$name" --gpus 8 --load "$load" --time-limit-from "$limits" --json)
    echo "#### $name, load $load"
    echo
    echo "\`${cmd[*]}\`"
    echo
    "${cmd[@]}" | python3 bench/simulate_table.py
  done
done
