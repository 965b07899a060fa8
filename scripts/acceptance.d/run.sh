# shellcheck shell=bash
# `gpulane run` sections of scripts/gpu-acceptance.sh (sourced by it; uses its helpers and $GL,
# $WORK, $ART, $DRY, $ROOT, $FAKE_BASE_STATE):
#   run_exclusive  4 concurrent `gpulane run -g 1 -- python3 torch_job.py`: one GPU each, UUIDs agree,
#                  never two jobs on one GPU at a time
#   run_shared     4 concurrent `gpulane run --mem 30GiB -- python3 torch_job.py 20`: they share GPUs,
#                  declared memory on a GPU never over its total, spread over 2 GPUs where there are 2
#   run_leftovers  `gpulane run --kill-grace 2s -- python3 leaver.py`: a SIGTERM-ignoring child in its
#                  own session holding 1 GiB is ended, and gone from nvidia-smi when gpulane returns
#   run_bench      bench/run_overhead.sh (-n 30, 10 hand-over rounds): per-job overhead and hand-over
#                  latency on this machine -> $OUT/run_overhead.md, run_overhead.json
# Each section uses a fresh lease directory (mode 1777) under $WORK, never /run/gpulane/leases.
# The PyTorch jobs run about 3 s of matmuls each (RUN_JOB_SECONDS). Time: about 1.5 min on 1 x H200.
#
# Dry run (no nvidia-smi) and scripts/acceptance-selftest.sh: when FAKE_NVML_STATE is in use, the
# jobs import the stand-in torch (scripts/acceptance-selftest/torch, which lists them in the fake
# state), nvidia-smi is the stand-in there too, and scripts/acceptance-selftest/fake_gpu_driver.py
# removes killed processes from the fake state as a driver would. Those results say "simulated".

RUN_JOB_SECONDS=${RUN_JOB_SECONDS:-3}
RUN_HARD_S=${ACCEPTANCE_HARD_S:-510}  # no job of these sections may run past T0 + this
RUN_SIM=0                             # 1: GPUs and PyTorch are simulated (fake NVML state)
RUN_DRIVER=""                         # pid of the fake driver while a section runs
RUN_NGPU=0
RUN_ENV=()                            # extra environment for the jobs (stand-in torch, nvidia-smi)
RUN_SMI=(nvidia-smi)

# Seconds this section may still spend: min(want, what is left before T0 + RUN_HARD_S), at least 20.
run_limit() {
  local left=$((T0 + RUN_HARD_S - $(date +%s)))
  [ "$left" -lt "$1" ] && { [ "$left" -gt 20 ] && echo "$left" || echo 20; } || echo "$1"
}

# run_setup NAME: fresh lease directory, GPU count, simulated or real PyTorch. Returns 1 (after
# reporting) when the section cannot run.
run_setup() {
  local name=$1
  [ -n "$GL" ] || { skip "no gpulane binary"; return 1; }
  unset CUDA_VISIBLE_DEVICES CUDA_DEVICE_ORDER
  export GPULANE_LEASE_DIR=$WORK/leases-$name
  rm -rf "$GPULANE_LEASE_DIR"
  mkdir -m 1777 "$GPULANE_LEASE_DIR" && chmod 1777 "$GPULANE_LEASE_DIR"
  echo "GPULANE_LEASE_DIR=$GPULANE_LEASE_DIR (fresh, mode $(stat -c %a "$GPULANE_LEASE_DIR"))"
  if ! gl status --json >"$WORK/run_status.json" 2>"$WORK/run_status.err"; then
    fail "gpulane status --json (for the GPU list): $(tail -1 "$WORK/run_status.err")"
    return 1
  fi
  RUN_NGPU=$(pyq "$WORK/run_status.json" 'len(d["gpus"])')
  RUN_ENV=(TORCH_JOB_SECONDS="$RUN_JOB_SECONDS")
  RUN_SMI=(nvidia-smi)
  RUN_SIM=0
  if [ -n "${FAKE_NVML_STATE:-}" ]; then
    RUN_SIM=1
    if [ "$DRY" -eq 1 ]; then
      RUN_ENV+=(PYTHONPATH="$ROOT/scripts/acceptance-selftest${PYTHONPATH:+:$PYTHONPATH}"
                PATH="$ROOT/scripts/acceptance-selftest:$PATH")
      RUN_SMI=(python3 "$ROOT/scripts/acceptance-selftest/nvidia-smi")
    fi
    # RUN_FAKE_DRIVER=0 (scripts/acceptance-selftest.sh only): no driver stand-in, so a killed
    # process stays listed, which the leftover check must catch.
    if [ "${RUN_FAKE_DRIVER:-1}" != 0 ]; then
      python3 "$ROOT/scripts/acceptance-selftest/fake_gpu_driver.py" 2>>"$WORK/fake_driver.log" &
      RUN_DRIVER=$!
    fi
    echo "SIMULATED: fake NVML state $FAKE_NVML_STATE, stand-in torch and nvidia-smi (scripts/acceptance-selftest), fake driver pid ${RUN_DRIVER:-none}"
  elif ! python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>"$WORK/torch.err"; then
    fail "python3 with PyTorch and CUDA (import torch; torch.cuda.is_available()): $(tail -1 "$WORK/torch.err")"
    return 1
  fi
  echo "$RUN_NGPU GPU(s): $(pyq "$WORK/run_status.json" '", ".join("[%d] %s %.1f GiB" % (g["index"], g["uuid"], g["memory_total_bytes"] / 2**30) for g in d["gpus"])')"
  return 0
}

run_teardown() {
  sampler_stop
  if [ -n "$RUN_DRIVER" ]; then
    kill -TERM "$RUN_DRIVER" 2>/dev/null
    wait "$RUN_DRIVER" 2>/dev/null
    RUN_DRIVER=""
  fi
  [ -s "$WORK/fake_driver.log" ] && { sed 's/^/    /' "$WORK/fake_driver.log"; : >"$WORK/fake_driver.log"; }
  return 0
}

# The jobs' extra environment, without the PATH/PYTHONPATH of a simulation.
run_env_shown() {
  local kv out=()
  for kv in "${RUN_ENV[@]}"; do
    case "$kv" in PATH=* | PYTHONPATH=*) out+=("${kv%%=*}=<stand-ins>:...") ;; *) out+=("$kv") ;; esac
  done
  echo "${out[*]}"
}

# run_jobs TAG N LIMIT -- GPULANE_ARGS...: starts N `gpulane GPULANE_ARGS` at once (each under
# `timeout LIMIT`), waits for all, prints their output; sets RUN_RCS ("rc rc ...").
RUN_RCS=""
run_jobs() {
  local tag=$1 n=$2 limit=$3
  shift 4
  local pids=() i
  echo "\$ gpulane ${*/#"$ROOT"\//}    (x $n, started together; env: $(run_env_shown))"
  for i in $(seq "$n"); do
    env "${RUN_ENV[@]}" timeout -k 5 "$limit" "$GL" "$@" >"$WORK/$tag.$i.out" 2>"$WORK/$tag.$i.err" &
    pids+=($!)
  done
  RUN_RCS=""
  for i in $(seq "$n"); do
    wait "${pids[$((i - 1))]}"
    RUN_RCS+="$? "
  done
  for i in $(seq "$n"); do
    echo "  job $i (exit $(echo "$RUN_RCS" | cut -d' ' -f"$i")):"
    sed 's/^/    /' "$WORK/$tag.$i.out"
    grep -v '^\s*$' "$WORK/$tag.$i.err" | tail -8 | sed 's/^/    stderr: /'
  done
}

# The lease directory sampler, around a group of jobs.
RUN_SAMPLER=""
sampler_start() {
  python3 "$ROOT/scripts/acceptance/lease_sampler.py" --dir "$GPULANE_LEASE_DIR" --out "$1" &
  RUN_SAMPLER=$!
}
sampler_stop() {
  [ -n "$RUN_SAMPLER" ] || return 0
  kill -TERM "$RUN_SAMPLER" 2>/dev/null
  wait "$RUN_SAMPLER" 2>/dev/null
  RUN_SAMPLER=""
}

sec_run_exclusive() {
  section "gpulane run: whole GPUs, 4 jobs at once (-g 1)"
  run_setup exclusive || { run_teardown; return; }
  local log=$WORK/run_exclusive.log limit
  : >"$log"
  limit=$(run_limit 200)
  [ "$limit" -ge 40 ] || { fail "not run: less than 40 s left before the ${RUN_HARD_S} s limit"; run_teardown; return; }
  sampler_start "$WORK/run_exclusive.sampler.json"
  local t=$SECONDS
  RUN_ENV+=(TORCH_JOB_LOG="$log")
  run_jobs excl 4 "$limit" -- run -g 1 --timeout "$((limit - 20))s" -- python3 "$ROOT/scripts/acceptance/torch_job.py"
  sampler_stop
  echo "  (all 4 done in $((SECONDS - t)) s)"
  cp "$log" "$ART/run_exclusive.log" 2>/dev/null
  python3 "$ROOT/scripts/acceptance/check_run.py" exclusive --log "$log" --status "$WORK/run_status.json" \
    --rcs "$RUN_RCS" --sampler "$WORK/run_exclusive.sampler.json" 2>&1 | report_lines
  [ "$RUN_SIM" -eq 1 ] && info "SIMULATED GPUs and PyTorch (fake NVML): checks gpulane's leasing, not CUDA"
  run_teardown
}

sec_run_shared() {
  section "gpulane run: shared GPUs, 4 jobs at once (--mem 30GiB, 20 GiB each)"
  run_setup shared || { run_teardown; return; }
  local log=$WORK/run_shared.log limit
  : >"$log"
  limit=$(run_limit 150)
  [ "$limit" -ge 40 ] || { fail "not run: less than 40 s left before the ${RUN_HARD_S} s limit"; run_teardown; return; }
  sampler_start "$WORK/run_shared.sampler.json"
  local t=$SECONDS
  RUN_ENV+=(TORCH_JOB_LOG="$log")
  run_jobs shared 4 "$limit" -- run --mem 30GiB --timeout "$((limit - 20))s" -- python3 "$ROOT/scripts/acceptance/torch_job.py" 20
  sampler_stop
  echo "  (all 4 done in $((SECONDS - t)) s)"
  cp "$log" "$ART/run_shared.log" 2>/dev/null
  python3 "$ROOT/scripts/acceptance/check_run.py" shared --log "$log" --status "$WORK/run_status.json" \
    --rcs "$RUN_RCS" --mem-bytes $((30 << 30)) --sampler "$WORK/run_shared.sampler.json" 2>&1 | report_lines
  run_time_limit
  [ "$RUN_SIM" -eq 1 ] && info "SIMULATED GPUs and PyTorch (fake NVML): checks gpulane's leasing, not CUDA"
  run_teardown
}

# `gpulane run --time-limit` on a PyTorch job that would run 120 s: stopped at its limit, and run
# says so on stderr (its exit status is the job's own: a job that exits 0 on SIGTERM exits 0).
run_time_limit() {
  [ "$(run_limit 40)" -ge 40 ] || { info "time-limit check not run: less than 40 s left"; return; }
  local t=$SECONDS
  run_cmd -t 40 env "${RUN_ENV[@]}" TORCH_JOB_SECONDS=120 "$GL" run -g 1 --time-limit 5s -- \
    python3 "$ROOT/scripts/acceptance/torch_job.py"
  if [ "$RC" -ne 124 ] && grep -q 'the job was stopped by its time limit (5' "$WORK/stderr"; then
    pass "run --time-limit 5s stopped a 120 s PyTorch job after $((SECONDS - t)) s (exit $RC: the job's own) and said so on stderr"
  else
    fail "run --time-limit 5s: exit $RC, stderr: $(tail -2 "$WORK/stderr" | tr '\n' ' ')"
  fi
}

# smi_pids: the pids nvidia-smi lists as compute processes (one per line).
smi_pids() { "${RUN_SMI[@]}" --query-compute-apps=pid --format=csv,noheader 2>/dev/null | tr -dc '0-9\n'; }

sec_run_leftovers() {
  section "gpulane run: a leftover GPU process that ignores SIGTERM (--kill-grace 2s)"
  run_setup leftovers || { run_teardown; return; }
  local pidfile=$WORK/leaver.pids smi_before=$WORK/leaver.smi limit
  rm -f "$pidfile" "$smi_before"
  limit=$(run_limit 120)
  local t0
  t0=$(date +%s.%N)
  echo "\$ gpulane run --kill-grace 2s -- python3 scripts/acceptance/leaver.py --pid-file ... --smi-before ..."
  env "${RUN_ENV[@]}" timeout -k 5 "$limit" "$GL" run --kill-grace 2s --timeout 60s -- \
    python3 "$ROOT/scripts/acceptance/leaver.py" --pid-file "$pidfile" --smi-before "$smi_before" \
    >"$WORK/leaver.out" 2>"$WORK/leaver.err"
  local rc=$?
  # Right after gpulane returned: what nvidia-smi lists.
  local after
  after=$(smi_pids)
  local took
  took=$(python3 -c "import sys,time; print('%.1f' % (time.time() - float(sys.argv[1])))" "$t0")
  sed 's/^/    /' "$WORK/leaver.out"
  sed 's/^/    stderr: /' "$WORK/leaver.err"
  echo "    (exit $rc after $took s)"
  local parent="" child=""
  [ -s "$pidfile" ] && read -r parent child <"$pidfile"
  if [ -z "$child" ]; then
    fail "leaver.py recorded its child's pid (no $pidfile)"
    run_teardown
    return
  fi
  echo "  leaver parent pid $parent, child pid $child (own session, SIGTERM ignored)"
  if [ "$rc" -eq 0 ]; then pass "gpulane run exits with the job's status (0)"; else fail "gpulane run exits with the job's status 0 (exit $rc)"; fi
  echo "  nvidia-smi before the parent exited: $(tr '\n' ' ' <"$smi_before" 2>/dev/null)"
  if tr -dc '0-9\n' <"$smi_before" 2>/dev/null | grep -qx "$child"; then
    pass "precondition: nvidia-smi listed the child $child on a GPU before the parent exited"
  else
    fail "precondition: nvidia-smi listed the child $child on a GPU before the parent exited (listed: $(tr '\n' ' ' <"$smi_before" 2>/dev/null))"
  fi
  if grep -Eq "ended [0-9]+ process(es)? the job left behind" "$WORK/leaver.err"; then
    pass "gpulane's stderr says it ended the leftovers: $(grep -Eo 'ended [0-9]+ process.*' "$WORK/leaver.err" | head -1)"
  else
    fail "gpulane's stderr says it ended the leftovers ('ended N process(es) the job left behind')"
  fi
  if grep -q "needed SIGKILL" "$WORK/leaver.err"; then
    pass "the child, which ignores SIGTERM, needed SIGKILL after the 2 s grace"
  else
    fail "the child, which ignores SIGTERM, needed SIGKILL after the 2 s grace (stderr does not say so)"
  fi
  echo "  nvidia-smi right after gpulane returned: $(echo "$after" | tr '\n' ' ')"
  local listed=""
  for p in $parent $child; do echo "$after" | grep -qx "$p" && listed+="$p "; done
  if [ -z "$listed" ]; then
    pass "nvidia-smi lists no process of the job's tree ($parent, $child) right after gpulane returned"
  else
    local w=0
    while [ "$w" -lt 20 ] && smi_pids | grep -qx "$child"; do sleep 0.5; w=$((w + 1)); done
    fail "nvidia-smi lists no process of the job's tree right after gpulane returned: still listed: $listed(gone after $((w / 2)) s more: $(smi_pids | grep -qx "$child" && echo no || echo yes))"
  fi
  if kill -0 "$child" 2>/dev/null && ! grep -q '^[^)]*) Z' "/proc/$child/stat" 2>/dev/null; then
    fail "the child process $child is gone (it still runs; killing it now)"
    kill -KILL "$child" 2>/dev/null
  else
    pass "the child process $child is gone"
  fi
  [ "$RUN_SIM" -eq 1 ] && info "SIMULATED GPU and nvidia-smi (fake NVML + stand-ins): checks gpulane's clean-up, not the driver"
  run_teardown
}

sec_run_bench() {
  section "benchmark: bench/run_overhead.sh (gpulane run: per-job overhead, hand-over latency)"
  [ -n "$GL" ] || { skip "no gpulane binary"; return; }
  unset CUDA_VISIBLE_DEVICES CUDA_DEVICE_ORDER
  local limit
  limit=$(run_limit 150)
  echo "\$ bench/run_overhead.sh -n 30 --rounds 10 --json \$OUT/run_overhead.json"
  timeout -k 5 "$limit" bash "$ROOT/bench/run_overhead.sh" -n 30 --rounds 10 --json "$ART/run_overhead.json" \
    >"$ART/run_overhead.md" 2>"$WORK/run_bench.err"
  local rc=$?
  cat "$ART/run_overhead.md"
  grep -v ' \.\.\.$' "$WORK/run_bench.err" | sed 's/^/    stderr: /'
  if [ "$rc" -ne 0 ]; then
    fail "bench/run_overhead.sh (exit $rc$([ "$rc" -eq 124 ] && echo ", over $limit s"))"
    return
  fi
  pass "bench/run_overhead.sh measured every row it could"
  # Against the fake NVML the numbers are not GPU numbers: the targets are reported, not judged.
  python3 - "$ART/run_overhead.json" "${FAKE_NVML_STATE:+sim}" <<'PY' | report_lines
import json, sys
d = json.load(open(sys.argv[1]))
o, h, t = d["overhead"], d["handover"], d["targets"]
sim = sys.argv[2] == "sim"
verdict = lambda ok: "INFO (fake NVML, not judged: %s)" % ("met" if ok else "missed") if sim else ("PASS" if ok else "FAIL")
if o.get("extra_ms") is not None:
    print(verdict(o["target_met"]), "per-job overhead of gpulane run: +%.1f ms over `true` (target <= %.0f ms)"
          % (o["extra_ms"], t["overhead_extra_ms"]))
g = h.get("gpulane", {})
if g.get("median_ms") is not None:
    print(verdict(h["target_met"]), "hand-over latency, median of %d rounds: %.1f ms (target <= %.0f ms)"
          % (len(g["samples_ms"]), g["median_ms"], t["handover_ms"]))
else:
    print("FAIL hand-over latency measured (%s)" % "; ".join(g.get("notes", [])[-1:]))
if "tsp" in h and h["tsp"].get("median_ms") is not None:
    print("INFO task-spooler on this machine: %.1f ms" % h["tsp"]["median_ms"])
elif h.get("tsp_skipped"):
    print("INFO task-spooler rows skipped: %s" % h["tsp_skipped"])
PY
}

SECTIONS+=(run_exclusive run_shared run_leftovers run_bench)
