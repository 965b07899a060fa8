#!/usr/bin/env bash
# Tests scripts/gpu-acceptance.sh itself, here, without a GPU: its dry run, and its real-GPU path
# with stand-ins for nvidia-smi and PyTorch (scripts/acceptance-selftest/) over the fake NVML,
# including cases that must FAIL, and the `gpulane run` checker (scripts/acceptance/check_run.py)
# on made-up logs. Needs build/fake_nvml (cmake --build build) and the fixture in tests/fixtures.
# Run after changing gpu-acceptance.sh, scripts/acceptance.d/, scripts/acceptance/ or check_status_vs_smi.py.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
ROOT=$PWD
lib=$ROOT/build/fake_nvml/current/libnvidia-ml.so.1
fixture=$ROOT/tests/fixtures/h200x2-2026-11-30/nvml_snapshot.json
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
state 1; expect 0 "pick -n 2 on a 1-GPU machine fails with exit 2" "dry run, 1 GPU" -- PATH="/usr/bin:/bin" GPULANE_NVML_LIBRARY="$lib" FAKE_NVML_STATE="$tmp/state.json"
state 2; expect 0 "PASS: gpulane status --json matches nvidia-smi" "real path, 2 GPUs" -- "${real[@]}"
state 1; expect 0 "RESULT: PASS" "real path, 1 GPU" -- "${real[@]}"
state 2; expect 1 "FAIL: gpulane status --json matches nvidia-smi" "real path, memory.used off by 100 MiB must fail" -- "${real[@]}" SMI_SKEW_MIB=100
state 2; expect 1 "FAIL: torch on GPU1: pid [0-9]+ appears" "real path, process under another pid must fail" -- "${real[@]}" FAKE_TORCH_PID_OFFSET=3000000
# The `gpulane run` sections (scripts/acceptance.d/run.sh) with planted faults.
state 2; expect 1 "FAIL: each job's GPU UUID \(torch\) equals its GPULANE_GPU_UUIDS" "run: CUDA numbering not in PCI order must fail" -- "${real[@]}" FAKE_TORCH_REVERSE_ORDER=1
state 1; expect 1 "FAIL: nvidia-smi lists no process of the job's tree" "run: a killed leftover still listed must fail" -- "${real[@]}" RUN_FAKE_DRIVER=0

# check_run.py on made-up logs: overlapping whole-GPU jobs, too much declared memory at once.
checker() {  # checker NAME WANT_REGEX MODE ARGS... (reads the log from $tmp/run.log)
  local name=$1 want=$2
  shift 2
  if python3 scripts/acceptance/check_run.py "$@" --log "$tmp/run.log" --status "$tmp/st.json" >"$tmp/check.out" 2>&1 &&
    grep -Eq "$want" "$tmp/check.out"; then
    echo "ok    $name"
  else
    echo "FAIL  $name: output lacks /$want/"
    sed 's/^/        /' "$tmp/check.out"
    failures=$((failures + 1))
  fi
}
python3 - "$tmp" <<'PY'
import json, sys
tmp = sys.argv[1]
u0, u1 = "GPU-00000000-0000-0000-0000-000000000000", "GPU-11111111-1111-1111-1111-111111111111"
json.dump({"gpus": [{"index": 0, "uuid": u0, "memory_total_bytes": 150754820096},
                    {"index": 1, "uuid": u1, "memory_total_bytes": 150754820096}]}, open(tmp + "/st.json", "w"))
def job(i, uuid, t0, t1, mem=None):
    s = {"event": "start", "t": t0, "job": "r%d" % i, "pid": i, "uuid": uuid, "cvd": "0", "device_count": 1,
         "gpulane_uuids": uuid, "mem_bytes": mem, "gib": 1, "torch": "x"}
    e = {"event": "end", "t": t1, "job": "r%d" % i, "pid": i, "uuid": uuid, "matmuls": 1, "tflops": 1}
    return json.dumps(s) + "\n" + json.dumps(e) + "\n"
open(tmp + "/excl.log", "w").write(job(1, u0, 0, 5) + job(2, u1, 0, 5) + job(3, u0, 4.5, 9) + job(4, u1, 5, 9))
open(tmp + "/excl_ok.log", "w").write(job(1, u0, 0, 5) + job(2, u1, 0, 5) + job(3, u0, 5, 9) + job(4, u1, 5.1, 9))
m = str(30 << 30)
open(tmp + "/shared.log", "w").write("".join(job(i, u0, i * 0.1, 8, m) for i in range(1, 6)) + job(6, u1, 0, 8, m))
PY
cp "$tmp/excl.log" "$tmp/run.log"
checker "check_run: overlapping whole-GPU jobs fail" "^FAIL no two jobs overlap in time on the same GPU; 1 overlapping" exclusive --rcs "0 0 0 0"
cp "$tmp/excl_ok.log" "$tmp/run.log"
checker "check_run: back-to-back whole-GPU jobs pass" "^PASS no two jobs overlap in time on the same GPU" exclusive --rcs "0 0 0 0"
cp "$tmp/shared.log" "$tmp/run.log"
checker "check_run: 5 x 30 GiB at once on a 140 GiB GPU fails" "^FAIL declared memory on each GPU at any moment <= its total" shared --rcs "0 0 0 0 0 0" --mem-bytes $((30 << 30))

echo "$failures failure(s)"
[ "$failures" -eq 0 ]
