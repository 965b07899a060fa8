# shellcheck shell=bash
# Telemetry section of scripts/gpu-acceptance.sh (sourced; uses its helpers and $GL, $WORK, $ART, $ROOT):
#   telemetry  a per-user daemon samples the real GPU (telemetry.interval 250 ms); a PyTorch job run
#              through `gpulane run` (8 GiB, 20 s of bf16 matmuls) gets its usage line, and its
#              usage record (GPU-seconds, energy from NVML's counter, peak memory, mean utilisation)
#              is compared with nvidia-smi sampled beside it (scripts/acceptance/check_telemetry.py);
#              then a job that holds 2 GiB and sleeps must raise an `idle` event (anomaly.idle_after
#              5 s) naming it; NVML's telemetry fields must be there (energy, clocks, reasons).
# Time: about 45 s on 1 x H200. Needs nvidia-smi and PyTorch (skipped in a dry run).

sec_telemetry() {
  section "telemetry: a PyTorch job's usage against nvidia-smi; an idle lease raised"
  [ -n "$GL" ] || { skip "no gpulane binary"; return; }
  [ "$DRY" -eq 0 ] || { skip "needs nvidia-smi and PyTorch ($DRY_WHY)"; return; }
  unset CUDA_VISIBLE_DEVICES CUDA_DEVICE_ORDER
  local t=/tmp/gpulane-telemetry-acc.$$
  rm -rf "$t"; mkdir -p "$t/state" && mkdir -m 1777 "$t/leases"
  printf '[telemetry]\ninterval = "250ms"\n[anomaly]\nidle_after = "5s"\n' >"$t/config.toml"
  local saved_env
  saved_env=$(export -p | grep -E 'GPULANE_(LEASE_DIR|SOCKET|STATE_DIR|CONFIG|SYSTEM_DAEMON)=' || true)
  export GPULANE_LEASE_DIR=$t/leases GPULANE_SOCKET=$t/gl.sock GPULANE_STATE_DIR=$t/state GPULANE_CONFIG=$t/config.toml \
    GPULANE_SYSTEM_DAEMON=0
  "$GL" daemon --user >"$t/daemon.log" 2>&1 &
  local daemon_pid=$!
  for _ in $(seq 100); do [ -S "$GPULANE_SOCKET" ] && break; sleep 0.1; done
  [ -S "$GPULANE_SOCKET" ] && pass "daemon with the sampler started" || { fail "no daemon socket"; cat "$t/daemon.log"; return; }

  # NVML's telemetry fields on this GPU (absent would mean unsupported: reported, not failed).
  python3 - "$GPULANE_SOCKET" >"$t/telemetry.json" <<'PY'
import json, socket, struct, sys, time
def call(req):
    s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
    body = json.dumps({"v": 2, **req}).encode(); s.sendall(struct.pack(">I", len(body)) + body)
    n = struct.unpack(">I", s.recv(4, socket.MSG_WAITALL))[0]; data = b""
    while len(data) < n: data += s.recv(n - len(data))
    return json.loads(data)
for _ in range(50):
    r = call({"op": "telemetry"})
    if r.get("gpus") and "reading" in r["gpus"][0]: break
    time.sleep(0.1)
print(json.dumps(r))
PY
  local fields
  fields=$(pyq "$t/telemetry.json" '",".join(k for k in ("energy_mj","clock_sm_mhz","clock_mem_mhz","clocks_event_reasons","power_mw","temperature_c") if k in d["gpus"][0].get("reading",{}))')
  info "GPU 0's sampled fields: $fields"
  case "$fields" in *energy_mj*clock_sm_mhz*) pass "NVML gives the energy counter and clocks on this GPU" ;; *) fail "energy or clocks missing: $fields" ;; esac

  nvidia-smi --query-gpu=timestamp,power.draw,utilization.gpu,memory.used -i 0 --format=csv,noheader,nounits -lms 200 \
    >"$t/smi_gpu.csv" 2>/dev/null &
  local smi_gpu=$!
  nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits -lms 200 >"$t/smi_apps.csv" 2>/dev/null &
  local smi_apps=$!
  export TORCH_JOB_LOG=$t/jobs.log
  run_cmd -t 120 "$GL" run -g 1 -- python3 "$ROOT/scripts/acceptance/torch_job.py" 8 --seconds 20
  kill "$smi_gpu" "$smi_apps" 2>/dev/null; wait "$smi_gpu" "$smi_apps" 2>/dev/null
  [ "$RC" -eq 0 ] && pass "the PyTorch job ran (exit 0)" || fail "the job exited $RC"
  local line
  line=$(grep -E '^gpulane: job r[0-9]+ used 1 GPU for ' "$WORK/stderr" | tail -1)
  [ -n "$line" ] && pass "run printed its usage line: ${line#gpulane: }" || fail "no usage line on run's stderr"
  local job_id job_pid
  job_id=$(sed -n 's/^gpulane: job \(r[0-9]*\) used.*/\1/p' <<<"$line")
  job_pid=$(python3 -c 'import json,sys; [print(r["pid"]) for r in map(json.loads, open(sys.argv[1])) if r["event"]=="start"]' "$t/jobs.log" | tail -1)
  # Its record once the sampler has seen the lease end.
  local record=$t/record.json
  for _ in $(seq 40); do
    gl report --by job --json >"$t/report.json" 2>/dev/null && [ "$(pyq "$t/report.json" 'len(d["rows"])')" -ge 1 ] && break
    sleep 0.25
  done
  python3 - "$GPULANE_SOCKET" "$job_id" >"$record" <<'PY'
import json, socket, struct, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
body = json.dumps({"v": 2, "op": "usage", "job_id": sys.argv[2]}).encode(); s.sendall(struct.pack(">I", len(body)) + body)
n = struct.unpack(">I", s.recv(4, socket.MSG_WAITALL))[0]; data = b""
while len(data) < n: data += s.recv(n - len(data))
print(json.dumps(json.loads(data).get("record", {})))
PY
  python3 "$ROOT/scripts/acceptance/check_telemetry.py" "$record" "$t/smi_gpu.csv" "$t/smi_apps.csv" "$job_pid" | report_lines
  run_cmd "$GL" report --by job
  cp "$t/smi_gpu.csv" "$ART/telemetry_smi_gpu.csv" 2>/dev/null
  cp "$record" "$ART/telemetry_record.json" 2>/dev/null

  # An idle lease: CUDA initialised, 2 GiB held, nothing computed for 15 s.
  local started=$SECONDS
  run_cmd -t 60 "$GL" run -g 1 -- python3 -c \
    'import torch,time; x=torch.ones(2**29, device="cuda"); torch.cuda.synchronize(); print("holding 2 GiB, idle", flush=True); time.sleep(15)'
  local idle_id
  idle_id=$(gl events --json | python3 -c 'import json,sys; d=json.load(sys.stdin); [print(e["job_id"], e["message"]) for e in d["events"] if e["kind"]=="idle"]' | tail -1)
  info "idle event: $idle_id (job took $((SECONDS - started)) s)"
  case "$idle_id" in r[0-9]*" has used GPU "*" under 5 % for 5.0 s"*) pass "an idle lease raised its event: ${idle_id#* }" ;; *) fail "no idle event for the sleeping job" ;; esac
  run_cmd "$GL" events
  kill "$daemon_pid" 2>/dev/null; wait "$daemon_pid" 2>/dev/null
  cp "$t/daemon.log" "$ART/telemetry_daemon.log" 2>/dev/null
  unset GPULANE_LEASE_DIR GPULANE_SOCKET GPULANE_STATE_DIR GPULANE_CONFIG GPULANE_SYSTEM_DAEMON TORCH_JOB_LOG
  eval "$saved_env"
  rm -rf "$t"
}

SECTIONS+=(telemetry)
