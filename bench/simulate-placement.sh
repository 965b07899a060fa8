#!/usr/bin/env bash
# Placement of shares compared (issue 10 item 7): best fit (the default) against most free first
# (the default before it), both in one `gpulane simulate` run per load, on the alibaba trace (its
# pods ask for fractions of a GPU) read in place from TRACES_DIR (default ../shared/traces); a
# missing trace is reported and skipped. 8 GPUs of 80 GiB, policy default, time limits twice the
# runtime, offered load 0.7 and 0.9. Prints Markdown: per load the exact command and one row per
# placement, with ratios against mostfree measured in the same run.
#
#   bench/simulate-placement.sh [TRACES_DIR] > table.md
set -euo pipefail
cd "$(dirname "$0")/.."
traces=${1:-../shared/traces}
gpulane=${GPULANE:-build/gpulane}
file=$traces/alibaba-gpu-v2023/openb_pod_list_default.csv
if [[ ! -e $file ]]; then
  echo "_alibaba: $file is not here; skipped_"
  exit 0
fi
for load in 0.7 0.9; do
  cmd=("$gpulane" simulate "$file" --format alibaba --gpus 8 --load "$load" --time-limit-from factor:2 --policy default
       --placement mostfree,bestfit --json)
  echo "#### alibaba, load $load"
  echo
  echo "\`${cmd[*]}\`"
  echo
  "${cmd[@]}" | python3 bench/simulate_placement_table.py
done
