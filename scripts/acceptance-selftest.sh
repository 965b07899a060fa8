#!/usr/bin/env bash
# Tests scripts/gpu-acceptance.sh itself, here, without a GPU: its dry run, and its real-GPU path
# with stand-ins for nvidia-smi and PyTorch (scripts/acceptance-selftest/) over the fake NVML,
# including cases that must FAIL. Needs build/fake_nvml (cmake --build build) and the fixture in
# ../shared/fixtures. Run after changing gpu-acceptance.sh or check_status_vs_smi.py.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
ROOT=$PWD
lib=$ROOT/build/fake_nvml/current/libnvidia-ml.so.1
fixture=""
for f in "$ROOT/shared/fixtures/h200x2-2026-11-30/nvml_snapshot.json" \
  "$ROOT/../shared/fixtures/h200x2-2026-11-30/nvml_snapshot.json"; do
  [ -f "$f" ] && { fixture=$f; break; }
done
[ -f "$lib" ] && [ -n "$fixture" ] || { echo "need $lib and the h200x2 fixture" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# state NGPUS: an idle copy of the fixture with NGPUS devices, in $tmp/state.json
state() {
  python3 - "$fixture" "$tmp/state.json" "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["devices"] = d["devices"][: int(sys.argv[3])]
for dev in d["devices"]:
    dev["processes"] = []
json.dump(d, open(sys.argv[2], "w"))
PY
}

failures=0
# expect WANT_RC WANT_GREP NAME -- ENV... : runs gpu-acceptance.sh with ENV, checks its exit status
# and that its log contains WANT_GREP (an extended regex).
expect() {
  local want_rc=$1 want=$2 name=$3
  shift 4
  env "$@" OUT="$tmp/out" bash scripts/gpu-acceptance.sh -n 3 >"$tmp/log" 2>&1
  local rc=$?
  if [ "$rc" -eq "$want_rc" ] && grep -Eq "$want" "$tmp/log"; then
    echo "ok    $name"
  else
    echo "FAIL  $name: exit $rc (want $want_rc), log $(grep -Eq "$want" "$tmp/log" && echo has || echo lacks) /$want/"
    grep -E "^(FAIL|SKIP)" "$tmp/log" | sed 's/^/        /'
    failures=$((failures + 1))
  fi
  rm -rf "$tmp/out"
}

real=(PATH="$ROOT/scripts/acceptance-selftest:$PATH" PYTHONPATH="$ROOT/scripts/acceptance-selftest"
      ACCEPTANCE_SELFTEST_KEEP_NVML=1 GPULANE_NVML_LIBRARY="$lib" FAKE_NVML_STATE="$tmp/state.json")

state 2; expect 0 "RESULT: PASS" "dry run, 2 GPUs" -- PATH="/usr/bin:/bin" GPULANE_NVML_LIBRARY="$lib" FAKE_NVML_STATE="$tmp/state.json"
state 1; expect 0 "pick -n 2 on a 1-GPU machine fails with exit 5" "dry run, 1 GPU" -- PATH="/usr/bin:/bin" GPULANE_NVML_LIBRARY="$lib" FAKE_NVML_STATE="$tmp/state.json"
state 2; expect 0 "PASS: gpulane status --json matches nvidia-smi" "real path, 2 GPUs" -- "${real[@]}"
state 1; expect 0 "RESULT: PASS" "real path, 1 GPU" -- "${real[@]}"
state 2; expect 1 "FAIL: gpulane status --json matches nvidia-smi" "real path, memory.used off by 100 MiB must fail" -- "${real[@]}" SMI_SKEW_MIB=100
state 2; expect 1 "FAIL: torch on GPU1: pid [0-9]+ appears" "real path, process under another pid must fail" -- "${real[@]}" FAKE_TORCH_PID_OFFSET=3000000
echo "$failures failure(s)"
[ "$failures" -eq 0 ]
