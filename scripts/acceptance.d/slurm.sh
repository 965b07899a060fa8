# shellcheck shell=bash
# Slurm node section of scripts/gpu-acceptance.sh (sourced; uses its helpers and $GL, $WORK, $ART):
#   slurm  a PyTorch process holding 4 GiB on GPU 0 and left running (as a job that leaves a child
#          behind would): `gpulane slurm prolog` refuses the GPU (exit 17); `gpulane slurm epilog`,
#          called as slurmd calls it (SLURM_JOB_ID, SLURM_JOB_GPUS, SLURM_JOB_UID), ends it and exits
#          0 once the driver freed its memory (nvidia-smi lists no process on GPU 0 afterwards); the
#          prolog then passes. Also `gpulane slurm gres-conf` -> $OUT/slurm.txt. Then, as a batch
#          script of a Slurm job holding GPU 0 (SLURM_JOB_ID, SLURMD_NODENAME, SLURM_JOB_GPUS=0),
#          `gpulane run -g 1` gives PyTorch that GPU by UUID; a list naming no GPU here gives none.
# Time: about 20 s on 1 x H200.

sec_slurm() {
  section "Slurm node guard: gres-conf, prolog and epilog with a PyTorch process left on GPU 0"
  [ -n "$GL" ] || { skip "no gpulane binary"; return; }
  unset CUDA_VISIBLE_DEVICES CUDA_DEVICE_ORDER
  local d=$WORK/slurm
  rm -rf "$d"; mkdir -p "$d"
  {
    echo "\$ gpulane slurm gres-conf"; timeout -k 5 30 "$GL" slurm gres-conf 2>&1
  } >"$ART/slurm.txt"
  grep -q '^Name=gpu Type=.* File=/dev/nvidia[0-9]' "$ART/slurm.txt" && pass "gres-conf wrote File= lines" || fail "gres-conf: no File= line"
  [ "$DRY" -eq 0 ] || { skip "the leftover, the epilog and the Slurm job need nvidia-smi and PyTorch ($DRY_WHY)"; return; }
  local minor0
  minor0=$(nvidia-smi -i 0 --query-gpu=pci.bus_id --format=csv,noheader 2>/dev/null)
  info "GPU 0 is $minor0"

  # The leftover: a detached PyTorch process with 4 GiB on GPU 0, idle.
  CUDA_VISIBLE_DEVICES=0 setsid python3 -c 'import torch,time; x=torch.ones(2**30, device="cuda"); torch.cuda.synchronize(); open("'"$d"'/ready","w").close(); time.sleep(300)' \
    >"$d/left.out" 2>&1 < /dev/null &
  local left=$!
  local i
  for i in $(seq 120); do [ -f "$d/ready" ] && break; sleep 0.25; done
  [ -f "$d/ready" ] || { fail "the PyTorch leftover did not start: $(tail -2 "$d/left.out")"; kill -9 "$left" 2>/dev/null; return; }
  local envs=(SLURM_JOB_ID=4242 SLURM_JOB_GPUS=0 SLURM_JOB_UID="$(id -u)")
  local seen
  seen=$(wc -l <"$ART/slurm.txt")
  echo "\$ SLURM_JOB_GPUS=0 gpulane slurm prolog" >>"$ART/slurm.txt"
  env "${envs[@]}" timeout -k 5 30 "$GL" slurm prolog >>"$ART/slurm.txt" 2>&1
  local rc=$?
  tail -n +$((seen + 1)) "$ART/slurm.txt"  # the command and its output, once
  [ "$rc" -eq 17 ] && grep -q "pid $left" "$ART/slurm.txt" && pass "prolog refused GPU 0 held by pid $left (exit 17)" \
    || fail "prolog exit $rc with the leftover on GPU 0"
  seen=$(wc -l <"$ART/slurm.txt")
  echo "\$ SLURM_JOB_GPUS=0 gpulane slurm epilog --grace 5 --settle 20" >>"$ART/slurm.txt"
  local t0=$EPOCHREALTIME
  env "${envs[@]}" timeout -k 5 60 "$GL" slurm epilog --grace 5 --settle 20 >>"$ART/slurm.txt" 2>&1
  rc=$?
  local took
  took=$(python3 -c "print(f'{($EPOCHREALTIME - $t0):.2f}')")
  tail -n +$((seen + 1)) "$ART/slurm.txt"
  [ "$rc" -eq 0 ] && pass "epilog ended the leftover and found GPU 0 free in ${took} s (exit 0)" \
    || fail "epilog exit $rc after ${took} s"
  kill -0 "$left" 2>/dev/null && { fail "pid $left still runs after the epilog"; kill -9 "$left"; } || pass "pid $left is gone"
  local smi
  smi=$(nvidia-smi -i 0 --query-compute-apps=pid --format=csv,noheader 2>/dev/null | grep -c "^$left$")
  [ "$smi" = 0 ] && pass "nvidia-smi lists no process $left on GPU 0" || fail "nvidia-smi still lists pid $left"
  env "${envs[@]}" timeout -k 5 30 "$GL" slurm prolog >>"$ART/slurm.txt" 2>&1
  rc=$?
  [ "$rc" -eq 0 ] && pass "prolog passes on the freed GPU" || fail "prolog exit $rc after the epilog: $(tail -1 "$ART/slurm.txt")"
  wait "$left" 2>/dev/null

  # Inside a Slurm job (issue 12, item 3): the job's GPU from SLURM_JOB_GPUS, handed on by UUID;
  # PyTorch in the job sees exactly that GPU.
  local uuid0 job_env=(SLURM_JOB_ID=4243 SLURMD_NODENAME="$(hostname)" SLURM_JOB_GPUS=0)
  uuid0=$(nvidia-smi -i 0 --query-gpu=uuid --format=csv,noheader 2>/dev/null)
  run_cmd -t 90 env "${job_env[@]}" "$GL" run -g 1 -- python3 -c \
    'import os, torch; print(os.environ["CUDA_VISIBLE_DEVICES"], "GPU-" + str(torch.cuda.get_device_properties(0).uuid), torch.cuda.device_count())'
  [ "$RC" -eq 0 ] && [ "$(cat "$WORK/stdout")" = "$uuid0 $uuid0 1" ] \
    && pass "in a Slurm job holding GPU 0, run handed PyTorch GPU 0 by UUID ($uuid0)" \
    || fail "run in a Slurm job: exit $RC, printed '$(cat "$WORK/stdout")', expected '$uuid0 $uuid0 1'"
  # count+1 indices from `count` on: beyond this node's GPUs, and not as many as NVML shows (which
  # would read as a cgroup hiding the node's other GPUs).
  local count beyond
  count=$(nvidia-smi -L | wc -l)
  beyond=$(seq -s, "$count" $((2 * count)))
  run_cmd -t 30 env "${job_env[@]/SLURM_JOB_GPUS=0/SLURM_JOB_GPUS=$beyond}" "$GL" pick
  [ "$RC" -ne 0 ] && [ ! -s "$WORK/stdout" ] && grep -q "no GPU is used" "$WORK/stderr" \
    && pass "a Slurm list naming no GPU of this node leaves pick without a GPU (exit $RC)" \
    || fail "pick with SLURM_JOB_GPUS=$beyond on $count GPU(s): exit $RC, '$(cat "$WORK/stdout")'"
}

SECTIONS+=(slurm)
