#!/usr/bin/env bash
# GPU acceptance for gpulane: ONE command that proves gpulane on a real NVIDIA machine and
# benchmarks it. Run from the repository root with .carry/ present (scripts/make-carry.sh):
#
#   bash scripts/gpu-acceptance.sh [--dry-run] [--only SECTION[,SECTION...]] [--list] [-n BENCH_RUNS]
#
# Prints a readable log; with $OUT set it also writes $OUT/acceptance.log and the artifacts
# (status.txt, status.json, smi.csv, status_latency.md, status_latency.json, run_exclusive.log,
# run_shared.log, run_overhead.md, run_overhead.json). Every check prints PASS, FAIL or SKIP; the
# exit status is 1 if any check failed, 0 otherwise.
#
# Sections: env status pick smi process bench (below), then those of scripts/acceptance.d/*.sh,
# e.g. run.sh: the `gpulane run` checks with PyTorch jobs (run_exclusive run_shared run_leftovers)
# and its benchmark (run_bench: bench/run_overhead.sh). `--list` prints them all.
#
# --dry-run (implied when nvidia-smi is missing): runs against the fake NVML of build/fake_nvml
# and the recorded 2 x H200 fixture; steps that need nvidia-smi or PyTorch say "skipped: no
# nvidia-smi" and, where possible, exercise their checking logic on simulated data instead.
#
# Adding a section (e.g. for `gpulane run`, the daemon): define a function sec_NAME that calls
# section/pass/fail/skip/info (and run_cmd, gl, pyq), then append NAME to SECTIONS below, or put
# the function in scripts/acceptance.d/NAME.sh ending with `SECTIONS+=(NAME)`: those files are
# sourced in name order. Sections run in order; one failing does not stop the next.
#
# Time: about a minute for the sections here on 2 x H200, plus those of scripts/acceptance.d (the
# `gpulane run` ones about 1.5 min); no section starts after ACCEPTANCE_BUDGET_S (default 420) s,
# the run sections' jobs never run past ACCEPTANCE_HARD_S (default 510) s, and every command has
# its own limit, so it ends inside a 600 s device call.
# ACCEPTANCE_SELFTEST_KEEP_NVML=1 keeps GPULANE_NVML_LIBRARY/FAKE_NVML_STATE in a non-dry run: for
# testing this script's real-GPU path with a stand-in nvidia-smi (see bench/README.md).
#
# Never changes GPU settings and never resets a GPU: it only reads, and starts PyTorch processes
# (one in `process`, short jobs of a few seconds through `gpulane run` in the run sections), each
# with its own temporary lease directory, never /run/gpulane/leases.
set -uo pipefail
shopt -s lastpipe  # `checker | report_lines` must count in this shell

# This GPU machine keeps NVLink multicast off.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

# $OUT (set by the device tool) as an absolute path, before changing directory.
OUT_DIR=""
if [ -n "${OUT:-}" ]; then
  mkdir -p "$OUT" && OUT_DIR=$(cd "$OUT" && pwd) || { echo "cannot use OUT=$OUT" >&2; exit 1; }
fi

cd "$(dirname "$0")/.." || exit 1
ROOT=$PWD

SECTIONS=(env status pick smi process bench)

# ---------------------------------------------------------------- options
DRY=0
DRY_WHY=""
ONLY=""
BENCH_RUNS=30
LIST=0
TIME_BUDGET_S=${ACCEPTANCE_BUDGET_S:-420}  # no new section starts after this many seconds
while (($#)); do
  case "$1" in
    --dry-run) DRY=1; DRY_WHY="--dry-run"; shift ;;
    --only) ONLY=$2; shift 2 ;;
    -n) BENCH_RUNS=$2; shift 2 ;;
    --list) LIST=1; shift ;;
    -h | --help) sed -n '2,/^set -uo/{/^set -uo/!s/^# \{0,1\}//p}' "$0"; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done
if ! command -v nvidia-smi >/dev/null 2>&1 && [ "$DRY" -eq 0 ]; then
  DRY=1
  DRY_WHY="no nvidia-smi on this machine"
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpu-acceptance.XXXXXX")
if [ -n "$OUT_DIR" ]; then
  ART=$OUT_DIR
else
  ART=$(mktemp -d "${TMPDIR:-/tmp}/gpu-acceptance-artifacts.XXXXXX")
fi

# ---------------------------------------------------------------- reporting
N_PASS=0
N_FAIL=0
N_SKIP=0
SUMMARY=()
CURRENT=""
T0=$(date +%s)

section() {
  CURRENT=$1
  echo
  echo "==================== $1 ===================="
}
pass() { N_PASS=$((N_PASS + 1)); SUMMARY+=("PASS  [$CURRENT] $*"); echo "PASS: $*"; }
fail() { N_FAIL=$((N_FAIL + 1)); SUMMARY+=("FAIL  [$CURRENT] $*"); echo "FAIL: $*"; }
skip() { N_SKIP=$((N_SKIP + 1)); SUMMARY+=("SKIP  [$CURRENT] $*"); echo "SKIP: $*"; }
info() { echo "  .. $*"; }

# Reads "PASS text" / "FAIL text" / "SKIP text" / "INFO text" lines (from a checker) and reports them.
report_lines() {
  local verdict text
  while read -r verdict text; do
    case "$verdict" in
      PASS) pass "$text" ;;
      FAIL) fail "$text" ;;
      SKIP) skip "$text" ;;
      *) info "$text" ;;
    esac
  done
}

# run_cmd [-t SECONDS] CMD...: prints the command, runs it with a time limit, prints its stdout and
# stderr indented; sets RC, and leaves the output in $WORK/stdout and $WORK/stderr.
RC=0
run_cmd() {
  local limit=60
  if [ "$1" = "-t" ]; then limit=$2; shift 2; fi
  local shown=("${@/#"$GL"/gpulane}")
  echo "\$ ${shown[*]}"
  timeout -k 5 "$limit" "$@" >"$WORK/stdout" 2>"$WORK/stderr"
  RC=$?
  sed 's/^/    /' "$WORK/stdout"
  [ -s "$WORK/stderr" ] && sed 's/^/    stderr: /' "$WORK/stderr"
  echo "    (exit $RC)"
  [ "$RC" -ne 124 ] || echo "    (killed after ${limit}s)"
  return 0
}

# gl ARGS...: the gpulane under test, without printing.
gl() { timeout -k 5 60 "$GL" "$@"; }

# pyq FILE EXPR: evaluates a Python expression with d = the JSON document in FILE.
pyq() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"; }

# ---------------------------------------------------------------- the gpulane under test
if [ -x "$ROOT/.carry/bin/gpulane" ]; then
  GL=$ROOT/.carry/bin/gpulane
  export LD_LIBRARY_PATH="$ROOT/.carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
elif [ -x "$ROOT/build/gpulane" ]; then
  GL=$ROOT/build/gpulane
else
  GL=""
fi
export GPULANE="$GL"  # bench/status_latency.sh uses the same binary

# ---------------------------------------------------------------- NVML: real, or fake for a dry run
FAKE_BASE_STATE=""
setup_nvml() {
  if [ "$DRY" -eq 0 ]; then
    # ACCEPTANCE_SELFTEST_KEEP_NVML=1: tests this script's real-GPU path with a stand-in nvidia-smi.
    if [ -n "${GPULANE_NVML_LIBRARY:-}${FAKE_NVML_STATE:-}" ] && [ -z "${ACCEPTANCE_SELFTEST_KEEP_NVML:-}" ]; then
      echo "note: unsetting GPULANE_NVML_LIBRARY/FAKE_NVML_STATE: this run is against the real NVML"
      unset GPULANE_NVML_LIBRARY FAKE_NVML_STATE
    fi
    return
  fi
  local lib=${GPULANE_NVML_LIBRARY:-$ROOT/build/fake_nvml/current/libnvidia-ml.so.1}
  local state=${FAKE_NVML_STATE:-}
  if [ -z "$state" ]; then
    state=$ROOT/tests/fixtures/h200x2-2026-11-30/nvml_snapshot.json
  fi
  if [ ! -f "$lib" ] || [ -z "$state" ]; then
    echo "note: dry run without the fake NVML (build it with: cmake --build build; fixture in tests/fixtures)"
    return
  fi
  # The fixture recorded a foreign job on GPU 1; the base state of the dry run is an idle machine,
  # as the GPU machine is when this runs. Sections may write variants of it (rename = atomic).
  FAKE_BASE_STATE=$WORK/fake_state.json
  python3 - "$state" "$FAKE_BASE_STATE" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for dev in d.get("devices", []):
    dev["processes"] = []
json.dump(d, open(sys.argv[2], "w"), indent=1)
PY
  export GPULANE_NVML_LIBRARY=$lib FAKE_NVML_STATE=$FAKE_BASE_STATE
  echo "dry run ($DRY_WHY): fake NVML $lib"
  echo "  state: $state (processes removed) -> $FAKE_BASE_STATE"
}

# ================================================================ sections

sec_env() {
  section "environment"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)  host: $(hostname)  user: $(id -un) (uid $(id -u))"
  echo "os: $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")  kernel: $(uname -r)  cpus: $(nproc)"
  echo "mode: $([ "$DRY" -eq 1 ] && echo "DRY RUN ($DRY_WHY)" || echo "real GPUs")"
  echo "NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE TORCH_SYMM_MEM_DISABLE_MULTICAST=$TORCH_SYMM_MEM_DISABLE_MULTICAST NVSHMEM_DISABLE_NVLS=$NVSHMEM_DISABLE_NVLS"
  if [ -n "${CUDA_VISIBLE_DEVICES+x}" ]; then
    echo "note: CUDA_VISIBLE_DEVICES='$CUDA_VISIBLE_DEVICES' was inherited; unset for these checks (they need every GPU)"
    unset CUDA_VISIBLE_DEVICES
  fi
  unset CUDA_DEVICE_ORDER
  if command -v nvidia-smi >/dev/null 2>&1; then
    run_cmd -t 60 nvidia-smi -L
    run_cmd -t 60 nvidia-smi --query-gpu=index,name,driver_version,persistence_mode,mig.mode.current,compute_mode --format=csv
  else
    echo "nvidia-smi: not found"
  fi
  echo "libnvidia-ml: $(ldconfig -p 2>/dev/null | grep -m1 'libnvidia-ml.so.1' | sed 's/^[[:space:]]*//' || true)"
  echo "python3: $(python3 --version 2>&1); modules: $(python3 -c '
import importlib.util as u
print(" ".join(m + ("=yes" if u.find_spec(m) else "=no") for m in ["torch", "numpy", "pynvml", "psutil"]))' 2>&1)"

  if [ -z "$GL" ]; then
    fail "no gpulane binary: neither .carry/bin/gpulane nor build/gpulane (run scripts/make-carry.sh)"
    return
  fi
  echo "gpulane: $GL"
  [ -f "$ROOT/.carry/BUILD_INFO" ] && sed 's/^/  /' "$ROOT/.carry/BUILD_INFO"
  echo "\$ ldd $GL"
  ldd "$GL" 2>&1 | sed 's/^/    /'
  if ldd "$GL" 2>&1 | grep -q "not found"; then
    fail "gpulane's shared libraries resolve (ldd shows 'not found')"
  else
    pass "gpulane's shared libraries resolve"
  fi
  run_cmd -t 10 "$GL" --version
  if [ "$RC" -eq 0 ] && grep -q "^gpulane " "$WORK/stdout"; then pass "gpulane --version runs"; else fail "gpulane --version (exit $RC)"; fi
}

NGPU=0
sec_status() {
  section "gpulane status"
  [ -n "$GL" ] || { skip "no gpulane binary"; return; }
  run_cmd "$GL" status
  cp "$WORK/stdout" "$ART/status.txt"
  local text_rc=$RC
  run_cmd "$GL" status --json
  cp "$WORK/stdout" "$ART/status.json"
  local json_rc=$RC
  if [ "$json_rc" -ne 0 ]; then
    fail "gpulane status --json exits 0 (exit $json_rc)"
  elif ! NGPU=$(pyq "$ART/status.json" 'len(d["gpus"])' 2>"$WORK/pyerr"); then
    NGPU=0
    fail "gpulane status --json is a JSON document with gpus[] ($(tail -1 "$WORK/pyerr"))"
  else
    pass "gpulane status --json exits 0 and lists $NGPU GPU(s)"
    python3 - "$ART/status.json" <<'PY' | report_lines
import json, sys
d = json.load(open(sys.argv[1]))
g = d["gpus"]
ok = d.get("schema_version") == 1
print(("PASS" if ok else "FAIL"), "schema_version is 1 (%r)" % d.get("schema_version"))
print(("PASS" if g else "FAIL"), "at least one GPU")
bad = [x["index"] for x in g if x.get("state") != "ok"]
print(("FAIL" if bad else "PASS"), "every GPU state ok" + (" (failed: %s)" % bad if bad else ""))
need = ["uuid", "pci_bus_id", "name", "memory_total_bytes", "memory_used_bytes", "memory_free_bytes",
        "utilization_gpu_pct", "temperature_c", "power_draw_mw", "processes"]
missing = ["GPU%s:%s" % (x["index"], k) for x in g for k in need if k not in x]
print(("FAIL" if missing else "PASS"), "every GPU reports " + ", ".join(need)
      + (" (missing: %s)" % " ".join(missing) if missing else ""))
print("INFO driver %s, NVML %s, CUDA %s, nvml order = PCI order: %s" % (
    d.get("driver_version"), d.get("nvml_version"), d.get("cuda_driver_version"), d.get("nvml_order_matches_pci_order")))
PY
  fi
  if [ "$text_rc" -ne 0 ]; then
    fail "gpulane status exits 0 (exit $text_rc)"
  else
    local lines
    lines=$(grep -cE '^\[[0-9]+\]' "$ART/status.txt")
    if [ "$lines" -eq "$NGPU" ] && [ "$NGPU" -gt 0 ]; then
      pass "gpulane status prints one line per GPU ($lines)"
    else
      fail "gpulane status prints one line per GPU: $lines lines for $NGPU GPUs"
    fi
  fi
}

sec_pick() {
  section "gpulane pick"
  [ -n "$GL" ] || { skip "no gpulane binary"; return; }
  [ "$NGPU" -gt 0 ] || NGPU=$(gl status --json 2>/dev/null | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["gpus"]))' 2>/dev/null || echo 0)
  gl status --json >"$WORK/pick_status.json" 2>/dev/null
  run_cmd "$GL" pick
  local picked
  picked=$(tr -d '[:space:]' <"$WORK/stdout")
  if [ "$RC" -eq 0 ] && [[ "$picked" =~ ^[0-9]+$ ]] && [ "$picked" -lt "$NGPU" ]; then
    pass "gpulane pick prints one GPU index in 0..$((NGPU - 1)): $picked"
    # It must be a GPU with the most free memory among those without other users' processes
    # (ties and drift between the two reads: 256 MiB slack).
    python3 - "$WORK/pick_status.json" "$picked" "$(id -u)" <<'PY' | report_lines
import json, sys
d = json.load(open(sys.argv[1])); picked = int(sys.argv[2]); me = int(sys.argv[3])
free = {g["index"]: g.get("memory_free_bytes", 0) for g in d["gpus"]
        if g.get("state") == "ok" and all(p.get("uid") == me for p in g.get("processes", []))}
if picked not in free:
    print("FAIL gpulane pick chose GPU%d, which has another user's process or failed" % picked)
else:
    best = max(free.values())
    ok = free[picked] >= best - (256 << 20)
    print(("PASS" if ok else "FAIL"), "gpulane pick chose a GPU with the most free memory: GPU%d %d MiB free, best %d MiB"
          % (picked, free[picked] >> 20, best >> 20))
PY
  else
    fail "gpulane pick prints one GPU index (exit $RC, output '$picked')"
  fi

  run_cmd "$GL" pick --uuid
  local uuid
  uuid=$(tr -d '[:space:]' <"$WORK/stdout")
  if [ "$RC" -eq 0 ] && grep -q "\"$uuid\"" "$WORK/pick_status.json" && [[ "$uuid" == GPU-* ]]; then
    pass "gpulane pick --uuid prints a UUID from the status list: $uuid"
  else
    fail "gpulane pick --uuid (exit $RC, output '$uuid')"
  fi

  run_cmd "$GL" pick -n 2
  local two
  two=$(tr -d '[:space:]' <"$WORK/stdout")
  if [ "$NGPU" -eq 1 ]; then
    # Two GPUs can never qualify on one: a bad request (exit 2), as for `run`.
    if [ "$RC" -eq 2 ] && grep -q "can ever qualify" "$WORK/stderr"; then
      pass "gpulane pick -n 2 on a 1-GPU machine fails with exit 2 and a reason (expected): $(head -1 "$WORK/stderr")"
    else
      fail "gpulane pick -n 2 on a 1-GPU machine: want exit 2 and 'can ever qualify', got exit $RC"
    fi
  elif [ "$RC" -eq 0 ] && [[ "$two" =~ ^([0-9]+),([0-9]+)$ ]] && [ "${BASH_REMATCH[1]}" -ne "${BASH_REMATCH[2]}" ] &&
    [ "${BASH_REMATCH[1]}" -lt "$NGPU" ] && [ "${BASH_REMATCH[2]}" -lt "$NGPU" ]; then
    pass "gpulane pick -n 2 on $NGPU GPUs prints two distinct indices: $two"
  else
    fail "gpulane pick -n 2 on $NGPU GPUs: want two distinct indices, got exit $RC, output '$two'"
  fi
}

SMI_QUERY=index,uuid,pci.bus_id,memory.used,memory.total,name,driver_version
sec_smi() {
  section "gpulane status --json vs nvidia-smi"
  [ -n "$GL" ] || { skip "no gpulane binary"; return; }
  if [ "$DRY" -eq 0 ]; then
    local attempt
    for attempt in 1 2; do
      # Back to back, so both describe the same moment.
      gl status --json >"$ART/status.json" 2>"$WORK/gl_err"
      local grc=$?
      timeout 60 nvidia-smi --query-gpu=$SMI_QUERY --format=csv,noheader,nounits >"$ART/smi.csv" 2>"$WORK/smi_err"
      local src=$?
      echo "\$ nvidia-smi --query-gpu=$SMI_QUERY --format=csv,noheader,nounits   (exit $src)"
      sed 's/^/    /' "$ART/smi.csv"
      [ -s "$WORK/smi_err" ] && sed 's/^/    stderr: /' "$WORK/smi_err"
      if [ "$grc" -ne 0 ] || [ "$src" -ne 0 ]; then
        fail "gpulane status --json (exit $grc) and nvidia-smi (exit $src) both run"
        return
      fi
      echo "\$ scripts/check_status_vs_smi.py   (attempt $attempt)"
      python3 scripts/check_status_vs_smi.py --status-json "$ART/status.json" --smi-csv "$ART/smi.csv" --used-tolerance-mib 64 |
        sed 's/^/    /'
      if [ "${PIPESTATUS[0]}" -eq 0 ]; then
        pass "gpulane status --json matches nvidia-smi by UUID: index mapping, PCI bus id, memory total, used (±64 MiB)$([ "$attempt" -eq 2 ] && echo ' (on the second read; the first differed, see above)')"
        return
      fi
      [ "$attempt" -eq 1 ] && echo "    mismatch on the first read; reading both once more"
    done
    fail "gpulane status --json matches nvidia-smi (see the table above)"
    return
  fi

  skip "skipped: no nvidia-smi ($DRY_WHY)"
  # Dry run: exercise the checker on the fake NVML's state, once as nvidia-smi would print it
  # (must pass) and once with a planted mismatch (must fail).
  if [ -z "$FAKE_BASE_STATE" ]; then
    skip "checker self-test: no fake NVML state"
    return
  fi
  gl status --json >"$WORK/st.json"
  python3 - "$FAKE_NVML_STATE" "$WORK/smi_sim.csv" "$WORK/smi_bad.csv" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
rows = [[str(g["index"]), g["uuid"], g["pci_bus_id"], str(g["memory"]["used"] >> 20),
         str(g["memory"]["total"] >> 20), g["name"], d["driver"]] for g in d["devices"]]
open(sys.argv[2], "w").write("".join(", ".join(r) + "\n" for r in rows))
rows[0][3] = str(int(rows[0][3]) + 65)   # used beyond the tolerance
rows[-1][0], rows[0][0] = rows[0][0], rows[-1][0]  # swapped NVML indices (when there are two)
open(sys.argv[3], "w").write("".join(", ".join(r) + "\n" for r in rows))
PY
  echo "\$ scripts/check_status_vs_smi.py  (simulated nvidia-smi output from the fake state)"
  python3 scripts/check_status_vs_smi.py --status-json "$WORK/st.json" --smi-csv "$WORK/smi_sim.csv" | sed 's/^/    /'
  if [ "${PIPESTATUS[0]}" -eq 0 ]; then pass "checker self-test: matching data passes"; else fail "checker self-test: matching data passes"; fi
  echo "\$ scripts/check_status_vs_smi.py  (planted mismatches: used +65 MiB, swapped indices)"
  python3 scripts/check_status_vs_smi.py --status-json "$WORK/st.json" --smi-csv "$WORK/smi_bad.csv" | sed 's/^/    /'
  if [ "${PIPESTATUS[0]}" -eq 1 ]; then pass "checker self-test: planted mismatches fail"; else fail "checker self-test: planted mismatches fail"; fi
}

# Checks that pid $1 is listed under GPU $2 (uuid) with user $3 and a python3 command line, in
# gpulane status --json, status and status -p. Polls up to 20 s for NVML to list the process.
check_process_listed() {
  local pid=$1 uuid=$2 user=$3 label=$4
  local deadline=$(($(date +%s) + 20)) found=0
  while [ "$(date +%s)" -lt "$deadline" ]; do
    gl status --json >"$WORK/proc_status.json" 2>"$WORK/proc_err"
    if python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))
sys.exit(0 if any(p["pid"]==int(sys.argv[2]) for g in d["gpus"] for p in g.get("processes",[])) else 1)' \
      "$WORK/proc_status.json" "$pid" 2>/dev/null; then
      found=1
      break
    fi
    sleep 0.5
  done
  echo "\$ gpulane status --json   (the GPUs' process lists)"
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))
for g in d["gpus"]: print("    GPU%s %s: %s" % (g["index"], g["uuid"], json.dumps(g.get("processes"))))' "$WORK/proc_status.json" 2>&1
  if [ "$found" -eq 0 ]; then
    fail "$label: pid $pid appears in gpulane status --json within 20 s"
    if python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))
sys.exit(0 if any("user" not in p for g in d["gpus"] for p in g.get("processes",[])) else 1)' "$WORK/proc_status.json" 2>/dev/null; then
      info "hint: NVML lists pids that /proc here does not know: a separate PID namespace (a container without the host's)?"
    fi
    command -v nvidia-smi >/dev/null 2>&1 && [ "$DRY" -eq 0 ] &&
      run_cmd nvidia-smi --query-compute-apps=pid,process_name,gpu_uuid,used_memory --format=csv
    return 1
  fi
  python3 - "$WORK/proc_status.json" "$pid" "$uuid" "$user" "$label" <<'PY' | report_lines
import json, sys
d = json.load(open(sys.argv[1])); pid = int(sys.argv[2]); uuid, user, label = sys.argv[3:6]
where = [g["uuid"] for g in d["gpus"] for p in g.get("processes", []) if p["pid"] == pid]
print(("PASS" if where == [uuid] else "FAIL"), "%s: pid %d is listed under %s only (listed under: %s)" % (label, pid, uuid, where))
p = next((p for g in d["gpus"] if g["uuid"] == uuid for p in g.get("processes", []) if p["pid"] == pid), None)
if p:
    print(("PASS" if p.get("user") == user else "FAIL"), "%s: user is %s (%r, uid %r)" % (label, user, p.get("user"), p.get("uid")))
    cl = p.get("cmdline") or ""
    print(("PASS" if "python3" in cl and p.get("command") == "python3" else "FAIL"),
          "%s: command python3, cmdline contains python3 (command %r, cmdline %r)" % (label, p.get("command"), cl[:100]))
    mem = p.get("used_memory_bytes")
    if mem is None:
        print("INFO %s: used_memory_bytes not reported" % label)
    else:
        print(("PASS" if mem >= (1 << 30) else "FAIL"), "%s: its memory is at least the 1 GiB tensor (%d MiB)" % (label, mem >> 20))
PY
  local idx
  idx=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(next(g["index"] for g in d["gpus"] if g["uuid"]==sys.argv[2]))' \
    "$WORK/proc_status.json" "$uuid")
  run_cmd "$GL" status
  if grep -E "^\[$idx\]" "$WORK/stdout" | grep -q "$user:python3/$pid"; then
    pass "$label: gpulane status shows $user:python3/$pid on the line of GPU [$idx]"
  else
    fail "$label: gpulane status shows $user:python3/$pid on the line of GPU [$idx]"
  fi
  run_cmd "$GL" status -p
  if grep -E "^ +$pid +$user .*python3" "$WORK/stdout" >/dev/null; then
    pass "$label: gpulane status -p lists pid $pid, $user and its python3 command line"
  else
    fail "$label: gpulane status -p lists pid $pid, $user and its python3 command line"
  fi
  if [ "$NGPU" -ge 2 ]; then
    local picked
    picked=$(gl pick 2>/dev/null | tr -d '[:space:]')
    if [ -n "$picked" ] && [ "$picked" != "$idx" ]; then
      pass "$label: gpulane pick avoids the GPU holding the tensor (picked $picked, busy $idx)"
    else
      fail "$label: gpulane pick avoids the GPU holding the tensor (picked '$picked', busy $idx)"
    fi
  fi
  return 0
}

# Waits until pid $1 is gone from gpulane status --json (up to 20 s).
check_process_gone() {
  local pid=$1 label=$2
  local deadline=$(($(date +%s) + 20))
  while [ "$(date +%s)" -lt "$deadline" ]; do
    gl status --json >"$WORK/proc_status.json" 2>/dev/null
    if python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))
sys.exit(1 if any(p["pid"]==int(sys.argv[2]) for g in d["gpus"] for p in g.get("processes",[])) else 0)' \
      "$WORK/proc_status.json" "$pid" 2>/dev/null; then
      pass "$label: pid $pid is gone from gpulane status after it ended"
      return
    fi
    sleep 0.5
  done
  fail "$label: pid $pid is gone from gpulane status after it ended (still listed after 20 s)"
}

CHILD=""
stop_child() {
  [ -n "$CHILD" ] || return 0
  if kill -0 "$CHILD" 2>/dev/null; then
    kill -TERM "$CHILD" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$CHILD" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$CHILD" 2>/dev/null && kill -KILL "$CHILD" 2>/dev/null
  fi
  wait "$CHILD" 2>/dev/null
  CHILD=""
}

sec_process() {
  section "a process on one GPU"
  [ -n "$GL" ] || { skip "no gpulane binary"; return; }
  [ -s "$ART/status.json" ] || gl status --json >"$ART/status.json"
  local uuid idx user
  user=$(id -un)
  # The last GPU in gpulane's (PCI) order.
  uuid=$(pyq "$ART/status.json" 'max(d["gpus"], key=lambda g: g["index"])["uuid"]' 2>/dev/null)
  idx=$(pyq "$ART/status.json" 'max(g["index"] for g in d["gpus"])' 2>/dev/null)
  if [ -z "$uuid" ]; then
    fail "no GPU to run on (gpulane status --json)"
    return
  fi
  [ "$NGPU" -gt 0 ] || NGPU=$(pyq "$ART/status.json" 'len(d["gpus"])')

  if [ "$DRY" -eq 0 ]; then
    if ! python3 -c 'import torch' 2>/dev/null; then
      fail "python3 cannot import torch"
      return
    fi
    echo "starting a PyTorch process holding a 1 GiB tensor on GPU [$idx] $uuid"
    CUDA_VISIBLE_DEVICES=$uuid python3 -c 'import torch,time; x=torch.ones(256<<20, device="cuda"); torch.cuda.synchronize(); print("ready",flush=True); time.sleep(30)' \
      >"$WORK/child.out" 2>"$WORK/child.err" &
    CHILD=$!
    local label="torch on GPU$idx"
  else
    skip "skipped: no nvidia-smi ($DRY_WHY): no PyTorch process on a real GPU"
    if [ -z "$FAKE_BASE_STATE" ]; then
      skip "simulation: no fake NVML state"
      return
    fi
    echo "simulating: a python3 process that the fake NVML lists on GPU [$idx] $uuid"
    python3 -c 'import time; print("ready",flush=True); time.sleep(30)' >"$WORK/child.out" 2>"$WORK/child.err" &
    CHILD=$!
    local label="simulated python3 on GPU$idx"
  fi

  local deadline=$(($(date +%s) + 150))
  while ! grep -q '^ready' "$WORK/child.out" 2>/dev/null; do
    if ! kill -0 "$CHILD" 2>/dev/null || [ "$(date +%s)" -ge "$deadline" ]; then
      fail "$label: the process prints 'ready' (it $(kill -0 "$CHILD" 2>/dev/null && echo 'did not within 150 s' || echo exited))"
      sed 's/^/    stderr: /' "$WORK/child.err" | tail -20
      stop_child
      return
    fi
    sleep 0.2
  done
  echo "pid $CHILD ready after $(($(date +%s) - deadline + 150)) s"

  if [ "$DRY" -eq 1 ]; then
    python3 - "$FAKE_BASE_STATE" "$WORK/fake_busy.json" "$uuid" "$CHILD" <<'PY'
import json, os, sys
d = json.load(open(sys.argv[1]))
for dev in d["devices"]:
    if dev["uuid"] == sys.argv[3]:
        dev["processes"] = [{"pid": int(sys.argv[4]), "used_memory": (1 << 30) + (500 << 20)}]
        dev["memory"]["used"] += (1 << 30) + (500 << 20)
        dev["memory"]["free"] -= (1 << 30) + (500 << 20)
json.dump(d, open(sys.argv[2] + ".tmp", "w"))
os.rename(sys.argv[2] + ".tmp", sys.argv[2])
PY
    export FAKE_NVML_STATE=$WORK/fake_busy.json
  fi

  local pid=$CHILD listed=0
  check_process_listed "$CHILD" "$uuid" "$user" "$label" && listed=1
  [ "$listed" -eq 1 ] && check_judge_agrees "$CHILD" "$idx" "$user" "$label"
  stop_child
  [ "$DRY" -eq 1 ] && export FAKE_NVML_STATE=$FAKE_BASE_STATE
  # Only meaningful when it was listed at all.
  [ "$listed" -eq 1 ] && check_process_gone "$pid" "$label"
  return 0
}

# check_judge_agrees PID IDX USER LABEL: while PID (this user's own process, started without
# gpulane) runs on GPU IDX, `pick` and `run --no-wait` both refuse that GPU with the same exit
# code and the same reason, which names the process; with --share-foreign both take it.
check_judge_agrees() {
  local pid=$1 idx=$2 user=$3 label=$4
  local leases=$WORK/leases-judge
  rm -rf "$leases"; mkdir -m 1777 "$leases"
  GPULANE_LEASE_DIR=$leases "$GL" pick --gpus "$idx" >"$WORK/pick.out" 2>"$WORK/pick.err"
  local pick_rc=$?
  GPULANE_LEASE_DIR=$leases "$GL" run --no-wait --gpus "$idx" -- true >"$WORK/run.out" 2>"$WORK/run.err"
  local run_rc=$?
  echo "  pick --gpus $idx: exit $pick_rc: $(head -1 "$WORK/pick.err")"
  echo "  run --no-wait --gpus $idx: exit $run_rc: $(head -1 "$WORK/run.err")"
  if [ "$pick_rc" -eq 5 ] && grep -q "GPU$idx: in use by $user's python3 (pid $pid)" "$WORK/pick.err"; then
    pass "$label: pick refuses GPU$idx (exit 5), naming the caller's own process outside gpulane"
  else
    fail "$label: pick refuses GPU$idx (exit 5) naming '$user's python3 (pid $pid)' (exit $pick_rc: $(head -1 "$WORK/pick.err"))"
  fi
  if [ "$run_rc" -eq "$pick_rc" ] && cmp -s "$WORK/pick.err" "$WORK/run.err"; then
    pass "$label: run --no-wait fails exactly as pick does (exit $run_rc, the same reason line)"
  else
    fail "$label: run --no-wait fails exactly as pick does (pick exit $pick_rc, run exit $run_rc; stderr differs: $(diff "$WORK/pick.err" "$WORK/run.err" | tr '\n' ' '))"
  fi
  GPULANE_LEASE_DIR=$leases "$GL" pick --gpus "$idx" --share-foreign >"$WORK/pick.out" 2>"$WORK/pick.err"
  pick_rc=$?
  GPULANE_LEASE_DIR=$leases "$GL" run -q --no-wait --gpus "$idx" --share-foreign -- sh -c 'echo "$CUDA_VISIBLE_DEVICES"' \
    >"$WORK/run.out" 2>"$WORK/run.err"
  run_rc=$?
  if [ "$pick_rc" -eq 0 ] && [ "$run_rc" -eq 0 ] && [ "$(cat "$WORK/pick.out")" = "$idx" ] && cmp -s "$WORK/pick.out" "$WORK/run.out"; then
    pass "$label: with --share-foreign pick prints $idx and run --no-wait's job gets CUDA_VISIBLE_DEVICES=$idx"
  else
    fail "$label: with --share-foreign pick and run --no-wait take GPU$idx (pick exit $pick_rc '$(cat "$WORK/pick.out")', run exit $run_rc '$(cat "$WORK/run.out")')"
  fi
}

sec_bench() {
  section "benchmark: bench/status_latency.sh"
  [ -n "$GL" ] || { skip "no gpulane binary"; return; }
  echo "\$ bench/status_latency.sh -n $BENCH_RUNS --json \$OUT/status_latency.json"
  timeout -k 5 150 bash bench/status_latency.sh -n "$BENCH_RUNS" --json "$ART/status_latency.json" \
    >"$ART/status_latency.md" 2>"$WORK/bench_err"
  local rc=$?
  cat "$ART/status_latency.md"
  [ -s "$WORK/bench_err" ] && sed 's/^/    stderr: /' "$WORK/bench_err"
  if [ "$rc" -eq 0 ]; then
    pass "bench/status_latency.sh ran every available row ($BENCH_RUNS runs each)"
  else
    fail "bench/status_latency.sh (exit $rc$([ "$rc" -eq 124 ] && echo ', over 150 s'))"
  fi
}

# ---------------------------------------------------------------- main
for f in "$ROOT"/scripts/acceptance.d/*.sh; do
  # shellcheck source=/dev/null
  [ -f "$f" ] && . "$f"
done

if [ "$LIST" -eq 1 ]; then
  printf '%s\n' "${SECTIONS[@]}"
  rm -rf "$WORK"
  [ -n "$OUT_DIR" ] || rm -rf "$ART"
  exit 0
fi

cleanup() {
  stop_child
  rm -rf "$WORK"
}

main() {
  trap cleanup EXIT
  trap 'echo "interrupted"; exit 130' INT TERM
  echo "gpulane GPU acceptance  $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  setup_nvml
  local s
  for s in "${SECTIONS[@]}"; do
    if [ -n "$ONLY" ] && [[ ",$ONLY," != *",$s,"* ]]; then continue; fi
    # The device call that runs this has 600 s: leave room for the summary and the artifacts.
    if [ $(($(date +%s) - T0)) -gt "$TIME_BUDGET_S" ]; then
      section "$s"
      fail "not run: past the ${TIME_BUDGET_S} s budget of this script"
      continue
    fi
    if ! declare -F "sec_$s" >/dev/null; then
      section "$s"
      fail "no function sec_$s"
      continue
    fi
    "sec_$s"
  done
  echo
  echo "==================== summary ===================="
  printf '%s\n' "${SUMMARY[@]}"
  echo
  echo "$N_PASS passed, $N_FAIL failed, $N_SKIP skipped in $(($(date +%s) - T0)) s$([ "$DRY" -eq 1 ] && echo " (DRY RUN: $DRY_WHY)")"
  if [ -n "$OUT_DIR" ]; then
    echo "artifacts in \$OUT: $(cd "$OUT_DIR" && ls | tr '\n' ' ')"
  else
    echo "artifacts (set OUT to choose the folder): $ART"
  fi
  [ "$N_FAIL" -eq 0 ] && echo "RESULT: PASS" || echo "RESULT: FAIL"
  [ "$N_FAIL" -eq 0 ]
}

if [ -n "$OUT_DIR" ]; then
  main 2>&1 | tee "$OUT_DIR/acceptance.log"
  exit "${PIPESTATUS[0]}"
fi
main
