#!/bin/bash
# A real Slurm cluster on this one host for the tests (issue 12, item 5): munged, slurmctld and two
# slurmd node names (n1, n2: one host, `slurmd -N`), each with two fake GPUs, all under DIR. No
# systemd, no /etc: every path, port and key is DIR's; works as root and as a normal user (then
# SlurmUser and every job's user is the caller).
#
#   tests/slurm/cluster.sh start DIR   # prints nothing on success; DIR/env holds SLURM_CONF=...
#   tests/slurm/cluster.sh stop DIR
#
# The fake GPUs' File= are character devices made with mknod (root), else symbolic links under DIR
# to /dev/null and /dev/zero: slurmd 22.05 refuses plain files ("not a valid character or block
# device", and the job gets no GPU indices), follows links, and with TaskPlugin=task/none never
# restricts the device. Needs Debian's slurmctld, slurmd, slurm-client, munge.
set -euo pipefail

cmd=${1:?usage: cluster.sh start|stop DIR}
dir=${2:?usage: cluster.sh start|stop DIR}
fail() { echo "slurm test cluster: $*" >&2; exit 1; }

stop() {
  for p in slurmd-n1 slurmd-n2 slurmctld munged; do
    [ -f "$dir/run/$p.pid" ] || continue
    pid=$(cat "$dir/run/$p.pid" 2>/dev/null || true)
    [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
  done
  # slurmd leaves slurmstepd children only while jobs run; they end with their job.
  return 0
}

if [ "$cmd" = stop ]; then stop; exit 0; fi
[ "$cmd" = start ] || fail "unknown command $cmd (start or stop)"

for tool in munged mungekey slurmctld slurmd sbatch squeue scontrol; do
  command -v "$tool" >/dev/null 2>&1 || [ -x "/usr/sbin/$tool" ] ||
    fail "$tool not found: install Debian's slurmctld slurmd slurm-client munge (scripts/test.sh does)"
done
export PATH="$PATH:/usr/sbin"

mkdir -p "$dir"/{run,log,state,spool/n1,spool/n2,dev,munge}
chmod 700 "$dir/munge"
user=$(id -un)
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
ctld_port=$(free_port); n1_port=$(free_port); n2_port=$(free_port)

# munge: its own key, socket, pid and log (--force: DIR may sit in a world-writable /tmp).
mungekey -c -k "$dir/munge/munge.key" -b 1024 2>/dev/null || dd if=/dev/urandom of="$dir/munge/munge.key" bs=128 count=1 2>/dev/null
chmod 400 "$dir/munge/munge.key"
munged --force --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.socket" \
  --pid-file="$dir/run/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/munge/seed" ||
  fail "munged did not start: $(tail -3 "$dir/log/munged.log" 2>/dev/null)"

# The fake GPUs.
for n in n1 n2; do
  for i in 0 1; do
    f="$dir/dev/$n-nvidia$i"
    [ -e "$f" ] && continue
    # slurmd refuses a plain file ("not a valid character or block device"); a normal user cannot
    # mknod, so it gets symbolic links to character devices anyone may stat (/dev/null, /dev/zero).
    if [ "$(id -u)" = 0 ]; then mknod "$f" c 195 "$i"; else ln -s "$([ "$i" = 0 ] && echo /dev/null || echo /dev/zero)" "$f"; fi
  done
done

cat > "$dir/slurm.conf" <<EOF
ClusterName=gpulanetest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmUser=$user
SlurmdUser=$user
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu,shard
ReturnToService=2
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1,sched_min_interval=100000
MinJobAge=300
KillWait=2
InactiveLimit=0
MessageTimeout=5
SlurmdTimeout=30
PropagateResourceLimits=NONE
NodeName=n1 NodeAddr=127.0.0.1 NodeHostname=$(hostname) Port=$n1_port CPUs=2 RealMemory=1000 Gres=gpu:2,shard:8 State=UNKNOWN
NodeName=n2 NodeAddr=127.0.0.1 NodeHostname=$(hostname) Port=$n2_port CPUs=2 RealMemory=1000 Gres=gpu:2,shard:8 State=UNKNOWN
PartitionName=gpu Nodes=n1,n2 Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
PartitionName=other Nodes=n1,n2 Default=NO MaxTime=INFINITE State=UP
EOF
cat > "$dir/gres.conf" <<EOF
NodeName=n1 Name=gpu File=$dir/dev/n1-nvidia[0-1]
NodeName=n2 Name=gpu File=$dir/dev/n2-nvidia[0-1]
NodeName=n[1-2] Name=shard Count=8
EOF
echo "SLURM_CONF=$dir/slurm.conf" > "$dir/env"
export SLURM_CONF="$dir/slurm.conf"

slurmctld -i -f "$SLURM_CONF" || fail "slurmctld did not start: $(tail -5 "$dir/log/slurmctld.log" 2>/dev/null)"
for n in n1 n2; do
  slurmd -N "$n" -f "$SLURM_CONF" || fail "slurmd -N $n did not start: $(tail -5 "$dir/log/slurmd-$n.log" 2>/dev/null)"
done

# Ready when both nodes are idle (polled, 20 s at most).
for _ in $(seq 200); do
  idle=$(sinfo -h -N -p gpu -o '%N %t' 2>/dev/null | grep -c ' idle$' || true)
  [ "$idle" = 2 ] && exit 0
  sleep 0.1
done
fail "the nodes did not become idle within 20 s: $(sinfo -h -N -o '%N %t %E' 2>&1 | tr '\n' ';') $(tail -3 "$dir/log/slurmd-n1.log" 2>/dev/null)"
