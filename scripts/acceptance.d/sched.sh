# shellcheck shell=bash
# Scheduling sections of scripts/gpu-acceptance.sh (sourced by it after run.sh, whose run_setup,
# run_teardown, run_limit and RUN_ENV they use; plus its helpers and $GL, $WORK, $ART, $DRY, $ROOT):
#   sched_partition  a machine config (GPULANE_CONFIG, written here; root only, so the file is trusted
#                    with [partitions]) with `solo` = GPU 0 and `closed` = a window on another weekday:
#                    `gpulane run --partition solo -- python3 -c '...uuid'` runs on GPU 0 (torch's UUID =
#                    status --json's GPU 0, compared without the "GPU-" prefix); `pick --partition closed`
#                    and `run --no-wait --partition closed` exit 5 "closed until"; status lists both;
#                    an unknown partition is exit 2
#   sched_backfill   one GPU (--gpus 0): a holder `run --mem 30GiB --time-limit 1h` (a torch job holding
#                    1 GiB until told to stop), a head `run -g 1` waiting behind it (its reservation
#                    starts when the holder's time limit ends); then `run --no-wait --mem 10GiB` without
#                    a time limit and with --time-limit 2h exit 5 ("only a job with a --time-limit",
#                    "ends later"), with --time-limit 10m it runs a CUDA matmul (exit 0, result and UUID
#                    checked); the head has not started; the holder is ended and the head runs (exit 0).
#                    Prints how long the head's start took after the holder ended.
#   sched_retry      a per-user daemon (fresh GPULANE_SOCKET/GPULANE_STATE_DIR, GPULANE_SYSTEM_DAEMON=0):
#                    `submit --retry 2` of a job that inits CUDA, prints torch's UUID and exits 3 on
#                    GPULANE_RETRY=0, else 0; `gpulane wait` exits 0, `show --json` has 2 attempts with
#                    exit codes 3 and 0 on the GPU each attempt's UUID line in the -o file names.
#   sched_array      a per-user daemon: `submit --hold --array 0-599` (stored in 3 parts of 250; the
#                    command's time printed), `queue --json` lists 600 held tasks with consecutive ids
#                    and indices 0-599; 597 cancelled by array ids, tasks 0, 250 and 500 (one of each
#                    part) released and waited for: each ran a CUDA matmul on GPU 0 and printed its
#                    GPULANE_ARRAY_INDEX (task-%a.out).
#   sched_ends       root: a partition on GPU 0 whose window closes seconds from now (a TZ offset,
#                    sched_closing_in): `run --partition` of a torch job holding 1 GiB is stopped at
#                    the close with ends = "stop" (its SIGTERM handler prints the time, run warns
#                    why, GPU 0 is free after); a queued job with ends = "requeue" is stopped and
#                    back in line (show --json: one cancelled attempt on GPU 0 with the reason).
#   sched_preempt    per-user daemon, GPU 0: a --preemptible torch job holding 1 GiB gives way to a
#                    normal matmul job submitted after it (SIGTERM: it checkpoints and exits), is
#                    requeued (show --json: one cancelled attempt, "preempted": true) and restarts
#                    on GPU 0 with GPULANE_PREEMPTED=1 once the matmul is done. Timed in parts: submit
#                    to SIGTERM (the preemptible job's look, lease/preemption.h), SIGTERM to the
#                    attempt's end (the job's own exit and CUDA teardown), that end to the matmul
#                    job's start (gpulane's hand-over and python3's start-up).
#   sched_fairrun    root and a second user against a system daemon (telemetry every 500 ms): root's
#                    `gpulane run` holds GPU 0 with a torch job; once the daemon has published root's
#                    fair-share factor below 1 (fair-share.json in the lease directory), root's second
#                    run and then the other user's wait for GPU 0; when the holder ends, the other
#                    user's later run starts first; both run a CUDA matmul on GPU 0. Timed in parts:
#                    the gate to the holder's end, that to the next python3's start, and so on.
#   sched_mig        MIG mode as gpulane reads it (status --json mig_enabled) equals nvidia-smi's
#                    mig.mode.current for every GPU; on GPUs none of which is in MIG mode (the lent
#                    H200), `pick --mig 1g.18gb` exits 2 saying so. (No MIG device is leased: the
#                    lent GPU is not in MIG mode and its mode is never changed.)
# Each section uses a fresh lease directory (mode 1777) under $WORK, never /run/gpulane/leases, and
# changes no GPU setting. Time: about 55 s together on 1 x H200 (most of it importing torch: 9 jobs
# and run_setup's CUDA check per section); every command runs under `timeout`.
#
# Dry run: the stand-in torch of scripts/acceptance-selftest (RUN_ENV's PYTHONPATH), over the fake
# NVML's 2 GPUs (hence --gpus 0 in sched_backfill); the "CUDA work" is simulated, the scheduling real.

# The jobs (python3 -c). UUID: what torch prints for device 0 (no "GPU-" prefix on torch 2.x).
SCHED_PY_UUID='import torch; print(torch.cuda.get_device_properties(0).uuid)'
# A matmul of ones: every element of the result is 1024; prints its start and end times.
SCHED_PY_MATMUL='import time
print("start %.3f" % time.time(), flush=True)
import torch
a = torch.ones(1024, 1024, device="cuda")
c = a @ a
torch.cuda.synchronize()
print("uuid", torch.cuda.get_device_properties(0).uuid)
print("matmul", c[0, 0].item())
print("end %.3f" % time.time(), flush=True)'
# Holds 1 GiB (written) until the file argv[1] exists, at most argv[2] seconds; prints its end time.
SCHED_PY_HOLD='import os, sys, time
import torch
x = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
x.fill_(1)
torch.cuda.synchronize()
print("uuid", torch.cuda.get_device_properties(0).uuid)
print("holding 1 GiB", flush=True)
t = time.time()
while not os.path.exists(sys.argv[1]) and time.time() - t < float(sys.argv[2]):
    time.sleep(0.02)
print("end %.3f" % time.time(), flush=True)'
# Inits CUDA, appends "retry N UUID" to stdout, exits 3 on the first attempt, 0 after.
SCHED_PY_RETRY='import os, sys, torch
x = torch.ones(1024, device="cuda")
torch.cuda.synchronize()
r = os.environ.get("GPULANE_RETRY")
print("retry", r, torch.cuda.get_device_properties(0).uuid, flush=True)
sys.exit(3 if r == "0" else 0)'

# sched_norm UUID: lower case, without a "GPU-" prefix.
sched_norm() { local u=${1,,}; echo "${u#gpu-}"; }

# sched_gl [-t SECONDS] ARGS...: like run_cmd for `gpulane ARGS`, with the jobs' environment
# (RUN_ENV: the stand-in torch in a dry run); a python3 -c program is shown on one line.
sched_gl() {
  local limit=60
  if [ "$1" = "-t" ]; then limit=$2; shift 2; fi
  local shown="$*"
  echo "\$ gpulane ${shown//$'\n'/; }"
  env "${RUN_ENV[@]}" timeout -k 5 "$limit" "$GL" "$@" >"$WORK/stdout" 2>"$WORK/stderr"
  RC=$?
  sed 's/^/    /' "$WORK/stdout"
  [ -s "$WORK/stderr" ] && sed 's/^/    stderr: /' "$WORK/stderr"
  echo "    (exit $RC)"
  [ "$RC" -ne 124 ] || echo "    (killed after ${limit}s)"
  return 0
}

# sched_config NAME: writes $WORK/NAME.toml from stdin and exports GPULANE_CONFIG to it (machine keys
# such as [partitions] and [sched] are taken from it only because root runs this).
sched_config() {
  cat >"$WORK/$1.toml"
  export GPULANE_CONFIG=$WORK/$1.toml
  echo "GPULANE_CONFIG=$GPULANE_CONFIG:"
  sed 's/^/    /' "$GPULANE_CONFIG"
}

# sched_sim_note WHAT: with the fake NVML, says what was real (gpulane's WHAT) and, in a dry run,
# SKIPs the CUDA side, which the stand-in torch only pretends to do.
sched_sim_note() {
  [ "$RUN_SIM" -eq 1 ] || return 0
  info "SIMULATED GPUs and PyTorch (fake NVML): checks gpulane's $1, not CUDA"
  [ "$DRY" -eq 1 ] && skip "real CUDA contexts and matmuls on an H200: dry run ($DRY_WHY), the stand-in torch only pretends"
  return 0
}

# sched_free [PICK_ARGS...]: the precondition of a section: `gpulane pick PICK_ARGS` finds a free GPU
# now (else a process outside gpulane, e.g. a leftover of an earlier section, would make every job
# here wait out its limit). Reports a FAIL and returns 1 when not.
sched_free() {
  gl pick "$@" >/dev/null 2>"$WORK/sched_pick.err" && return 0
  fail "precondition: gpulane pick${*:+ $*} finds a free GPU now ($(head -1 "$WORK/sched_pick.err")); section not run"
  return 1
}

# The UUID status --json gives GPU 0 (run_setup wrote $WORK/run_status.json).
sched_uuid0() { pyq "$WORK/run_status.json" 'next(g["uuid"] for g in d["gpus"] if g["index"] == 0)'; }

sec_sched_partition() {
  section "scheduling: partitions (solo = GPU 0; closed: a window on another weekday)"
  [ "$(id -u)" -eq 0 ] || { skip "needs root: [partitions] from GPULANE_CONFIG counts only in root's own file"; return; }
  if ! run_setup sched_partition || ! sched_free --gpus 0; then run_teardown; return; fi
  local uuid0 day
  uuid0=$(sched_uuid0)
  day=$(LC_ALL=C date -d '+2 days' +%a)  # the day after tomorrow: never today
  sched_config sched_partition <<EOF
[partitions.solo]
gpus = [0]

[partitions.closed]
gpus = [0]
windows = ["$day 00:00-00:01"]
EOF
  info "today is $(LC_ALL=C date +%a) $(date +%H:%M) (local time); GPU 0 is $uuid0"

  local t=$SECONDS
  sched_gl -t "$(run_limit 90)" run --partition solo --timeout 60s -- python3 -c "$SCHED_PY_UUID"
  local got
  got=$(tail -1 "$WORK/stdout" | tr -d '[:space:]')
  if [ "$RC" -eq 0 ] && [ -n "$got" ] && [ "$(sched_norm "$got")" = "$(sched_norm "$uuid0")" ]; then
    pass "run --partition solo: torch's device 0 is GPU 0 ($got = $uuid0 without 'GPU-'), exit 0 in $((SECONDS - t)) s"
  else
    fail "run --partition solo: torch's UUID equals GPU 0's (exit $RC, torch printed '$got', GPU 0 is $uuid0)"
  fi

  run_cmd -t 20 "$GL" pick --partition closed
  if [ "$RC" -eq 5 ] && grep -q "closed until" "$WORK/stderr"; then
    pass "pick --partition closed exits 5: $(grep -m1 -o 'partition closed.*' "$WORK/stderr")"
  else
    fail "pick --partition closed exits 5 with 'closed until' (exit $RC: $(head -1 "$WORK/stderr"))"
  fi
  run_cmd -t 20 "$GL" run --no-wait --partition closed -- true
  if [ "$RC" -eq 5 ] && grep -q "closed until" "$WORK/stderr"; then
    pass "run --no-wait --partition closed exits 5, 'closed until', as pick does"
  else
    fail "run --no-wait --partition closed exits 5 with 'closed until' (exit $RC: $(head -1 "$WORK/stderr"))"
  fi
  run_cmd -t 20 "$GL" pick --partition nosuch
  if [ "$RC" -eq 2 ] && grep -q "closed" "$WORK/stderr" && grep -q "solo" "$WORK/stderr"; then
    pass "pick --partition nosuch is a usage error (exit 2) naming the known partitions"
  else
    fail "pick --partition nosuch: want exit 2 naming closed and solo (exit $RC: $(head -1 "$WORK/stderr"))"
  fi
  run_cmd -t 20 "$GL" status
  if grep -q "^partition closed (GPUs 0): closed, opens $day 00:00" "$WORK/stdout" &&
    grep -q "^partition solo (GPUs 0): open" "$WORK/stdout"; then
    pass "status ends with a line per partition: solo open, closed opens $day 00:00"
  else
    fail "status lists 'partition solo (GPUs 0): open' and 'partition closed (GPUs 0): closed, opens $day 00:00'"
  fi
  sched_sim_note "partitions"
  unset GPULANE_CONFIG
  run_teardown
}

SCHED_BG=()  # pids (of `timeout`) of the background gpulane runs of sched_backfill
sched_bg_stop() {
  [ -n "${1:-}" ] && touch "$1"
  local p
  for p in "${SCHED_BG[@]}"; do
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -TERM "$p" 2>/dev/null
    wait "$p" 2>/dev/null
  done
  SCHED_BG=()
}

sec_sched_backfill() {
  section "scheduling: reservation and backfill on GPU 0 (--mem shares, --time-limit)"
  if ! run_setup sched_backfill || ! sched_free --gpus 0; then run_teardown; return; fi
  local uuid0 stop=$WORK/sched_backfill.stop limit
  uuid0=$(sched_uuid0)
  rm -f "$stop"
  if [ "$(id -u)" -eq 0 ]; then
    sched_config sched_backfill <<'EOF'
[sched]
policy = "default"
EOF
  else
    info "not root: the machine's sched.policy applies (backfill needs \"default\", the default)"
  fi
  limit=$(run_limit 120)
  local ho=$WORK/sched_holder.out he=$WORK/sched_holder.err hdo=$WORK/sched_head.out hde=$WORK/sched_head.err

  echo "\$ gpulane run --gpus 0 --mem 30GiB --time-limit 1h -- python3 -c '<hold 1 GiB until told>' &"
  env "${RUN_ENV[@]}" timeout -k 5 "$limit" "$GL" run --gpus 0 --mem 30GiB --time-limit 1h -- \
    python3 -c "$SCHED_PY_HOLD" "$stop" 60 >"$ho" 2>"$he" &
  local holder=$!
  SCHED_BG=("$holder")
  local t=$SECONDS
  while ! grep -q '^holding' "$ho" 2>/dev/null; do
    if ! kill -0 "$holder" 2>/dev/null || [ $((SECONDS - t)) -ge 60 ]; then
      fail "the holder holds 1 GiB on GPU 0 (it $(kill -0 "$holder" 2>/dev/null && echo 'did not say so within 60 s' || echo exited))"
      sed 's/^/    /' "$ho"; sed 's/^/    stderr: /' "$he" | tail -8
      sched_bg_stop "$stop"; unset GPULANE_CONFIG; run_teardown; return
    fi
    sleep 0.1
  done
  local hu
  hu=$(awk '$1 == "uuid" {print $2}' "$ho")
  if [ "$(sched_norm "$hu")" = "$(sched_norm "$uuid0")" ]; then
    pass "holder (--mem 30GiB --time-limit 1h) holds 1 GiB on GPU 0 ($hu), ready after $((SECONDS - t)) s"
  else
    fail "holder runs on GPU 0 (torch says '$hu', GPU 0 is $uuid0)"
  fi

  echo "\$ gpulane run --gpus 0 -g 1 --timeout $((limit - 10))s -- python3 -c '<matmul>' &"
  local head_launch
  head_launch=$(date +%s.%N)
  env "${RUN_ENV[@]}" timeout -k 5 "$limit" "$GL" run --gpus 0 -g 1 --timeout "$((limit - 10))s" -- \
    python3 -c "$SCHED_PY_MATMUL" >"$hdo" 2>"$hde" &
  local head=$!
  SCHED_BG+=("$head")

  # Until the head is in line: a --mem job without a time limit is refused for its reservation.
  t=$SECONDS
  local n=0 waiting=0
  while [ $((SECONDS - t)) -lt 20 ]; do
    n=$((n + 1))
    env "${RUN_ENV[@]}" timeout -k 5 20 "$GL" run --no-wait --gpus 0 --mem 10GiB -- true >/dev/null 2>"$WORK/probe.err"
    RC=$?
    if [ "$RC" -eq 5 ] && grep -q "only a job with a --time-limit" "$WORK/probe.err"; then waiting=1; break; fi
    kill -0 "$head" 2>/dev/null || break
    sleep 0.1
  done
  echo "\$ gpulane run --no-wait --gpus 0 --mem 10GiB -- true   (try $n, after $((SECONDS - t)) s)"
  sed 's/^/    stderr: /' "$WORK/probe.err"; echo "    (exit $RC)"
  if [ "$waiting" -eq 1 ]; then
    pass "the waiting head reserves GPU 0: run --no-wait --mem 10GiB without a time limit exits 5, 'only a job with a --time-limit ...'"
  else
    fail "run --no-wait --mem 10GiB exits 5 'only a job with a --time-limit' once the head waits (exit $RC after $n tries)"
    sed 's/^/    head: /' "$hdo"; sed 's/^/    head stderr: /' "$hde" | tail -8
    sched_bg_stop "$stop"; unset GPULANE_CONFIG; run_teardown; return
  fi

  sched_gl -t 20 run --no-wait --gpus 0 --mem 10GiB --time-limit 2h -- true
  if [ "$RC" -eq 5 ] && grep -q "ends later" "$WORK/stderr"; then
    pass "run --no-wait --mem 10GiB --time-limit 2h exits 5: its time limit ends after the reservation starts"
  else
    fail "run --no-wait --mem 10GiB --time-limit 2h exits 5 with 'ends later' (exit $RC)"
  fi

  t=$SECONDS
  sched_gl -t "$(run_limit 60)" run --no-wait --gpus 0 --mem 10GiB --time-limit 10m -- python3 -c "$SCHED_PY_MATMUL"
  local bu bm
  bu=$(awk '$1 == "uuid" {print $2}' "$WORK/stdout")
  bm=$(awk '$1 == "matmul" {print $2}' "$WORK/stdout")
  if [ "$RC" -eq 0 ] && [ "$bm" = "1024.0" ] && [ "$(sched_norm "$bu")" = "$(sched_norm "$uuid0")" ]; then
    pass "backfill: run --no-wait --mem 10GiB --time-limit 10m ran a CUDA matmul on GPU 0 beside the holder (ones @ ones = $bm, $bu), exit 0 in $((SECONDS - t)) s"
  else
    fail "backfill: run --no-wait --mem 10GiB --time-limit 10m runs a matmul on GPU 0 (exit $RC, matmul '$bm', uuid '$bu')"
  fi

  if kill -0 "$head" 2>/dev/null && ! grep -q '^start' "$hdo"; then
    pass "the head (-g 1) still waits while the holder runs"
  else
    fail "the head (-g 1) still waits while the holder runs ($(kill -0 "$head" 2>/dev/null && echo 'its job started' || echo 'it exited'))"
  fi

  echo "ending the holder (touch $stop)"
  touch "$stop"
  wait "$holder"
  local hrc=$?
  sed 's/^/    holder: /' "$ho"; grep -v '^\s*$' "$he" | tail -4 | sed 's/^/    holder stderr: /'
  if [ "$hrc" -eq 0 ]; then pass "the holder ended with exit 0"; else fail "the holder ended with exit 0 (exit $hrc)"; fi
  wait "$head"
  local drc=$?
  SCHED_BG=()
  sed 's/^/    head: /' "$hdo"; grep -v '^\s*$' "$hde" | tail -4 | sed 's/^/    head stderr: /'
  local du dm
  du=$(awk '$1 == "uuid" {print $2}' "$hdo")
  dm=$(awk '$1 == "matmul" {print $2}' "$hdo")
  if [ "$drc" -eq 0 ] && [ "$dm" = "1024.0" ] && [ "$(sched_norm "$du")" = "$(sched_norm "$uuid0")" ]; then
    pass "the head ran once the holder ended: exit 0, matmul $dm on GPU 0"
  else
    fail "the head runs once the holder ended (exit $drc, matmul '$dm', uuid '$du')"
  fi
  local hend dstart
  hend=$(awk '$1 == "end" {print $2}' "$ho")
  dstart=$(awk '$1 == "start" {print $2}' "$hdo")
  if [ -n "$hend" ] && [ -n "$dstart" ]; then
    info "$(python3 -c 'import sys; e, s, l = map(float, sys.argv[1:]); print("the head job started %.0f ms after the holder job ended (gpulane hand-over + python3 start-up); it waited %.1f s in all from its launch" % ((s - e) * 1000, s - l))' "$hend" "$dstart" "$head_launch")$(grep -o 'got GPU.*' "$hde" | tail -1 | sed 's/^/; gpulane: /')"
  fi
  sched_sim_note "reservations and backfill"
  unset GPULANE_CONFIG
  run_teardown
}

# sched_user_daemon DIR: a fresh per-user daemon with its socket and state under DIR (emptied),
# exported for the gl/sched_gl calls that follow (GPULANE_SYSTEM_DAEMON=0); its pid in SCHED_DAEMON.
# Fails (and says so) when it does not listen within 10 s; the caller then tears down.
sched_user_daemon() {
  local d=$1
  rm -rf "$d"; mkdir -p "$d"
  export GPULANE_SYSTEM_DAEMON=0 GPULANE_SOCKET=$d/run/gpulane.sock GPULANE_STATE_DIR=$d/state
  echo "per-user daemon: GPULANE_SOCKET=$GPULANE_SOCKET GPULANE_STATE_DIR=$GPULANE_STATE_DIR"
  env "${RUN_ENV[@]}" timeout -k 5 "$(run_limit 120)" "$GL" daemon --user >"$d/daemon.log" 2>&1 &
  SCHED_DAEMON=$!
  for _ in $(seq 100); do [ -S "$GPULANE_SOCKET" ] && break; sleep 0.1; done  # (submit would start one of its own)
  if [ ! -S "$GPULANE_SOCKET" ]; then
    fail "the per-user daemon listens on $GPULANE_SOCKET within 10 s"
    sed 's/^/    daemon: /' "$d/daemon.log"
    kill -TERM "$SCHED_DAEMON" 2>/dev/null; wait "$SCHED_DAEMON" 2>/dev/null
    unset GPULANE_SYSTEM_DAEMON GPULANE_SOCKET GPULANE_STATE_DIR
    return 1
  fi
}

sec_sched_retry() {
  section "scheduling: submit --retry 2 of a CUDA job (per-user daemon)"
  if ! run_setup sched_retry || ! sched_free; then run_teardown; return; fi
  local d=$WORK/sched_retry uuid0
  uuid0=$(sched_uuid0)
  if ! sched_user_daemon "$d"; then run_teardown; return; fi
  local daemon=$SCHED_DAEMON
  local t=$SECONDS id
  sched_gl -t 20 submit --retry 2 -o "$d/retry.out" -e "$d/retry.err" -- python3 -c "$SCHED_PY_RETRY"
  id=$(tr -d '[:space:]' <"$WORK/stdout")
  if [ "$RC" -eq 0 ] && [[ "$id" =~ ^[0-9]+$ ]]; then
    pass "submit --retry 2 queues the job: id $id"
    run_cmd -t "$(run_limit 90)" "$GL" wait "$id"
    local took=$((SECONDS - t))
    if [ "$RC" -eq 0 ]; then
      pass "gpulane wait $id exits 0 (the retry succeeded) after $took s from the submit"
    else
      fail "gpulane wait $id exits 0 (exit $RC)"
    fi
    gl show --json "$id" >"$d/show.json" 2>"$d/show.err"
    run_cmd -t 20 "$GL" show "$id"
    echo "  $d/retry.out:"; sed 's/^/    /' "$d/retry.out" 2>/dev/null
    echo "  $d/retry.err:"; sed 's/^/    /' "$d/retry.err" 2>/dev/null
    python3 - "$d/show.json" "$d/retry.out" "$uuid0" <<'PY' | report_lines
import json, sys
norm = lambda u: (u or "").strip().lower().removeprefix("gpu-")
try:
    d = json.load(open(sys.argv[1]))
except Exception as e:
    print("FAIL gpulane show --json gives a JSON document (%s)" % e)
    sys.exit()
att = d.get("attempts", [])
print(("PASS" if d.get("state") == "completed" and d.get("exit_code") == 0 else "FAIL"),
      "the job is completed with exit code 0 (state %r, exit code %r)" % (d.get("state"), d.get("exit_code")))
codes = [a.get("exit_code") for a in att]
print(("PASS" if codes == [3, 0] else "FAIL"), "show --json lists 2 attempts with exit codes 3 then 0 (%s)" % codes)
lines = [l.split() for l in open(sys.argv[2]).read().splitlines() if l.strip()]
ok = len(lines) == 2 and len(att) == 2 and all(
    len(l) == 3 and l[0] == "retry" and l[1] == str(i) and a.get("gpu_uuids") and norm(l[2]) == norm(a["gpu_uuids"][0])
    for i, (l, a) in enumerate(zip(lines, att)))
print(("PASS" if ok else "FAIL"), "each attempt had a CUDA context on its GPU: the -o file has 2 lines 'retry N UUID', "
      "each UUID torch's = that attempt's GPU in show --json (%s)" % "; ".join(" ".join(l) for l in lines))
if len(att) == 2:
    print("INFO the retry started %.0f ms after the failed attempt ended; attempts ran on %s (GPU 0 is %s)" % (
        (att[1]["start_time"] - att[0]["end_time"]) * 1000, [a.get("gpu_uuids") for a in att], sys.argv[3]))
PY
  else
    fail "submit --retry 2 prints a job id (exit $RC, '$id')"
  fi
  kill -TERM "$daemon" 2>/dev/null; wait "$daemon" 2>/dev/null
  sed 's/^/    daemon: /' "$d/daemon.log"
  cp "$d/daemon.log" "$ART/sched_retry_daemon.log" 2>/dev/null
  sched_sim_note "retries"
  unset GPULANE_SYSTEM_DAEMON GPULANE_SOCKET GPULANE_STATE_DIR
  run_teardown
}

# A task of an array: inits CUDA, prints "task INDEX UUID RESULT" (a 64 x 64 matmul of ones: 64.0).
SCHED_PY_TASK='import os, torch
a = torch.ones(64, 64, device="cuda")
c = a @ a
torch.cuda.synchronize()
print("task", os.environ.get("GPULANE_ARRAY_INDEX"), torch.cuda.get_device_properties(0).uuid, c[0, 0].item(), flush=True)'

sec_sched_array() {
  section "scheduling: an array of 600 tasks, stored in 3 parts; one task of each part runs a CUDA job (per-user daemon)"
  if ! run_setup sched_array || ! sched_free; then run_teardown; return; fi
  local d=$WORK/sched_array uuid0
  uuid0=$(sched_uuid0)
  if ! sched_user_daemon "$d"; then run_teardown; return; fi
  local daemon=$SCHED_DAEMON id t0 t1
  t0=$(date +%s.%N)
  sched_gl -t 60 submit --hold --array 0-599 -o "$d/task-%a.out" -e "$d/task-%a.err" -- python3 -c "$SCHED_PY_TASK"
  t1=$(date +%s.%N)
  id=$(tr -d '[:space:]' <"$WORK/stdout")
  if [ "$RC" -eq 0 ] && [[ "$id" =~ ^[0-9]+$ ]]; then
    pass "submit --hold --array 0-599 answers the array's id $id in $(python3 -c 'import sys; print("%.0f" % ((float(sys.argv[2]) - float(sys.argv[1])) * 1000))' "$t0" "$t1") ms (the gpulane command, start to end)"
  else
    fail "submit --hold --array 0-599 prints the array's id (exit $RC, '$id')"
    kill -TERM "$daemon" 2>/dev/null; wait "$daemon" 2>/dev/null
    unset GPULANE_SYSTEM_DAEMON GPULANE_SOCKET GPULANE_STATE_DIR; run_teardown; return
  fi
  gl queue --json >"$d/queue.json" 2>"$d/queue.err"
  python3 - "$d/queue.json" "$id" <<'PY' | report_lines
import json, sys
first = int(sys.argv[2])
try:
    jobs = json.load(open(sys.argv[1]))
    jobs = jobs.get("jobs", jobs) if isinstance(jobs, dict) else jobs
except Exception as e:
    print("FAIL gpulane queue --json gives a JSON document (%s)" % e)
    sys.exit()
ok = (len(jobs) == 600 and [j.get("id") for j in jobs] == list(range(first, first + 600))
      and [j.get("array_index") for j in jobs] == list(range(600)) and all(j.get("state") == "held" for j in jobs))
print(("PASS" if ok else "FAIL"), "queue lists the 600 tasks held, ids %d to %d in a row, indices 0 to 599 (%d jobs)" % (
    first, first + 599, len(jobs)))
PY
  # One task of each part of 250 (0-249, 250-499, 500-599) runs; the others are cancelled.
  sched_gl -t 60 cancel "${id}_[1-249]" "${id}_[251-499]" "${id}_[501-599]"
  if [ "$RC" -eq 0 ]; then pass "cancel of 597 tasks by their array ids exits 0"; else fail "cancel of 597 tasks exits 0 (exit $RC)"; fi
  sched_gl -t 20 release "${id}_0" "${id}_250" "${id}_500"
  run_cmd -t "$(run_limit 120)" "$GL" wait "${id}_0" "${id}_250" "${id}_500"
  if [ "$RC" -eq 0 ]; then pass "tasks 0, 250 and 500 released and waited for: exit 0"; else fail "gpulane wait of tasks 0, 250, 500 exits 0 (exit $RC)"; fi
  local i line ok=1
  for i in 0 250 500; do
    line=$(cat "$d/task-$i.out" 2>/dev/null)
    echo "    task-$i.out: $line"
    read -r word index uuid result <<<"$line"
    if [ "$word" != task ] || [ "$index" != "$i" ] || [ "$result" != 64.0 ] || [ "$(sched_norm "$uuid")" != "$(sched_norm "$uuid0")" ]; then
      ok=0; sed 's/^/    task-'"$i"'.err: /' "$d/task-$i.err" 2>/dev/null | tail -4
    fi
  done
  if [ "$ok" = 1 ]; then
    pass "each ran its CUDA matmul on GPU 0 with its own GPULANE_ARRAY_INDEX (task N UUID 64.0 in task-N.out, torch's UUID = GPU 0's)"
  else
    fail "tasks 0, 250 and 500 each print 'task N <GPU 0 UUID> 64.0'"
  fi
  kill -TERM "$daemon" 2>/dev/null; wait "$daemon" 2>/dev/null
  cp "$d/daemon.log" "$ART/sched_array_daemon.log" 2>/dev/null
  unset GPULANE_SYSTEM_DAEMON GPULANE_SOCKET GPULANE_STATE_DIR
  run_teardown
}

# Holds 1 GiB on the GPU until SIGTERM; on SIGTERM prints "sigterm TIME" and exits 0 (a job that
# checkpoints when told to stop). Prints "holding UUID preempted=0|1" (GPULANE_PREEMPTED) once its
# memory is written.
SCHED_PY_UNTIL_TERM='import os, signal, sys, time
import torch
def stop(*_):
    print("sigterm %.3f" % time.time(), flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
x = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
x.fill_(1)
torch.cuda.synchronize()
print("holding", torch.cuda.get_device_properties(0).uuid, "preempted=%s" % os.environ.get("GPULANE_PREEMPTED", "0"), flush=True)
while True:
    time.sleep(0.05)'

# sched_closing_in SECONDS: exports TZ (a POSIX zone whose offset puts the local clock SECONDS
# before a minute's end) and sets SCHED_WINDOW to that local minute ("20:31-20:32") and
# SCHED_CLOSE_EPOCH to when it ends: a partition with that window closes SECONDS from now.
sched_closing_in() {
  local now off m
  now=$(date +%s)
  off=$(( ((60 - $1 - now % 60) % 60 + 60) % 60 ))
  TZ=$(printf 'GPL-0:00:%02d' "$off")
  export TZ
  m=$(( (now + off) % 86400 / 60 ))
  SCHED_WINDOW=$(printf '%02d:%02d-%02d:%02d' $((m / 60)) $((m % 60)) $(((m + 1) / 60)) $(((m + 1) % 60)))
  SCHED_CLOSE_EPOCH=$(( now + $1 ))
}

sec_sched_ends() {
  section "scheduling: partitions that end (ends = stop for run, requeue for a queued job) with PyTorch jobs on GPU 0"
  [ "$(id -u)" -eq 0 ] || { skip "needs root: [partitions] from GPULANE_CONFIG counts only in root's own file"; return; }
  if ! run_setup sched_ends || ! sched_free --gpus 0; then run_teardown; return; fi
  local uuid0 t got term
  uuid0=$(sched_uuid0)
  sched_closing_in 15
  sched_config sched_ends <<EOF
[partitions.closing]
gpus = [0]
windows = ["$SCHED_WINDOW"]
ends = "stop"
EOF
  info "TZ=$TZ: partition closing ($SCHED_WINDOW local time) closes in 15 s"
  t=$SECONDS
  sched_gl -t "$(run_limit 60)" run --partition closing --timeout 30s --kill-grace 5s -- python3 -c "$SCHED_PY_UNTIL_TERM"
  sed 's/^/    stdout: /' "$WORK/stdout"; grep -v '^\s*$' "$WORK/stderr" | tail -3 | sed 's/^/    stderr: /'
  got=$(awk '$1 == "holding" {print $2}' "$WORK/stdout")
  term=$(awk '$1 == "sigterm" {print $2}' "$WORK/stdout")
  if [ "$RC" -eq 0 ] && [ "$(sched_norm "$got")" = "$(sched_norm "$uuid0")" ] && [ -n "$term" ] &&
    grep -q 'the job was stopped: partition closing closed at .*(ends = "stop")' "$WORK/stderr"; then
    pass "run --partition closing (ends = stop): the CUDA job on GPU 0 got SIGTERM $(python3 -c 'import sys; print("%+.0f ms" % ((float(sys.argv[1]) - float(sys.argv[2])) * 1000))' "$term" "$SCHED_CLOSE_EPOCH") from the close, checkpointed and exited 0; run warned why, after $((SECONDS - t)) s"
  else
    fail "run --partition closing (ends = stop) stops its CUDA job at the close with a warning (exit $RC, uuid '$got', sigterm '$term')"
  fi
  if sched_free --gpus 0; then pass "GPU 0 is free again after the stopped job"; fi

  # A queued job, ends = "requeue": stopped at the close, back in line, waiting for the partition.
  local d=$WORK/sched_ends id n
  sched_closing_in 25
  sched_config sched_ends_requeue <<EOF
[partitions.closing]
gpus = [0]
windows = ["$SCHED_WINDOW"]
ends = "requeue"
EOF
  if ! sched_user_daemon "$d"; then unset TZ GPULANE_CONFIG; run_teardown; return; fi
  local daemon=$SCHED_DAEMON
  sched_gl -t 20 submit --partition closing --kill-grace 5s -o "$d/job.out" -e "$d/job.err" -- python3 -c "$SCHED_PY_UNTIL_TERM"
  id=$(tr -d '[:space:]' <"$WORK/stdout")
  for n in $(seq 400); do  # up to 40 s: the close is 25 s away
    gl show --json "$id" >"$d/show.json" 2>/dev/null
    # Back in line: not running, with its stopped attempt (show lists a running attempt too).
    [ "$(pyq "$d/show.json" 'd.get("state") in ("pending", "launching") and len(d.get("attempts", [])) == 1' 2>/dev/null)" = True ] && break
    sleep 0.1
  done
  sed 's/^/    job.out: /' "$d/job.out" 2>/dev/null
  python3 - "$d/show.json" "$uuid0" "$SCHED_CLOSE_EPOCH" <<'PY' | report_lines
import json, sys
norm = lambda u: (u or "").strip().lower().removeprefix("gpu-")
try:
    d = json.load(open(sys.argv[1]))
except Exception as e:
    print("FAIL gpulane show --json gives a JSON document (%s)" % e)
    sys.exit()
att = d.get("attempts", [])
ok = (len(att) == 1 and att[0].get("state") == "cancelled" and "partition closing closed at" in att[0].get("reason", "")
      and d.get("state") in ("pending", "launching") and att[0].get("gpu_uuids") and norm(att[0]["gpu_uuids"][0]) == norm(sys.argv[2]))
print(("PASS" if ok else "FAIL"), "the queued CUDA job (ends = requeue) was stopped at the close and is back in line: state %s, "
      "attempt 1 %s on %s, '%s'" % (d.get("state"), att[0].get("state") if att else None,
                                    att[0].get("gpu_uuids") if att else None, att[0].get("reason") if att else ""))
if att and att[0].get("end_time"):
    print("INFO its attempt ended %.0f ms after the close (SIGTERM, the job's checkpoint and exit, the release)" % (
        (att[0]["end_time"] - float(sys.argv[3])) * 1000))
PY
  if grep -q '^sigterm' "$d/job.out" 2>/dev/null; then pass "the queued job saw SIGTERM first (job.out has its 'sigterm' line)"; else fail "the queued job saw SIGTERM first (no 'sigterm' line in job.out)"; fi
  gl cancel "$id" >/dev/null 2>&1
  kill -TERM "$daemon" 2>/dev/null; wait "$daemon" 2>/dev/null
  cp "$d/daemon.log" "$ART/sched_ends_daemon.log" 2>/dev/null
  unset TZ GPULANE_CONFIG GPULANE_SYSTEM_DAEMON GPULANE_SOCKET GPULANE_STATE_DIR
  run_teardown
}

sec_sched_preempt() {
  section "scheduling: a --preemptible PyTorch job gives way to a normal one on GPU 0 and comes back (per-user daemon)"
  if ! run_setup sched_preempt || ! sched_free --gpus 0; then run_teardown; return; fi
  local d=$WORK/sched_preempt uuid0 pid nid n submitted
  uuid0=$(sched_uuid0)
  if ! sched_user_daemon "$d"; then run_teardown; return; fi
  local daemon=$SCHED_DAEMON
  sched_gl -t 20 submit --preemptible --gpus 0 --kill-grace 10s -o "$d/p.out" -e "$d/p.err" -- python3 -c "$SCHED_PY_UNTIL_TERM"
  pid=$(tr -d '[:space:]' <"$WORK/stdout")
  for n in $(seq 600); do grep -q '^holding' "$d/p.out" 2>/dev/null && break; sleep 0.1; done  # torch's import: seconds
  if grep -q '^holding.*preempted=0' "$d/p.out" 2>/dev/null; then
    pass "the preemptible job $pid holds 1 GiB on GPU 0 ($(awk '$1 == "holding" {print $2}' "$d/p.out"))"
  else
    fail "the preemptible job $pid runs on GPU 0 within 60 s"
  fi
  submitted=$(python3 -c 'import time; print("%.3f" % time.time())')
  sched_gl -t 20 submit --gpus 0 -o "$d/n.out" -e "$d/n.err" -- python3 -c "$SCHED_PY_MATMUL"
  nid=$(tr -d '[:space:]' <"$WORK/stdout")
  run_cmd -t "$(run_limit 90)" "$GL" wait "$nid"
  [ "$RC" -eq 0 ] && pass "the normal job $nid ran to the end (gpulane wait exits 0)" || fail "the normal job $nid ran to the end (wait: exit $RC)"
  for n in $(seq 600); do [ "$(grep -c '^holding' "$d/p.out" 2>/dev/null)" -ge 2 ] && break; sleep 0.1; done
  gl show --json "$pid" >"$d/show.json" 2>/dev/null
  grep -q '^gpulane: stopped after .*; it goes back in line (--preemptible=requeue)' "$d/p.err" 2>/dev/null &&
    pass "the preempted attempt's log says why: $(grep -m1 '^gpulane: stopped after' "$d/p.err")" ||
    fail "no 'gpulane: stopped after ...; it goes back in line' line in the preempted job's stderr"
  sed 's/^/    p.out: /' "$d/p.out" 2>/dev/null; sed 's/^/    p.err: /' "$d/p.err" 2>/dev/null; sed 's/^/    n.out: /' "$d/n.out" 2>/dev/null
  python3 - "$d/show.json" "$d/p.out" "$d/n.out" "$uuid0" "$submitted" <<'PY' | report_lines
import json, sys
norm = lambda u: (u or "").strip().lower().removeprefix("gpu-")
show, pout, nout, uuid0, submitted = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5])
try:
    d = json.load(open(show))
except Exception as e:
    print("FAIL gpulane show --json gives a JSON document (%s)" % e)
    sys.exit()
lines = [l.split() for l in open(pout).read().splitlines() if l.strip()]
holding = [l for l in lines if l[0] == "holding"]
sigterm = [float(l[1]) for l in lines if l[0] == "sigterm"]
n = {l.split()[0]: l.split()[1:] for l in open(nout).read().splitlines() if l.strip()}
att = d.get("attempts", [])
first = att[0] if att else {}
ok = first.get("preempted") is True and first.get("state") == "cancelled" and "preempted: " in first.get("reason", "")
print(("PASS" if ok else "FAIL"), "the preemptible job's first attempt was preempted: %s, '%s'" % (first.get("state"), first.get("reason")))
print(("PASS" if sigterm else "FAIL"), "it got SIGTERM first and checkpointed (its 'sigterm' line)")
ok = n.get("matmul") == ["1024.0"] and norm((n.get("uuid") or [""])[0]) == norm(uuid0)
print(("PASS" if ok else "FAIL"), "the normal job ran its matmul on GPU 0 (%s, matmul %s)" % ((n.get("uuid") or ["?"])[0], (n.get("matmul") or ["?"])[0]))
ok = len(holding) >= 2 and holding[1][-1] == "preempted=1" and norm(holding[1][1]) == norm(uuid0) and d.get("state") == "running"
print(("PASS" if ok else "FAIL"), "requeued once and restarted on GPU 0 with GPULANE_PREEMPTED=1 after the normal job (state %s, %d attempts, %s)" % (
    d.get("state"), len(att), " / ".join(" ".join(h[1:]) for h in holding)))
if sigterm and first.get("end_time") and n.get("start"):
    t_term, t_end, t_start = sigterm[0], first["end_time"], float(n["start"][0])
    print("INFO submit to SIGTERM %.0f ms (the preemptible job looks every second); SIGTERM to the attempt's end %.0f ms "
          "(its checkpoint, exit and CUDA teardown); that end to the normal job's python3 start %.0f ms (hand-over and "
          "python3 start-up); submit to start %.0f ms" % ((t_term - submitted) * 1000, (t_end - t_term) * 1000,
                                                         (t_start - t_end) * 1000, (t_start - submitted) * 1000))
PY
  gl cancel "$pid" >/dev/null 2>&1
  kill -TERM "$daemon" 2>/dev/null; wait "$daemon" 2>/dev/null
  cp "$d/daemon.log" "$ART/sched_preempt_daemon.log" 2>/dev/null
  sched_sim_note "preemption"
  unset GPULANE_SYSTEM_DAEMON GPULANE_SOCKET GPULANE_STATE_DIR
  run_teardown
}

sec_sched_fairrun() {
  section "scheduling: fair share for gpulane run: a light user's later run gets GPU 0 before a heavy user's waiting one (system daemon)"
  [ "$(id -u)" -eq 0 ] || { skip "needs root: a system daemon and a second user"; return; }
  if ! run_setup sched_fairrun || ! sched_free --gpus 0; then run_teardown; return; fi
  local d=/tmp/gpulane-fairrun-acc.$$ daemon a1 a2 b n uuid0
  uuid0=$(sched_uuid0)
  rm -rf "$d"; mkdir -m 0755 "$d" && mkdir -m 0777 "$d/b" && mkdir -m 1777 "$d/leases"
  queue_second_user "$d/b"
  local py=$QUEUE_PY
  echo "second user: $QUEUE_USER_B (uid $QUEUE_UID_B)"
  export GPULANE_LEASE_DIR=$d/leases GPULANE_SOCKET=$d/run/gpulane.sock GPULANE_STATE_DIR=$d/state
  sched_config fairrun <<'TOML'
[telemetry]
interval = "500ms"
[web]
listen = "off"
TOML
  env "${RUN_ENV[@]}" timeout -k 5 "$(run_limit 150)" "$GL" daemon >"$d/daemon.log" 2>&1 &
  daemon=$!
  for _ in $(seq 100); do [ -S "$GPULANE_SOCKET" ] && break; sleep 0.1; done  # (a client call would start a daemon of its own)
  # Every thread of the daemon, libnvidia-ml's own included, blocks SIGTERM (bit 15 of SigBlk), so
  # that a stop is always taken by its signalfd and never by a thread where it would kill it.
  local dpid t unblocked=""
  dpid=$(pgrep -P "$daemon" -f "daemon" | head -1)
  for t in /proc/"$dpid"/task/*; do
    echo "    daemon thread $(basename "$t") $(cat "$t/comm" 2>/dev/null): $(grep SigBlk "$t/status" 2>/dev/null)"
    (( (16#$(awk '/SigBlk/ {print $2}' "$t/status" 2>/dev/null || echo 0) >> 14) & 1 )) || unblocked+=" $(basename "$t")"
  done
  [ -n "$dpid" ] && [ -z "$unblocked" ] && pass "every thread of the daemon (pid $dpid) blocks SIGTERM" ||
    fail "every thread of the daemon (pid ${dpid:-?}) blocks SIGTERM (not:${unblocked:- no daemon found})"
  # root (the heavy user) holds GPU 0 with a torch job until the gate file exists.
  env "${RUN_ENV[@]}" timeout -k 5 "$(run_limit 120)" "$GL" run --gpus 0 -- "$py" -c "$SCHED_PY_HOLD" "$d/gate" 90 \
    >"$d/a1.out" 2>"$d/a1.err" &
  a1=$!
  for n in $(seq 600); do grep -q '^holding' "$d/a1.out" 2>/dev/null && break; sleep 0.1; done  # torch's import: seconds
  grep -q '^holding' "$d/a1.out" 2>/dev/null && pass "root's gpulane run holds 1 GiB on GPU 0" || fail "root's gpulane run holds GPU 0 within 60 s"
  # The daemon meters that run as root's use and publishes root's factor to the lease line.
  for n in $(seq 300); do
    [ "$(pyq "$d/leases/fair-share.json" 'd["factors"].get("root", 1) < 1' 2>/dev/null)" = True ] && break
    sleep 0.1
  done
  sed 's/^/    fair-share.json: /' "$d/leases/fair-share.json" 2>/dev/null; echo
  [ "$(pyq "$d/leases/fair-share.json" 'd["factors"].get("root", 1) < 1' 2>/dev/null)" = True ] &&
    pass "the system daemon published root's fair-share factor below 1 (its gpulane run counted)" ||
    fail "the system daemon publishes root's fair-share factor within 30 s"
  # root's second run waits first, the second user's after it.
  env "${RUN_ENV[@]}" timeout -k 5 "$(run_limit 120)" "$GL" run --gpus 0 -- "$py" -c "$SCHED_PY_MATMUL" >"$d/a2.out" 2>"$d/a2.err" &
  a2=$!
  for n in $(seq 300); do [ "$(find "$d/leases" -name '*.wait' | wc -l)" -ge 1 ] && break; sleep 0.1; done
  as_b env "${RUN_ENV[@]}" timeout -k 5 "$(run_limit 120)" "$GL" run --gpus 0 -- "$py" -c "$SCHED_PY_MATMUL" >"$d/b.out" 2>"$d/b.err" &
  b=$!
  for n in $(seq 300); do [ "$(find "$d/leases" -name '*.wait' | wc -l)" -ge 2 ] && break; sleep 0.1; done
  [ "$(find "$d/leases" -name '*.wait' | wc -l)" -eq 2 ] && pass "both runs wait for GPU 0 (root's first)" || fail "both runs wait for GPU 0"
  python3 -c 'import time; print("%.3f" % time.time())' >"$d/gate.t"
  touch "$d/gate"
  wait "$a1" "$a2" "$b"
  for f in a1.out a1.err a2.out a2.err b.out b.err; do sed "s/^/    $f: /" "$d/$f" 2>/dev/null; done
  python3 - "$d" "$uuid0" "$QUEUE_USER_B" <<'PY' | report_lines
import sys
d, uuid0, user_b = sys.argv[1], sys.argv[2], sys.argv[3]
norm = lambda u: (u or "").strip().lower().removeprefix("gpu-")
def lines(name):
    try:
        return {l.split()[0]: l.split()[1:] for l in open("%s/%s" % (d, name)).read().splitlines() if l.strip()}
    except OSError:
        return {}
a1, a2, b = lines("a1.out"), lines("a2.out"), lines("b.out")
gate = float(open(d + "/gate.t").read())
ok = all(x.get("matmul") == ["1024.0"] and norm(x.get("uuid", [""])[0]) == norm(uuid0) for x in (a2, b))
print(("PASS" if ok else "FAIL"), "both waiting runs ran their CUDA matmul on GPU 0 (%s: %s, root: %s)" % (
    user_b, b.get("matmul"), a2.get("matmul")))
if "start" in a2 and "start" in b:
    tb, ta = float(b["start"][0]), float(a2["start"][0])
    print(("PASS" if tb < ta else "FAIL"), "%s's later run started before root's earlier one (%.3f s before)" % (user_b, ta - tb))
    if "end" in a1 and "end" in b:
        e1, eb = float(a1["end"][0]), float(b["end"][0])
        print("INFO gate to the holder's last line %.0f ms; that to %s's python3 start %.0f ms (the holder's exit and CUDA "
              "teardown, gpulane's hand-over, python3's start-up); %s's end line to root's python3 start %.0f ms" % (
                  (e1 - gate) * 1000, user_b, (tb - e1) * 1000, user_b, (ta - eb) * 1000))
else:
    print("FAIL both waiting runs printed their start (%s: %s, root: %s)" % (user_b, "start" in b, "start" in a2))
PY
  kill -TERM "$daemon" 2>/dev/null; wait "$daemon" 2>/dev/null
  local drc=$?
  [ "$drc" -eq 0 ] && grep -q 'stopped; running jobs go on' "$d/daemon.log" &&
    pass "SIGTERM stops the daemon cleanly (exit 0, 'stopped' logged)" || fail "SIGTERM stops the daemon cleanly (exit $drc)"
  [ -e "$d/leases/fair-share.json" ] && fail "the daemon removes fair-share.json when it stops" || pass "the daemon removes fair-share.json when it stops"
  cp "$d/daemon.log" "$ART/sched_fairrun_daemon.log" 2>/dev/null
  sched_sim_note "fair-share order of gpulane run"
  unset GPULANE_SOCKET GPULANE_STATE_DIR GPULANE_CONFIG
  run_teardown
}

sec_sched_mig() {
  section "MIG: MIG mode as NVML reports it, and --mig on GPUs without MIG mode"
  if ! run_setup sched_mig; then run_teardown; return; fi
  gl status --json >"$WORK/mig_status.json" 2>/dev/null
  "${RUN_SMI[@]}" --query-gpu=uuid,mig.mode.current --format=csv,noheader >"$WORK/mig_smi.csv" 2>/dev/null
  sed 's/^/    nvidia-smi: /' "$WORK/mig_smi.csv"
  python3 - "$WORK/mig_status.json" "$WORK/mig_smi.csv" <<'PY' | report_lines
import json, sys
d = json.load(open(sys.argv[1]))
smi = {}
for line in open(sys.argv[2]):
    parts = [p.strip() for p in line.split(",")]
    if len(parts) == 2: smi[parts[0].lower()] = parts[1]
rows, ok = [], True
for g in d.get("gpus", []):
    want = {"Enabled": True, "Disabled": False}.get(smi.get(g["uuid"].lower()))
    rows.append("GPU%d %s: gpulane %s, nvidia-smi %s" % (g["index"], g["uuid"], g.get("mig_enabled"), smi.get(g["uuid"].lower())))
    ok = ok and want is not None and g.get("mig_enabled") is want
print(("PASS" if ok and rows else "FAIL"), "MIG mode read through NVML equals nvidia-smi's for every GPU (%s)" % "; ".join(rows))
PY
  if [ "$(pyq "$WORK/mig_status.json" 'any(g.get("mig_enabled") for g in d["gpus"])')" = False ]; then
    sched_gl -t 20 pick --mig 1g.18gb
    if [ "$RC" -eq 2 ] && grep -q 'no GPU here is in MIG mode' "$WORK/stderr"; then
      pass "pick --mig 1g.18gb on GPUs without MIG mode exits 2 and says so"
    else
      fail "pick --mig 1g.18gb on GPUs without MIG mode exits 2 and says so (exit $RC)"
    fi
  else
    info "a GPU here is in MIG mode: --mig leasing is not checked by this section yet"
  fi
  run_teardown
}

SECTIONS+=(sched_partition sched_backfill sched_retry sched_array sched_ends sched_preempt sched_fairrun sched_mig)
