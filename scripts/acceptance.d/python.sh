# shellcheck shell=bash
# Python package and doctor sections of scripts/gpu-acceptance.sh (sourced; uses its helpers and
# $GL, $WORK, $ART, $ROOT):
#   python  python/tests/gpu_check.py with real PyTorch: inside gpulane.lease() torch's cuda:0 is
#           the leased GPU (its UUID), CUDA initialised before lease() is refused, and (with two
#           free GPUs) lease(n=2) and worker_pool(2) -> $OUT/python.txt
#   doctor  gpulane doctor on the real driver: no FAIL line, and its driver version is nvidia-smi's
#           -> $OUT/doctor.txt
# Time: about 30 s on 1 x H200 (each check starts its own interpreter and CUDA context).

sec_python() {
  section "Python package: gpulane.lease() with real PyTorch"
  [ -n "$GL" ] || { skip "no gpulane binary"; return; }
  [ -f "$ROOT/python/tests/gpu_check.py" ] || { fail "python/tests/gpu_check.py is missing"; return; }
  unset CUDA_VISIBLE_DEVICES CUDA_DEVICE_ORDER
  local d=$WORK/python
  rm -rf "$d"; mkdir -p "$d" && mkdir -m 1777 "$d/leases"
  echo "\$ python3 python/tests/gpu_check.py"
  GPULANE_BIN=$GL GPULANE_LEASE_DIR=$d/leases timeout -k 5 300 python3 "$ROOT/python/tests/gpu_check.py" \
    >"$ART/python.txt" 2>"$d/err"
  local rc=$?
  cat "$ART/python.txt"
  sed -n 's/^\(PASS\|FAIL\|SKIP\): /\1 /p' "$ART/python.txt" | report_lines
  [ "$rc" -eq 0 ] || [ -s "$ART/python.txt" ] || fail "gpu_check.py exited $rc: $(tail -2 "$d/err" | tr '\n' ' ')"
}

sec_doctor() {
  section "gpulane doctor on the real driver"
  [ -n "$GL" ] || { skip "no gpulane binary"; return; }
  echo "\$ gpulane doctor"
  timeout -k 5 60 "$GL" doctor >"$ART/doctor.txt" 2>&1
  local rc=$?
  cat "$ART/doctor.txt"
  if grep -q '^FAIL' "$ART/doctor.txt"; then fail "doctor reported a failed check (exit $rc)"; else pass "doctor: no failed check (exit $rc)"; fi
  local smi_driver
  smi_driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)
  if [ -n "$smi_driver" ] && grep -q "^ok    nvml: driver $smi_driver," "$ART/doctor.txt"; then
    pass "doctor's driver version is nvidia-smi's ($smi_driver)"
  else
    fail "doctor's nvml line does not name nvidia-smi's driver '$smi_driver'"
  fi
}

SECTIONS+=(python doctor)
