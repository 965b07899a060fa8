#!/usr/bin/env bash
# How fast gpulane's job queue takes work, measured in ONE run against baselines measured in the
# same run, on the machine at hand (made for a small CI-like machine without a GPU):
#   1. durable submissions per second through the socket: 1, 4 and 8 client processes, each with
#      a persistent connection, submitting held jobs one request at a time for 5 s (bench/
#      queue_client.py flood); each against a fresh daemon that is then killed with SIGKILL, and
#      the rows in its jobs.db must equal the acknowledged submissions. Beside it: Slurm's
#      documented 1,000/s and the disk's floor measured just before each (one fsync'd SQLite
#      commit per row, same file system).
#      Then, with strace if installed, the fdatasync calls the daemon makes for 2 s of submissions;
#      and after (3), 4 clients again against the daemon that has 100,000 held jobs queued.
#   2. `gpulane submit --hold -- true`, N (300) one after another, beside `tsp true` (task-spooler,
#      `tsp -S 1` with a long first job so the rest stay queued) and `sbatch -H --wrap true` (a
#      one-node Slurm this script brings up; skipped with a note if it is not up within 60 s).
#   3. `gpulane queue` and `gpulane queue --json` (output discarded; median of 10) with 10,000 and
#      100,000 held jobs queued (one held array request each: 10,000, then 90,000 more), beside
#      `squeue -r` with as many held array tasks and `sqlite3 jobs.db 'SELECT * FROM jobs'`; then,
#      with 100,000, how long a `ping` on another connection waits while each listing is answered
#      (bench/queue_client.py ping-during: the worst of the pings sent meanwhile).
#   4. hand-over: A `sh -c 'sleep 0.3; date +%s.%N > a_end'` and B `sh -c 'date +%s.%N > b_start'`
#      submitted back to back, one usable GPU (the fake's GPU1 runs a foreign process); latency =
#      b_start - a_end, median over R rounds; beside it the same with `tsp -S 1`.
# Prints a markdown report (preamble + one table) on stdout; progress and errors on stderr.
#
# Usage: bench/queue_throughput.sh [--clients "1 4 8"] [--seconds S] [-n N] [--queue-runs Q]
#                                  [--rounds R] [--no-tsp] [--no-slurm] [--keep]
#   --clients L    client counts for (1), space-separated (default "1 4 8"); --seconds S each (default 5)
#   -n N           sequential submissions per tool for (2) (default 300), in 3 interleaved chunks
#   --queue-runs Q timed runs of each listing for (3) (default 10, after 2 warm-ups)
#   --rounds R     hand-over rounds for (4), each for gpulane and tsp (default 20, after 2 warm-ups)
#   --no-tsp, --no-slurm   leave those baselines out
#   --keep         keep the work folder (daemon logs, databases, the JSON of every measurement)
#
# NVML: always the fake (build/fake_nvml/current/libnvidia-ml.so.1 with a copy of the recorded
# 2 x H200 fixture whose recorded process, on GPU1, gets an unused pid), also where a driver is
# installed: what is measured here is the queue, and (4) needs a known state with one usable GPU.
# Daemon state folders (jobs.db) go to a fresh temporary folder under ${TMPDIR:-/tmp}, which should
# be on a disk like /var/lib/gpulane (the preamble says which file system); leases to a fresh
# tmpfs folder (mode 1777) like /run/gpulane/leases. Needs root only for Slurm (munged, slurmctld,
# slurmd, the /dev/fakegpuN nodes); Debian: apt-get install -y task-spooler slurm-wlm munge sqlite3.
# Everything it starts it stops, by pid, at the end. gpulane: $GPULANE if set (describe its build
# in $GPULANE_BUILD for the preamble), else .carry/bin/gpulane (with LD_LIBRARY_PATH=.carry/lib),
# else build/gpulane.
set -euo pipefail
cd "$(dirname "$0")/.."

clients="1 4 8"
seconds=5
n=300
queue_runs=10
rounds=20
use_tsp=1
use_slurm=1
keep=0
while (($#)); do
  case "$1" in
    --clients) clients=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    -n) n=$2; shift 2 ;;
    --queue-runs) queue_runs=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --no-tsp) use_tsp=0; shift ;;
    --no-slurm) use_slurm=0; shift ;;
    --keep) keep=1; shift ;;
    -h | --help) sed -n '2,/^set -euo/{/^set -euo/!s/^# \{0,1\}//p}' "$0"; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done

if [ -n "${GPULANE:-}" ]; then
  gl=$GPULANE
elif [ -x .carry/bin/gpulane ]; then
  gl=$PWD/.carry/bin/gpulane
  export LD_LIBRARY_PATH="$PWD/.carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
else
  gl=$PWD/build/gpulane
fi
[ -x "$gl" ] || { echo "error: no gpulane binary ($gl); run scripts/make-carry.sh or build" >&2; exit 1; }
command -v sqlite3 >/dev/null || { echo "error: sqlite3 is needed for the durability check (apt-get install -y sqlite3)" >&2; exit 1; }
qc=(python3 "$PWD/bench/queue_client.py")

tmp=$(mktemp -d "${TMPDIR:-/tmp}/queue-throughput.XXXXXX")
results=$tmp/results
mkdir -p "$results"
lease_dir=""
daemon_pid=""
tsp_bin=""
tsp_sockets=()
tsp_long_pid=""
slurm_pids=()
munged_pid=""
slurm_conf=""
cleanup() {
  set +e
  [ -z "$daemon_pid" ] || { kill -TERM "$daemon_pid" 2>/dev/null; wait "$daemon_pid" 2>/dev/null; }
  [ -z "$tsp_long_pid" ] || kill -TERM "$tsp_long_pid" 2>/dev/null
  for s in "${tsp_sockets[@]}"; do TS_SOCKET=$s "$tsp_bin" -K >/dev/null 2>&1; done
  if [ -n "$slurm_conf" ]; then
    SLURM_CONF=$slurm_conf timeout 10 scancel --user="$(id -un)" >/dev/null 2>&1
  fi
  for p in "${slurm_pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for p in "${slurm_pids[@]}"; do for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done; done
  [ -z "$munged_pid" ] || kill -TERM "$munged_pid" 2>/dev/null
  # Job supervisors of (4) are done by now; any other process left in the work folder is ours.
  if [ "$keep" -eq 1 ]; then echo "work folder kept: $tmp" >&2; else rm -rf "$tmp"; fi
  rm -rf "${lease_dir:-/nonexistent}"
}
trap cleanup EXIT
log() { echo "[$(date +%H:%M:%S)] $*" >&2; }

# ---------------------------------------------------------------- fake NVML
fixture=$PWD/tests/fixtures/h200x2-2026-11-30/nvml_snapshot.json
nvml_lib=$PWD/build/fake_nvml/current/libnvidia-ml.so.1
[ -f "$nvml_lib" ] || { echo "error: no fake NVML at $nvml_lib (cmake --build build)" >&2; exit 1; }
[ -f "$fixture" ] || { echo "error: no fixture $fixture" >&2; exit 1; }
# The recorded process (pid 673, on GPU1) gets a pid that no process here has, so it stays
# "another container's process": GPU1 is not leased without --share-foreign, GPU0 is the one GPU.
python3 - "$fixture" "$tmp/fake_state.json" <<'PY'
import json, os, sys
d = json.load(open(sys.argv[1]))
pid_max = int(open("/proc/sys/kernel/pid_max").read())
free = (p for p in range(pid_max - 1, 300, -1) if not os.path.exists(f"/proc/{p}"))
for dev in d["devices"]:
    for p in dev.get("processes", []):
        p["pid"] = next(free)
json.dump(d, open(sys.argv[2], "w"), indent=1)
PY
export GPULANE_NVML_LIBRARY=$nvml_lib FAKE_NVML_STATE=$tmp/fake_state.json
: >"$tmp/config.toml"
export GPULANE_CONFIG=$tmp/config.toml  # no user configuration of this machine's users
unset CUDA_VISIBLE_DEVICES

for base in /run /dev/shm; do
  if [ -d "$base" ] && [ -w "$base" ] && [ "$(stat -f -c %T "$base" 2>/dev/null)" = tmpfs ]; then
    lease_dir=$(mktemp -d "$base/gpulane-bench-leases.XXXXXX") && break
  fi
done
[ -n "$lease_dir" ] || lease_dir=$(mktemp -d "$tmp/leases.XXXXXX")
chmod 1777 "$lease_dir"
export GPULANE_LEASE_DIR=$lease_dir

# ---------------------------------------------------------------- daemons
# start_daemon NAME: a fresh daemon with its own socket and state folder under $tmp/NAME.
start_daemon() {
  local d=$tmp/$1
  mkdir -p "$d/work"
  export GPULANE_SOCKET=$d/sock GPULANE_STATE_DIR=$d/state
  "$gl" daemon --user >"$d/daemon.log" 2>&1 &
  daemon_pid=$!
  daemon_dir=$d
  # Not `gpulane queue`: a client that finds no daemon starts one itself.
  for _ in $(seq 200); do
    python3 -c 'import socket, sys; s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])' "$d/sock" 2>/dev/null && return 0
    kill -0 "$daemon_pid" 2>/dev/null || break
    sleep 0.05
  done
  echo "error: the daemon did not come up: $(tail -3 "$d/daemon.log")" >&2
  exit 1
}
stop_daemon() {  # stop_daemon [KILL]
  kill -"${1:-TERM}" "$daemon_pid"
  wait "$daemon_pid" 2>/dev/null || true
  daemon_pid=""
}

# ---------------------------------------------------------------- Slurm (root only)
slurm_note=""
start_slurm() {
  local s=$tmp/slurm
  local t0=$SECONDS
  for tool in munged slurmctld slurmd sbatch squeue scancel; do
    command -v "$tool" >/dev/null || { slurm_note="Slurm not installed (no $tool; Debian: apt-get install -y slurm-wlm munge)"; return 1; }
  done
  [ "$(id -u)" -eq 0 ] || { slurm_note="needs root to start munged, slurmctld and slurmd"; return 1; }
  [ -r /etc/munge/munge.key ] || { slurm_note="no /etc/munge/munge.key"; return 1; }
  mkdir -p "$s/state" "$s/spool" "$s/munge"
  chmod 700 "$s/munge"
  install -m 600 /etc/munge/munge.key "$s/munge/munge.key"
  for i in 0 1 2 3; do [ -e /dev/fakegpu$i ] || mknod /dev/fakegpu$i c 1 3; done
  munged -f -S "$s/munge/sock" --key-file="$s/munge/munge.key" --pid-file="$s/munge/pid" \
    --log-file="$s/munge/log" --seed-file="$s/munge/seed" 2>"$s/munged.err" ||
    { slurm_note="munged did not start: $(head -1 "$s/munged.err")"; return 1; }
  munged_pid=$(cat "$s/munge/pid")
  # Free ports for slurmctld and slurmd, so a Slurm someone else runs here is not disturbed.
  read -r p1 p2 < <(python3 -c '
import socket
ss = [socket.socket() for _ in range(2)]
for s in ss: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in ss])')
  slurm_conf=$s/slurm.conf
  cat >"$slurm_conf" <<EOF
ClusterName=gpulanebench
SlurmctldHost=localhost
SlurmctldPort=$p1
SlurmdPort=$p2
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$s/munge/sock
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$s/state
SlurmdSpoolDir=$s/spool
SlurmctldPidFile=$s/slurmctld.pid
SlurmdPidFile=$s/slurmd.pid
SlurmctldLogFile=$s/slurmctld.log
SlurmdLogFile=$s/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
GresTypes=gpu
MaxJobCount=200000
MaxArraySize=100001
NodeName=localhost CPUs=$(nproc) Gres=gpu:4 State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF
  echo "Name=gpu File=/dev/fakegpu[0-3]" >"$s/gres.conf"
  export SLURM_CONF=$slurm_conf
  slurmctld -f "$slurm_conf" 2>"$s/slurmctld.err" || { slurm_note="slurmctld did not start: $(tail -1 "$s/slurmctld.err")"; return 1; }
  for _ in $(seq 50); do [ -s "$s/slurmctld.pid" ] && break; sleep 0.1; done
  slurm_pids+=("$(cat "$s/slurmctld.pid")")
  slurmd -f "$slurm_conf" -N localhost 2>"$s/slurmd.err" || { slurm_note="slurmd did not start: $(tail -1 "$s/slurmd.err")"; return 1; }
  for _ in $(seq 50); do [ -s "$s/slurmd.pid" ] && break; sleep 0.1; done
  slurm_pids+=("$(cat "$s/slurmd.pid")")
  while ((SECONDS - t0 < 60)); do
    if [ "$(sinfo -h -o %T 2>/dev/null)" = idle ]; then
      slurm_version=$(sinfo -V 2>/dev/null)
      return 0
    fi
    sleep 0.5
  done
  slurm_note="the one-node cluster was not idle within 60 s: $(sinfo -h 2>&1 | head -1); $(tail -1 "$s/slurmctld.log" 2>/dev/null)"
  return 1
}
slurm_up=0
if [ "$use_slurm" -eq 0 ]; then
  slurm_note="left out (--no-slurm)"
else
  log "Slurm: starting munged, slurmctld, slurmd ..."
  if start_slurm; then slurm_up=1; else log "Slurm skipped: $slurm_note"; fi
fi

# ---------------------------------------------------------------- task-spooler
tsp_note=""
if [ "$use_tsp" -eq 0 ]; then
  tsp_note="left out (--no-tsp)"
elif ! command -v tsp >/dev/null; then
  tsp_note="task-spooler not installed (Debian/Ubuntu: apt-get install -y task-spooler)"
else
  tsp_bin=$(command -v tsp)
fi
# start_tsp NAME: its own one-slot server, socket and output files in $tmp/NAME.
start_tsp() {
  mkdir -p "$tmp/$1"
  tsp_sockets+=("$tmp/$1/sock")
  TS_SOCKET=$tmp/$1/sock TMPDIR=$tmp/$1 "$tsp_bin" -S 1 >/dev/null
}

# ---------------------------------------------------------------- preamble
if [ "$gl" -ef .carry/bin/gpulane ]; then
  build_commit=$(sed -n 's/^commit: //p' .carry/BUILD_INFO 2>/dev/null || true)
else
  build_commit="${GPULANE_BUILD:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- src 2>/dev/null || echo ' + uncommitted changes in src/') (working tree now; the binary may be older), $(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' build/CMakeCache.txt 2>/dev/null || echo '?')}"
fi
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
fs_state="$(df --output=fstype "$tmp" | tail -1) ($(df --output=source "$tmp" | tail -1))"

# ---------------------------------------------------------------- 1. concurrent durable submissions
for c in $clients; do
  # The floor right before each flood: this disk's fdatasync time drifts with what else the host does.
  log "1. disk floor: fsync'd SQLite commits for 1.5 s ..."
  "${qc[@]}" sqlite-commits --dir "$tmp" --seconds 1.5 >"$results/sqlite_floor_$c.json"
  log "1. flood: $c client(s) for $seconds s against a fresh daemon ..."
  start_daemon "flood-$c"
  rc=0
  "${qc[@]}" flood --socket "$GPULANE_SOCKET" --clients "$c" --seconds "$seconds" --cwd "$daemon_dir/work" >"$results/flood_$c.json" || rc=$?
  [ "$rc" -eq 0 ] || log "flood with $c clients reported errors: $(cat "$results/flood_$c.json")"
  stop_daemon KILL  # a crash: what was acknowledged must be in the file
  rows=$(sqlite3 "$daemon_dir/state/jobs.db" 'SELECT count(*) FROM jobs')
  jm=$(sqlite3 "$daemon_dir/state/jobs.db" 'PRAGMA journal_mode')
  printf '{"rows": %s, "journal_mode": "%s"}\n' "$rows" "$jm" >"$results/flood_${c}_durable.json"
done
journal_mode=$jm
sqlite3_sync=$(sqlite3 "$daemon_dir/state/jobs.db" 'PRAGMA synchronous')
fsync_line="strace not installed"
if command -v strace >/dev/null; then
  log "1. fdatasync calls of the daemon for 2 s of submissions (4 clients, under strace) ..."
  start_daemon fsync
  strace -f -c -e trace=fsync,fdatasync,sync_file_range -o "$daemon_dir/strace.txt" -p "$daemon_pid" 2>"$daemon_dir/strace.err" &
  strace_pid=$!
  sleep 0.5
  "${qc[@]}" flood --socket "$GPULANE_SOCKET" --clients 4 --seconds 2 --cwd "$daemon_dir/work" >"$results/fsync_flood.json" || true
  kill -INT "$strace_pid"
  wait "$strace_pid" 2>/dev/null || true
  stop_daemon
  fsync_line=$(python3 - "$daemon_dir/strace.txt" "$results/fsync_flood.json" <<'PY'
import json, sys
calls = {}
for line in open(sys.argv[1]):
    w = line.split()
    if len(w) >= 5 and w[-1] in ("fsync", "fdatasync", "sync_file_range") and w[3].isdigit():
        calls[w[-1]] = int(w[3])
acked = json.load(open(sys.argv[2]))["acked"]
n = sum(calls.values())
print(f"{', '.join(f'{v} {k}' for k, v in calls.items()) or 'no fsync calls'} for {acked} acknowledged submissions "
      f"(4 clients, 2 s, slowed by strace): {acked / n:.1f} submissions per sync" if n else
      f"**no fsync/fdatasync at all** for {acked} acknowledged submissions")
PY
)
fi

# ---------------------------------------------------------------- 2. one after another, CLI
log "2. sequential submissions: $n each ..."
start_daemon sequential
cases=(--case gpulane "$gl submit --hold -- true")
if [ -n "$tsp_bin" ]; then
  start_tsp ts-seq
  export TS_SOCKET=$tmp/ts-seq/sock
  tsp_first=$(TMPDIR=$tmp/ts-seq "$tsp_bin" sleep 3600)
  for _ in $(seq 50); do tsp_long_pid=$("$tsp_bin" -p "$tsp_first" 2>/dev/null || true); [ -n "$tsp_long_pid" ] && break; sleep 0.1; done
  cases+=(--case tsp "$tsp_bin true")
else
  cases+=(--skip tsp "$tsp_note")
fi
if [ "$slurm_up" -eq 1 ]; then cases+=(--case sbatch "sbatch -H --wrap true"); else cases+=(--skip sbatch "$slurm_note"); fi
(cd "$daemon_dir/work" && "${qc[@]}" seq-rate --n "$n" --chunks 3 "${cases[@]}") >"$results/sequential.json" || true
[ -z "$tsp_long_pid" ] || { kill -TERM "$tsp_long_pid" 2>/dev/null || true; tsp_long_pid=""; }
unset TS_SOCKET
stop_daemon
if [ "$slurm_up" -eq 1 ]; then scancel --user="$(id -un)" || true; fi

# ---------------------------------------------------------------- 3. queue listing
start_daemon queue
db=$daemon_dir/state/jobs.db
have=0
for size in 10000 100000; do
  log "3. queue listing with $size held jobs ..."
  "${qc[@]}" array --socket "$GPULANE_SOCKET" --count $((size - have)) --cwd "$daemon_dir/work" >"$results/array_$size.json" || true
  python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); d["tasks_total"] = int(sys.argv[2]); json.dump(d, open(sys.argv[1], "w"))' \
    "$results/array_$size.json" "$size"
  cases=(--case "gpulane queue" "$gl queue" --case "gpulane queue --json" "$gl queue --json")
  if [ "$slurm_up" -eq 1 ] && sbatch -H --array=0-$((size - have - 1)) --wrap true >/dev/null 2>"$tmp/sbatch-array.err"; then
    cases+=(--case "\`squeue -r\` (Slurm; held array tasks)" "squeue -r")
  elif [ "$slurm_up" -eq 1 ]; then
    slurm_up=0
    slurm_note="sbatch --array=0-$((size - have - 1)) failed: $(head -1 "$tmp/sbatch-array.err")"
    cases+=(--skip "\`squeue -r\` (Slurm)" "$slurm_note")
  else
    cases+=(--skip "\`squeue -r\` (Slurm)" "$slurm_note")
  fi
  cases+=(--case "\`sqlite3 jobs.db 'SELECT * FROM jobs'\` (reading the same rows; floor)" "sqlite3 $db 'SELECT * FROM jobs'")
  have=$size
  "${qc[@]}" latency -n "$queue_runs" -w 2 "${cases[@]}" >"$results/queue_$size.json" || true
done
for kind in json table; do
  listing=(queue)
  if [ "$kind" = json ]; then listing+=(--json); fi
  log "3. pings on another connection while gpulane ${listing[*]} lists $have jobs ..."
  "${qc[@]}" ping-during --socket "$GPULANE_SOCKET" --label "gpulane ${listing[*]}" -- "$gl" "${listing[@]}" \
    >"$results/ping_during_$kind.json" || true
  python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); d["queued"] = int(sys.argv[2]); json.dump(d, open(sys.argv[1], "w"))' \
    "$results/ping_during_$kind.json" "$have"
done
busy_clients=4
log "1. (again) flood: $busy_clients clients for $seconds s with $have held jobs queued ..."
"${qc[@]}" flood --socket "$GPULANE_SOCKET" --clients "$busy_clients" --seconds "$seconds" --cwd "$daemon_dir/work" >"$results/flood_busy.json" || true
python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); d["queued_before"] = int(sys.argv[2]); json.dump(d, open(sys.argv[1], "w"))' \
  "$results/flood_busy.json" "$have"
stop_daemon
if [ "$slurm_up" -eq 1 ]; then scancel --user="$(id -un)" || true; fi

# ---------------------------------------------------------------- 4. hand-over
log "4. hand-over: 2 warm-up + $rounds rounds ..."
start_daemon handover
args=(--gpulane "$gl" --work "$daemon_dir/work" --rounds "$rounds" --warmup 2)
if [ -n "$tsp_bin" ]; then
  start_tsp ts-handover
  args+=(--tsp "$tsp_bin" --tsp-socket "$tmp/ts-handover/sock")
else
  printf '{"reason": "%s"}\n' "$tsp_note" >"$results/handover_tsp_skip.json"
fi
"${qc[@]}" handover "${args[@]}" >"$results/handover.json" || true
stop_daemon

# ---------------------------------------------------------------- report
echo "## gpulane job queue: submission throughput, listing latency, hand-over"
echo
echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ); host: $(hostname); $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME"); kernel $(uname -r)"
echo "- CPUs: $(nproc) ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)); memory $(free -g | awk '/^Mem:/ {print $2}') GiB; load average before: $load_before, after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "- GPUs/NVML: **FAKE NVML: $nvml_lib, state = copy of $fixture (2 × H200; the recorded process on GPU1 gets an unused pid, so only GPU0 is leased) — no GPU on this machine**"
echo "- gpulane: $gl (build $build_commit)"
echo "- daemon state (jobs.db) on $fs_state; leases on $(stat -f -c %T "$lease_dir"); SQLite $(sqlite3 --version | cut -d' ' -f1)"
echo "- jobs.db as the daemon left it: journal_mode=$journal_mode (stored in the file); synchronous=$sqlite3_sync as the sqlite3 tool reads it, which is that tool's own connection's setting (it is not stored in the file): the daemon sets FULL on its connection (src/store/job_store.cc), and the sync calls show it: $fsync_line"
echo "- task-spooler: ${tsp_bin:+$tsp_bin $(dpkg-query -W -f='${Version}' task-spooler 2>/dev/null)}${tsp_note}; Slurm: $([ "$slurm_up" -eq 1 ] && echo "$slurm_version, one node, started by this script (slurmctld/slurmd as root, munged, state in the work folder)" || echo "skipped: $slurm_note")"
echo "- method: bench/queue_throughput.sh + bench/queue_client.py; submissions are held jobs (\`\"hold\": true\`, \`--hold\`, \`sbatch -H\`), so nothing runs; (1) each client count against a fresh daemon, SIGKILLed afterwards, rows counted with sqlite3; (2) $n each in 3 interleaved chunks, a fresh process per submission; (3) fork-to-exit, 2 warm-ups + $queue_runs interleaved runs, stdout to /dev/null; (4) 2 warm-up + $rounds interleaved rounds, A sleeps 0.3 s; p90/p99 nearest-rank"
echo
"${qc[@]}" report --results "$results"
