# shellcheck shell=bash
# Device isolation section of scripts/gpu-acceptance.sh (sourced; uses its helpers and $GL, $WORK,
# $ART, $DRY, $ROOT; docs/security.md "Device isolation"):
#   isolate  inside `gpulane run -g 1` (and `--gpus LAST`, whose minor number is not 0 where there
#            are 2+ GPUs) `nvidia-smi -L`, pynvml's nvmlDeviceGetCount() and torch.cuda.device_count()
#            show exactly the job's GPU (its UUID); inside `-g 0` none; outside all of them still;
#            with `[run] isolate = "off"` the job sees every GPU (the control); then
#            GPULANE_ISOLATE_TIMING=1 gpulane run -g 1 -- true (x3): the split of the start into its
#            steps and the namespace's teardown -> $OUT/isolate_timing.txt; then
#            bench/isolate_cost.sh -n 30: the start-up cost of isolation, with and without the
#            namespace holder, and the split's medians -> $OUT/isolate.txt, $OUT/isolate_cost.md
# Needs root (jobs of other users are advice-only). Dry run: no nvidia-smi, PyTorch or driver, so
# the jobs look at a device tree the section makes (GPULANE_DEV_ROOT, GPULANE_PROC_DRIVER_ROOT) and
# the cost is measured on the fake NVML. Time: about 40 s on 2 x H200.

# What a job sees, one "key value" line each: uuids (GPULANE_GPU_UUIDS), smi_count and smi_uuid
# lines (nvidia-smi -L), pynvml (nvmlDeviceGetCount(), or "error ..."), torch (device_count()).
ISOLATE_LOOK='echo "uuids ${GPULANE_GPU_UUIDS:-}"
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi -L >"$0.smi" 2>&1; echo "smi_exit $?"
  echo "smi_count $(grep -c "^GPU " "$0.smi")"
  sed -n "s/^GPU .*(UUID: \(GPU-[^)]*\)).*/smi_uuid \1/p" "$0.smi"
  grep -q "No devices" "$0.smi" && echo "smi_none yes"
fi
python3 -c "
try:
    import pynvml
except ImportError:
    print(\"pynvml missing\"); raise SystemExit
try:
    pynvml.nvmlInit(); print(\"pynvml\", pynvml.nvmlDeviceGetCount())
except pynvml.NVMLError as e:
    print(\"pynvml error\", e)
" 2>&1
python3 -c "import torch; print(\"torch\", torch.cuda.device_count())" 2>/dev/null || echo "torch missing"'

# isolate_job TAG GPULANE_RUN_ARGS...: runs `gpulane run ARGS -- sh -c "$ISOLATE_LOOK"`, its output
# in $WORK/isolate.TAG.
isolate_job() {
  local tag=$1
  shift
  echo "\$ gpulane run $* -- sh -c '<nvidia-smi -L; pynvml nvmlDeviceGetCount(); torch.cuda.device_count()>'"
  timeout -k 5 120 "$GL" run "$@" -- sh -c "$ISOLATE_LOOK" "$WORK/isolate.$tag" >"$WORK/isolate.$tag" 2>"$WORK/isolate.$tag.err"
  local rc=$?
  sed 's/^/    /' "$WORK/isolate.$tag"
  [ -s "$WORK/isolate.$tag.err" ] && sed 's/^/    stderr: /' "$WORK/isolate.$tag.err"
  echo "    (exit $rc)"
  { echo "--- gpulane run $*  (exit $rc)"; cat "$WORK/isolate.$tag" "$WORK/isolate.$tag.err"; } >>"$ART/isolate.txt"
}

# isolate_check TAG EXPECT: PASS/FAIL lines for what job TAG saw; EXPECT is "own" (exactly its
# GPU), "none" (no GPU) or "all:N" (every one of N GPUs: the control).
isolate_check() {
  python3 - "$WORK/isolate.$1" "$2" "$1" <<'PY' | report_lines
import sys
lines = [l.split(" ", 1) + [""] for l in open(sys.argv[1]).read().splitlines() if l]
seen = {}
for key, value, *_ in lines:
    seen.setdefault(key, []).append(value.strip())
expect, tag = sys.argv[2], sys.argv[3]
uuids = [u for u in (seen.get("uuids", [""])[0]).split(",") if u]
want = {"own": len(uuids), "none": 0}.get(expect, int(expect.split(":")[1]) if expect.startswith("all:") else -1)
what = {"own": f"exactly its GPU ({','.join(u[:12] for u in uuids)})", "none": "no GPU"}.get(expect, f"all {want} GPUs")
if "smi_count" in seen:
    n = int(seen["smi_count"][0])
    ok = n == want and (expect != "own" or sorted(seen.get("smi_uuid", [])) == sorted(uuids))
    print(("PASS" if ok else "FAIL") + f" [{tag}] nvidia-smi -L inside shows {what}: {n} GPU(s) {seen.get('smi_uuid', [])}"
          + (" ('No devices found')" if "smi_none" in seen else ""))
else:
    print("SKIP [%s] nvidia-smi -L: no nvidia-smi" % tag)
p = seen.get("pynvml", ["missing"])[0]
if p == "missing":
    print("SKIP [%s] pynvml: not installed" % tag)
elif p.startswith("error"):
    print(("PASS" if want == 0 else "FAIL") + f" [{tag}] pynvml inside: {p} (0 GPUs)")
else:
    print(("PASS" if int(p) == want else "FAIL") + f" [{tag}] pynvml nvmlDeviceGetCount() inside is {p}, {what}")
t = seen.get("torch", ["missing"])[0]
if t == "missing":
    print("SKIP [%s] torch: not importable" % tag)
else:
    # CUDA_VISIBLE_DEVICES also narrows torch's count; with isolation off it is the job's own.
    want_torch = len(uuids) if expect.startswith("all:") else want
    print(("PASS" if int(t) == want_torch else "FAIL") + f" [{tag}] torch.cuda.device_count() inside is {t} (want {want_torch})")
PY
}

# The dry run: the section's own device tree, looked at from inside jobs.
isolate_dry() {
  local tree=$WORK/isolate-tree
  rm -rf "$tree"
  mkdir -p "$tree/dev/nvidia-caps" "$tree/proc/nvidia/gpus"
  local minors
  minors=$(pyq "$FAKE_NVML_STATE" '" ".join(str(g["minor"]) for g in d["devices"])')
  for m in $minors; do echo "node $m" >"$tree/dev/nvidia$m"; done
  echo ctl >"$tree/dev/nvidiactl"
  pyq "$FAKE_NVML_STATE" '"\n".join(g["pci_bus_id"][4:].lower() for g in d["devices"])' | while read -r bus; do mkdir -p "$tree/proc/nvidia/gpus/$bus"; done
  echo "ModifyDeviceFiles: 1" >"$tree/proc/nvidia/params"
  export GPULANE_DEV_ROOT=$tree/dev GPULANE_PROC_DRIVER_ROOT=$tree/proc
  local look='cd "$0"; for f in nvidia*; do [ -d "$f" ] || printf "%s=%s;" "$f" "$(cat "$f")"; done; echo; ls "$1/nvidia/gpus" | tr "\n" " "; echo'
  local last=$((NGPU > 0 ? NGPU - 1 : 0))
  run_cmd -t 60 "$GL" run --gpus "$last" -- sh -c "$look" "$tree/dev" "$tree/proc"
  cp "$WORK/stdout" "$ART/isolate.txt"
  local own_minor
  own_minor=$(pyq "$FAKE_NVML_STATE" "sorted(d['devices'], key=lambda g: g['pci_bus_id'])[$last]['minor']")
  local visible
  visible=$(head -1 "$WORK/stdout" | tr ';' '\n' | grep -c "=node")
  { [ "$RC" -eq 0 ] && [ "$visible" -eq 1 ] && head -1 "$WORK/stdout" | grep -q "nvidia$own_minor=node $own_minor"; } \
    && pass "(simulated) a job on GPU $last sees only its node nvidia$own_minor; the others read as /dev/null" \
    || fail "(simulated) the job on GPU $last saw $visible readable GPU node(s), not only nvidia$own_minor (exit $RC)"
  [ "$(sed -n 2p "$WORK/stdout" | wc -w)" -eq 1 ] && pass "(simulated) /proc/driver/nvidia/gpus holds only its GPU's entry" \
    || fail "(simulated) /proc/driver/nvidia/gpus inside: $(sed -n 2p "$WORK/stdout")"
  run_cmd -t 60 "$GL" run -g 0 -- sh -c "$look" "$tree/dev" "$tree/proc"
  [ "$RC" -eq 0 ] && ! head -1 "$WORK/stdout" | grep -q "=node" && pass "(simulated) a -g 0 job sees no GPU node" \
    || fail "(simulated) a -g 0 job saw GPU nodes: $(head -1 "$WORK/stdout")"
  [ "$(ls "$tree/proc/nvidia/gpus" | wc -l)" -eq "$NGPU" ] && grep -q "node" "$tree/dev/nvidia$own_minor" \
    && pass "(simulated) outside, every node and entry is as it was" || fail "(simulated) the tree changed outside"
  unset GPULANE_DEV_ROOT GPULANE_PROC_DRIVER_ROOT
}

sec_isolate() {
  section "device isolation: inside a job only its GPUs exist"
  [ -n "$GL" ] || { skip "no gpulane binary"; return; }
  if [ "$(id -u)" -ne 0 ]; then
    skip "not root: jobs started by other users are advice-only (docs/security.md)"
    return
  fi
  unset CUDA_VISIBLE_DEVICES CUDA_DEVICE_ORDER
  export GPULANE_LEASE_DIR=$WORK/leases-isolate
  rm -rf "$GPULANE_LEASE_DIR"; mkdir -m 1777 "$GPULANE_LEASE_DIR"
  : >"$ART/isolate.txt"
  local mounts_before
  mounts_before=$(grep -c nvidia /proc/self/mountinfo)
  gl status --json >"$WORK/isolate_status.json" 2>/dev/null
  NGPU=$(pyq "$WORK/isolate_status.json" 'len(d["gpus"])' 2>/dev/null || echo 0)
  run_cmd -t 30 "$GL" doctor
  grep "isolation" "$WORK/stdout" | grep -q "^ok" && pass "doctor: isolation works here ($(grep isolation "$WORK/stdout" | cut -c1-80)...)" \
    || fail "doctor's isolation line: $(grep isolation "$WORK/stdout")"
  if [ "$DRY" -eq 1 ]; then
    isolate_dry
  else
    isolate_job one -g 1
    isolate_check one own
    if [ "$NGPU" -ge 2 ]; then
      isolate_job last --gpus "$((NGPU - 1))"
      isolate_check last own
    fi
    isolate_job none -g 0
    isolate_check none none
    printf '[run]\nisolate = "off"\n' >"$WORK/isolate-off.toml"
    GPULANE_CONFIG=$WORK/isolate-off.toml isolate_job off -g 1
    isolate_check off "all:$NGPU"
    run_cmd -t 60 nvidia-smi -L
    [ "$(grep -c '^GPU ' "$WORK/stdout")" -eq "$NGPU" ] && pass "outside the jobs nvidia-smi -L still lists all $NGPU GPUs" \
      || fail "outside the jobs nvidia-smi -L lists $(grep -c '^GPU ' "$WORK/stdout") GPUs, not $NGPU"
    [ "$(grep -c nvidia /proc/self/mountinfo)" -eq "$mounts_before" ] && pass "no mount of the jobs' shows outside" \
      || fail "mounts over nvidia paths appeared outside: $(grep nvidia /proc/self/mountinfo | head -3)"
  fi
  # The split of one isolated start (GPULANE_ISOLATE_TIMING=1, exec/isolation_run.h): per-step
  # microseconds and the holder's teardown line, three runs, into isolate_timing.txt.
  : >"$ART/isolate_timing.txt"
  local run tree=()
  [ "$DRY" -eq 1 ] && tree=(GPULANE_DEV_ROOT="$WORK/isolate-tree/dev" GPULANE_PROC_DRIVER_ROOT="$WORK/isolate-tree/proc")
  for run in 1 2 3; do
    echo "run $run" >>"$ART/isolate_timing.txt"
    env "${tree[@]}" GPULANE_ISOLATE_TIMING=1 timeout -k 5 60 "$GL" run -g 1 -- true >/dev/null 2>>"$ART/isolate_timing.txt"
  done
  echo "\$ GPULANE_ISOLATE_TIMING=1 gpulane run -g 1 -- true   (x3)"
  sed 's/^/    /' "$ART/isolate_timing.txt"
  grep -q "holder [0-9]* us (started)" "$ART/isolate_timing.txt" \
    && pass "the namespace holder starts, so the kernel frees each job's namespace off its path" \
    || fail "no namespace holder started: $(head -1 "$ART/isolate_timing.txt")"
  local fake=()
  [ "$DRY" -eq 1 ] && fake=(--fake)
  echo "\$ bench/isolate_cost.sh -n 30 ${fake[*]}"
  if timeout -k 5 240 bash "$ROOT/bench/isolate_cost.sh" -n 30 "${fake[@]}" >"$ART/isolate_cost.md" 2>"$WORK/isolate_cost.err"; then
    sed 's/^/    /' "$ART/isolate_cost.md"
    python3 - "$ART/isolate_cost.md" <<'PY' | report_lines
import sys
for line in open(sys.argv[1]):
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if len(cells) >= 4 and cells[0].startswith("`gpulane run"):
        added = float(cells[3])
        before = f"; {float(cells[5]):+.2f} ms without the namespace holder, as before it" if len(cells) >= 6 else ""
        print(("PASS" if added <= 2.0 else "FAIL") + f" isolation adds {added:+.2f} ms (median) to {cells[0]} (target <= 2 ms{before})")
PY
  else
    fail "bench/isolate_cost.sh: $(tail -1 "$WORK/isolate_cost.err")"
  fi
  unset GPULANE_LEASE_DIR
}

SECTIONS+=(isolate)
