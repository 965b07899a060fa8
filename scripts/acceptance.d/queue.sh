# shellcheck shell=bash
# Daemon section of scripts/gpu-acceptance.sh (sourced; uses its helpers and $GL, $WORK, $ART, $ROOT):
#   queue  12 PyTorch jobs from two users through a system-mode daemon (an --array of 4, 4 --mem
#          jobs sharing, an --after dependency, plain -g 1 jobs); the daemon is killed with SIGKILL
#          and restarted while jobs run; every job must complete once with exit code 0, its log
#          written with its user's rights, and no exclusive job may overlap another job on a GPU.
# Needs root (a system daemon that runs jobs as their users). The second user is created with
# useradd when missing (gpulane-acc), else 'nobody' is used. Time: about 1.5 min on 1 x H200.

QUEUE_SECONDS=${QUEUE_SECONDS:-4}

# queue_second_user HOME_DIR: a second user for the two-user sections (root is the first): sets
# QUEUE_USER_B, QUEUE_UID_B, QUEUE_PY (a python3 both users may run: root's own may live under
# /root) and defines `as_b CMD...` (CMD as that user in HOME_DIR). With the fake NVML (a dry run, or
# scripts/acceptance-selftest.sh's stand-in driver), that user's jobs must read and update the fake
# state too, so it is opened to them.
queue_second_user() {
  if [ -n "${FAKE_NVML_STATE:-}" ]; then
    chmod 777 "$WORK" && chmod 777 "$(dirname "$FAKE_NVML_STATE")" && chmod 666 "$FAKE_NVML_STATE" &&
      touch "$(dirname "$FAKE_NVML_STATE")/$(basename "$FAKE_NVML_STATE").lock" "$WORK/fake_state.json.lock" &&
      chmod 666 "$(dirname "$FAKE_NVML_STATE")/$(basename "$FAKE_NVML_STATE").lock" "$WORK/fake_state.json.lock"
  fi
  QUEUE_USER_B=gpulane-acc
  id "$QUEUE_USER_B" >/dev/null 2>&1 || useradd -M -N -s /bin/sh "$QUEUE_USER_B" >/dev/null 2>&1 || QUEUE_USER_B=nobody
  QUEUE_UID_B=$(id -u "$QUEUE_USER_B")
  QUEUE_B_HOME=$1
  as_b() { (cd "$QUEUE_B_HOME" && setpriv --reuid="$QUEUE_UID_B" --regid="$(id -g "$QUEUE_USER_B")" --init-groups env HOME="$QUEUE_B_HOME" "$@"); }
  QUEUE_PY=$(command -v python3)
  as_b test -x "$QUEUE_PY" || QUEUE_PY=/usr/bin/python3
}

sec_queue() {
  section "queue: 12 jobs, 2 users, daemon killed and restarted"
  [ -n "$GL" ] || { skip "no gpulane binary"; return; }
  [ "$(id -u)" -eq 0 ] || { skip "needs root for a system daemon"; return; }
  unset CUDA_VISIBLE_DEVICES CUDA_DEVICE_ORDER
  local q=/tmp/gpulane-queue-acc.$$
  rm -rf "$q"; mkdir -m 0755 "$q" "$q/a" && mkdir -m 0777 "$q/b" && mkdir -m 1777 "$q/leases"
  export GPULANE_LEASE_DIR=$q/leases GPULANE_SOCKET=$q/run/gpulane.sock GPULANE_STATE_DIR=$q/state
  export TORCH_JOB_LOG=$q/jobs.log
  [ "$DRY" -eq 1 ] && export PYTHONPATH=$ROOT/scripts/acceptance-selftest${PYTHONPATH:+:$PYTHONPATH}
  touch "$TORCH_JOB_LOG" && chmod 666 "$TORCH_JOB_LOG"
  queue_second_user "$q/b"
  local user_b=$QUEUE_USER_B uid_b=$QUEUE_UID_B py=$QUEUE_PY
  echo "second user: $user_b (uid $uid_b); daemon state $GPULANE_STATE_DIR"
  local job=("$py" "$ROOT/scripts/acceptance/torch_job.py")

  "$GL" daemon >"$q/daemon1.log" 2>&1 &
  local daemon_pid=$!
  for _ in $(seq 100); do [ -S "$GPULANE_SOCKET" ] && break; sleep 0.1; done  # (a client call would start a daemon of its own)
  local ids=() id
  cd "$q/a" || return
  id=$(gl submit --array 0-3 --name arr -- "${job[@]}" 2 --seconds "$QUEUE_SECONDS") && ids+=("$id" $((id + 1)) $((id + 2)) $((id + 3)))
  local array_id=$id
  for _ in 1 2; do id=$(gl submit --name plain -- "${job[@]}" 2 --seconds "$QUEUE_SECONDS") && ids+=("$id"); done
  for _ in 1 2 3 4; do id=$(as_b "$GL" submit --mem 30GiB --name shared -- "${job[@]}" 10 --seconds "$QUEUE_SECONDS") && ids+=("$id"); done
  id=$(as_b "$GL" submit --name b-plain -- "${job[@]}" 2 --seconds "$QUEUE_SECONDS") && ids+=("$id")
  id=$(as_b "$GL" submit --after "$array_id" --name after -- "${job[@]}" 1 --seconds 1) && ids+=("$id")
  local after_id=$id
  cd "$ROOT" || return
  echo "submitted ${#ids[@]} jobs: ${ids[*]} (array $array_id, dependent $after_id)"
  [ "${#ids[@]}" -eq 12 ] && pass "12 jobs acknowledged" || fail "only ${#ids[@]} of 12 submissions acknowledged"

  # Let jobs start, then kill the daemon while they run.
  for _ in $(seq 200); do grep -q '"event": "start"' "$TORCH_JOB_LOG" && break; sleep 0.2; done
  sleep 2
  run_cmd "$GL" queue
  kill -9 "$daemon_pid"; wait "$daemon_pid" 2>/dev/null
  local running
  running=$(pgrep -fc "_supervise $q/state/jobs" || true)
  echo "daemon killed with SIGKILL; supervisors still alive: $running"
  [ "${running:-0}" -gt 0 ] && pass "jobs go on while the daemon is down ($running supervisors)" || fail "no supervisor survived the daemon"
  sleep 3
  rm -f "$GPULANE_SOCKET"  # the killed daemon's socket file, so the wait below sees the new one
  "$GL" daemon >"$q/daemon2.log" 2>&1 &
  daemon_pid=$!
  for _ in $(seq 100); do [ -S "$GPULANE_SOCKET" ] && break; sleep 0.1; done  # (a client call would start a daemon of its own)
  sed 's/^/    daemon2: /' "$q/daemon2.log" | head -3
  run_cmd -t 300 "$GL" wait "${ids[@]}"
  [ "$RC" -eq 0 ] && pass "gpulane wait: every job ended with exit code 0" || fail "gpulane wait exited $RC"
  gl queue --all --json >"$q/queue.json"
  run_cmd "$GL" queue --all
  kill "$daemon_pid"; wait "$daemon_pid" 2>/dev/null
  cat "$q/daemon1.log" "$q/daemon2.log" >"$ART/queue_daemon.log" 2>/dev/null
  cp "$TORCH_JOB_LOG" "$ART/queue_jobs.log" 2>/dev/null
  python3 "$ROOT/scripts/acceptance/check_queue.py" --queue "$q/queue.json" --log "$TORCH_JOB_LOG" \
    --ids "${ids[*]}" --after "$after_id" --array "$array_id" --uid-b "$uid_b" --dir-a "$q/a" --dir-b "$q/b" | report_lines
  unset GPULANE_SOCKET GPULANE_STATE_DIR TORCH_JOB_LOG
  [ "$DRY" -eq 1 ] && unset PYTHONPATH
}

SECTIONS+=(queue)
