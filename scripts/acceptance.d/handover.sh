# shellcheck shell=bash
# Hand-over section of scripts/gpu-acceptance.sh (sourced; uses its helpers and $GL, $WORK, $ART, $ROOT):
#   handover  bench/handover.py: 11 PyTorch jobs (1 GiB, 0.5 s of matmuls each) take turns on GPU 0,
#             through `gpulane run` and through the queue (a per-user daemon); for each pair the
#             hand-over (one job's last process gone -> the next job's exec), the job's own teardown
#             (its interpreter and CUDA context), and for the queue the lease grant in between;
#             then the same with `sleep 0.2` jobs (no CUDA). Target: hand-over <= 10 ms median in
#             both modes -> $OUT/handover.md, handover_cuda.json, handover_sleep.json
# Time: about a minute on 1 x H200.

sec_handover() {
  section "hand-over between jobs on one GPU: gpulane run and the queue, PyTorch and sleep jobs"
  [ -n "$GL" ] || { skip "no gpulane binary"; return; }
  unset CUDA_VISIBLE_DEVICES CUDA_DEVICE_ORDER
  local d=$WORK/handover
  rm -rf "$d"; mkdir -p "$d" && mkdir -m 1777 "$d/leases"
  local job="python3 $ROOT/scripts/acceptance/torch_job.py 1 --seconds 0.5"
  local env=(GPULANE_LEASE_DIR="$d/leases")
  [ "$DRY" -eq 1 ] && env+=(PYTHONPATH="$ROOT/scripts/acceptance-selftest${PYTHONPATH:+:$PYTHONPATH}")
  : >"$ART/handover.md"
  local kind rc
  for kind in cuda sleep; do
    local cmd=$job
    [ "$kind" = sleep ] && cmd="sleep 0.2"
    echo "\$ bench/handover.py --jobs 11 --job '$cmd'"
    env "${env[@]}" timeout -k 5 200 python3 "$ROOT/bench/handover.py" --gpulane "$GL" --work "$d/$kind" --jobs 11 \
      --job "$cmd" >"$ART/handover_$kind.json" 2>"$d/$kind.err"
    rc=$?
    { echo "### jobs: \`$cmd\`"; echo; python3 - "$ART/handover_$kind.json" <<'PY'; echo; } >>"$ART/handover.md"
import json, sys
d = json.load(open(sys.argv[1]))
fmt = lambda x: "–" if x is None else f"{x:.1f}"
print("| mode | pairs | hand-over median (ms) | teardown median (ms) | end → lease granted | granted → exec |")
print("|---|---|---|---|---|---|")
for mode, r in d["modes"].items():
    m = r["median"]
    print(f"| {mode} | {len(r['samples'])} | {fmt(m.get('handover_ms'))} | {fmt(m.get('teardown_ms'))} | "
          f"{fmt(m.get('end_to_granted_ms'))} | {fmt(m.get('granted_to_exec_ms'))} |")
for mode, r in d["modes"].items():
    for n in r["notes"]:
        print(f"\nnote ({mode}): {n}")
PY
    if [ "$rc" -ne 0 ]; then
      fail "bench/handover.py with '$cmd' (exit $rc): $(tail -2 "$d/$kind.err" | tr '\n' ' ')"
      continue
    fi
    python3 - "$ART/handover_$kind.json" "$kind" "${FAKE_NVML_STATE:+sim}" <<'PY' | report_lines
import json, sys
d = json.load(open(sys.argv[1]))
kind, sim = sys.argv[2], sys.argv[3] == "sim"
for mode, r in d["modes"].items():
    m = r["median"].get("handover_ms")
    if m is None:
        print(f"FAIL {mode}: no hand-over measured ({'; '.join(r['notes'][-1:])})")
        continue
    ok = m <= 10
    verdict = ("INFO (fake NVML, not judged: %s)" % ("met" if ok else "missed")) if sim else ("PASS" if ok else "FAIL")
    tear = r["median"].get("teardown_ms")
    print(f"{verdict} {kind} jobs through {mode}: hand-over median {m:.1f} ms over {len(r['samples'])} pairs "
          f"(target <= 10 ms){'' if tear is None else f'; the job’s own teardown {tear:.0f} ms'}")
PY
  done
  cat "$ART/handover.md"
}

SECTIONS+=(handover)
