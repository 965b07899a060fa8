# shellcheck shell=bash
# Declared memory section of scripts/gpu-acceptance.sh (sourced; uses its helpers and $GL, $WORK, $ART, $ROOT):
#   memguard  a per-user daemon (telemetry.interval 1 s, anomaly.overuse_grace 5 s) runs two
#             `--mem 30GiB` PyTorch jobs on GPU 0 (scripts/acceptance/memguard_job.py): both hold
#             20 GiB; one grows to 45 GiB (1.5x its declaration). The other must complete (exit 0),
#             the grower must be stopped: failed, exit 18, "memory over declaration" in show/queue,
#             an `overuse` event; the time from its growth to its end is printed. Then the PyTorch
#             courtesy: a grower that imported gpulane.auto fails its own allocation (exit 3)
#             before gpulane has to stop it. -> $OUT/memguard.txt
#             Dry run: the same two jobs against the fake NVML (they write their memory into its
#             state), no courtesy check (python/tests/test_torch_memory.py covers it with a stub).
# Time: about 45 s on 1 x H100/H200. Needs nvidia-smi and PyTorch, or the fake NVML.

memguard_wait_end() {  # ID LIMIT_S: waits until job ID has ended; its show --json in $t/show-ID.json
  local id=$1 limit=$2 start=$SECONDS
  while [ $((SECONDS - start)) -lt "$limit" ]; do
    gl show --json "$id" >"$t/show-$id.json" 2>/dev/null &&
      case "$(pyq "$t/show-$id.json" 'd["state"]')" in completed | failed | cancelled | timeout) return 0 ;; esac
    sleep 0.5
  done
  return 1
}

sec_memguard() {
  section "memguard: a --mem job over its declaration is stopped; its neighbour completes"
  [ -n "$GL" ] || { skip "no gpulane binary"; return; }
  local t=/tmp/gpulane-memguard-acc.$$ fake=() saved_state=${FAKE_NVML_STATE:-}
  rm -rf "$t"; mkdir -p "$t/state" "$t/work" && mkdir -m 1777 "$t/leases"
  if [ "$DRY" -eq 1 ]; then
    [ -n "$FAKE_BASE_STATE" ] || { skip "dry run without the fake NVML"; return; }
    cp "$FAKE_BASE_STATE" "$t/nvml.json"
    export FAKE_NVML_STATE=$t/nvml.json
    fake=(--fake "$t/nvml.json")
    info "dry run: the jobs write their memory into the fake NVML's state"
  elif ! python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
    skip "needs PyTorch with CUDA"; return
  fi
  unset CUDA_VISIBLE_DEVICES CUDA_DEVICE_ORDER
  printf '[telemetry]\ninterval = "1s"\n[anomaly]\noveruse_grace = "5s"\n' >"$t/config.toml"
  local saved_env
  saved_env=$(export -p | grep -E 'GPULANE_(LEASE_DIR|SOCKET|STATE_DIR|CONFIG|SYSTEM_DAEMON|BIN)=|PYTHONPATH=' || true)
  export GPULANE_LEASE_DIR=$t/leases GPULANE_SOCKET=$t/gl.sock GPULANE_STATE_DIR=$t/state GPULANE_CONFIG=$t/config.toml \
    GPULANE_SYSTEM_DAEMON=0 GPULANE_BIN=$GL PYTHONPATH=$ROOT/python${PYTHONPATH:+:$PYTHONPATH}
  "$GL" daemon --user >"$t/daemon.log" 2>&1 &
  local daemon_pid=$!
  for _ in $(seq 100); do [ -S "$GPULANE_SOCKET" ] && break; sleep 0.1; done
  [ -S "$GPULANE_SOCKET" ] && pass "daemon started (1 s sampling, overuse_grace 5 s)" || { fail "no daemon socket"; cat "$t/daemon.log"; return; }

  local job=$ROOT/scripts/acceptance/memguard_job.py steady grower
  cd "$t/work" || return
  steady=$(gl submit --mem 30GiB --gpus 0 --name steady -- python3 "$job" --hold 20 --seconds 25 "${fake[@]}")
  grower=$(gl submit --mem 30GiB --gpus 0 --name grower -- python3 "$job" --hold 20 --grow 45 --after 5 --seconds 120 "${fake[@]}")
  cd "$ROOT" || return
  info "submitted: steady job $steady, grower $grower (both --mem 30GiB on GPU 0)"
  memguard_wait_end "$grower" 90 || fail "the grower did not end within 90 s"
  memguard_wait_end "$steady" 60 || fail "the steady job did not end within 60 s"
  run_cmd "$GL" queue --all
  cp "$WORK/stdout" "$ART/memguard.txt" 2>/dev/null
  local g=$t/show-$grower.json s=$t/show-$steady.json
  [ "$(pyq "$s" 'd["state"], d.get("exit_code")')" = "('completed', 0)" ] &&
    pass "the neighbour completed (exit 0)" || fail "the neighbour: $(pyq "$s" 'd["state"], d.get("exit_code"), d.get("reason")')"
  [ "$(pyq "$s" 'd.get("gpu_uuids")')" = "$(pyq "$g" 'd.get("gpu_uuids")')" ] &&
    pass "both ran on the same GPU" || fail "not on one GPU: $(pyq "$s" 'd.get("gpu_uuids")') / $(pyq "$g" 'd.get("gpu_uuids")')"
  local reason
  reason=$(pyq "$g" 'd.get("reason", "")')
  if [ "$(pyq "$g" 'd["state"], d.get("exit_code")')" = "('failed', 18)" ] && [[ "$reason" == "memory over declaration: "* ]]; then
    pass "the grower was stopped: exit 18, $reason"
  else
    fail "the grower: $(pyq "$g" 'd["state"], d.get("exit_code")') $reason"
  fi
  local log grown end_line
  log=$(pyq "$g" 'd["logs"].get("stdout_path", "")')
  end_line=$(grep -m1 '^gpulane: stopped after .*memory over declaration' \
    "$(pyq "$g" 'd["logs"].get("stderr_path") or d["logs"].get("stdout_path", "")')" 2>/dev/null)
  [ -n "$end_line" ] && pass "the grower's log says why it ended: $end_line" ||
    fail "no 'gpulane: stopped after ...: memory over declaration' line in the grower's log"
  grown=$(sed -n 's/^grown to 45 GiB at //p' "$log" 2>/dev/null | head -1)
  if [ -n "$grown" ]; then
    info "grower: grown at $grown, ended at $(pyq "$g" 'd.get("end_time")'): $(pyq "$g" "round(d.get('end_time', 0) - $grown, 2)") s, grace 5 s"
    echo "crossing to end: $(pyq "$g" "round(d.get('end_time', 0) - $grown, 2)") s (overuse_grace 5 s, 1 s sampling)" >>"$ART/memguard.txt"
  fi
  gl events --json >"$t/events.json"
  [ "$(pyq "$t/events.json" "any(e['kind'] == 'overuse' and e['job_id'] == '$grower' for e in d['events'])")" = True ] &&
    pass "an overuse event names the grower" || fail "no overuse event for job $grower"
  run_cmd "$GL" events
  cat "$WORK/stdout" >>"$ART/memguard.txt"

  if [ "$DRY" -eq 0 ]; then  # the PyTorch courtesy: torch itself refuses the growth
    cd "$t/work" || return
    local polite
    polite=$(gl submit --mem 30GiB --gpus 0 --name courtesy -- python3 "$job" --courtesy --hold 20 --grow 45 --after 1 --seconds 30)
    cd "$ROOT" || return
    memguard_wait_end "$polite" 60 || fail "the courtesy job did not end"
    local p=$t/show-$polite.json plog
    plog=$(pyq "$p" 'd["logs"].get("stdout_path", "")')
    if [ "$(pyq "$p" 'd.get("exit_code")')" = 3 ] && grep -q '^PyTorch refused the growth' "$plog"; then
      pass "with gpulane.auto PyTorch refused the growth itself (exit 3): $(grep -m1 '^PyTorch refused' "$plog" | cut -c1-120)"
    else
      fail "courtesy job: $(pyq "$p" 'd["state"], d.get("exit_code"), d.get("reason")'); $(tail -3 "$plog" 2>/dev/null | tr '\n' ' ')"
    fi
  fi
  kill "$daemon_pid" 2>/dev/null; wait "$daemon_pid" 2>/dev/null
  cp "$t/daemon.log" "$ART/memguard_daemon.log" 2>/dev/null
  unset GPULANE_LEASE_DIR GPULANE_SOCKET GPULANE_STATE_DIR GPULANE_CONFIG GPULANE_SYSTEM_DAEMON GPULANE_BIN PYTHONPATH
  eval "$saved_env"
  if [ -n "$saved_state" ]; then export FAKE_NVML_STATE=$saved_state; fi
  rm -rf "$t"
}

SECTIONS+=(memguard)
