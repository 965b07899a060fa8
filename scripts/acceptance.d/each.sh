# shellcheck shell=bash
# Sweep section of scripts/gpu-acceptance.sh (sourced; uses its helpers and $GL, $WORK, $ART, $ROOT):
#   each  `gpulane run --each FILE -g 1` over 4 PyTorch jobs (1 GiB, 1 s of matmuls each) and one
#         line that fails: every job ran on a leased GPU it saw as its only device (its UUID is the
#         GPU's), no two at once on one GPU, the failing line is named, exit 15 -> $OUT/each.txt
# Time: about 30 s on 1 x H200 (the jobs run one after another on one GPU).

sec_each() {
  section "gpulane run --each: a sweep of PyTorch jobs on free GPUs"
  [ -n "$GL" ] || { skip "no gpulane binary"; return; }
  unset CUDA_VISIBLE_DEVICES CUDA_DEVICE_ORDER
  local d=$WORK/each
  rm -rf "$d"; mkdir -p "$d" && mkdir -m 1777 "$d/leases"
  local i
  : >"$d/commands.txt"
  for i in 1 2 3 4; do echo "python3 $ROOT/scripts/acceptance/torch_job.py 1 --seconds 1 --log $d/jobs.log" >>"$d/commands.txt"; done
  echo "sh -c 'exit 3'" >>"$d/commands.txt"
  echo "\$ gpulane run --each commands.txt -g 1   # 4 PyTorch jobs and one line that exits 3"
  local t0=$SECONDS
  local env=(GPULANE_LEASE_DIR="$d/leases")
  [ "$DRY" -eq 1 ] && env+=(PYTHONPATH="$ROOT/scripts/acceptance-selftest${PYTHONPATH:+:$PYTHONPATH}")
  env "${env[@]}" timeout -k 5 240 "$GL" run --each "$d/commands.txt" -g 1 >"$d/out" 2>"$d/err"
  local rc=$?
  { cat "$d/commands.txt"; echo "--- stderr"; cat "$d/err"; echo "--- exit $rc after $((SECONDS - t0)) s"; } >"$ART/each.txt"
  tail -8 "$d/err"
  [ "$rc" -eq 15 ] && pass "run --each exited 15 (a line failed)" || fail "run --each exit $rc, not 15"
  grep -q "line 5 failed: exit code 3" "$d/err" && pass "the failing line is named with its status (line 5, exit code 3)" \
    || fail "the failing line's status is not named"
  python3 - "$d/jobs.log" <<'PY' | report_lines
import json, sys
try:
    rows = [json.loads(l) for l in open(sys.argv[1])]
except OSError:
    rows = []
starts = [r for r in rows if r["event"] == "start"]
ends = {r["pid"]: r for r in rows if r["event"] == "end"}
print(("PASS" if len(starts) == 4 and len(ends) == 4 else "FAIL") + f" 4 PyTorch lines ran to their end ({len(starts)} started, {len(ends)} ended)")
ok = all(s["device_count"] == 1 and s["uuid"] in (s.get("gpulane_uuids") or "") for s in starts)
print(("PASS" if ok else "FAIL") + " each saw one device, the GPU its lease named (" + ", ".join(sorted({s['uuid'][:12] for s in starts})) + ")")
spans = sorted((s["t"], ends[s["pid"]]["t"], s["uuid"]) for s in starts if s["pid"] in ends)
overlap = any(a[2] == b[2] and b[0] < a[1] for a, b in zip(spans, spans[1:]))
print(("FAIL" if overlap else "PASS") + " no two jobs on one GPU at once")
PY
}

SECTIONS+=(each)
