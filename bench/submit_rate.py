#!/usr/bin/env python3
"""Sequential `gpulane submit`: how many a shell loop gets through per second, and where one
submit's time goes (issue 25, "Sequential CLI submit").

    python3 bench/submit_rate.py [GPULANE ...] [-n N] [--split K] [--no-strace]
        (default build/gpulane; several GPULANE paths compare builds side by side in one run)

Against per-user daemons this script starts (fake NVML: build/fake_nvml/current with the recorded
2 x H200 fixture, as bench/queue_throughput.sh; an empty config; leases on tmpfs), one daemon per
GPULANE, each with its state (jobs.db) in a fresh folder under ${TMPDIR:-/tmp} (the file system is
named in the preamble), and per GPULANE a second one whose state is on tmpfs (/dev/shm): there an
fdatasync costs nothing, so the difference between the two is what durability costs per submit
(the tmpfs daemon is an instrument, not a configuration to use).

1. Rate: N rounds; each round starts every case once, in a shuffled order (load and drift hit every
   case alike): /bin/true, `gpulane --version` (CLI start), `gpulane show 1` (a round trip through
   the socket that stores nothing), `gpulane submit --hold -- true` (disk state; tmpfs state), and
   `tsp true` when task-spooler is installed (a one-slot server with a long first job, so the rest
   stay queued). Every start is os.posix_spawn + wait4, stdout and stderr to /dev/null. Prints per
   case the median and p90 ms and the rate (calls per second of the loop: N / the calls' summed
   wall time).
2. Split: K more submits (disk state) with GPULANE_TIMING=1, each mark parsed from stderr:
   exec → main() (the caller's monotonic clock before posix_spawn against main()'s), the CLI's own
   marks (option registration, parsing, config, building the request, looking up the daemon,
   connect, request sent → reply read) and main()'s last mark → the caller's wait4 returning
   (exit); the CPU time of the CLI (wait4) and of the daemon (/proc/PID/stat) per submit. Then,
   with strace (unless --no-strace), the daemon's fdatasync calls during K more submits, timed
   (-T): how long the synchronous commit takes. Beside it the disk's floor: one row committed
   by Python's sqlite3 (WAL, synchronous=FULL) per transaction in the same folder, K times.

Prints a markdown report on stdout (preamble with the commit, each binary's version, the file
systems and the load average before and after); progress on stderr.
"""
import argparse
import json
import os
import random
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def p90(values):
    s = sorted(values)
    return s[max(0, -(-9 * len(s) // 10) - 1)]


def spawn(argv, env, cwd, stderr_fd):
    """One posix_spawn + wait4: (wall ms, monotonic s just before the spawn, exit code)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    actions = [(os.POSIX_SPAWN_DUP2, devnull, 1), (os.POSIX_SPAWN_DUP2, stderr_fd if stderr_fd is not None else devnull, 2)]
    here = os.getcwd()
    os.chdir(cwd)
    try:
        t0 = time.monotonic()
        start = time.perf_counter_ns()
        pid = os.posix_spawn(argv[0], argv, env, file_actions=actions)
        _, status, usage = os.wait4(pid, 0)
        wall_ms = (time.perf_counter_ns() - start) / 1e6
        t_end = time.monotonic()
    finally:
        os.chdir(here)
        os.close(devnull)
    spawn.cpu_ms = (usage.ru_utime + usage.ru_stime) * 1000
    return wall_ms, t0, t_end, os.waitstatus_to_exitcode(status)


def fake_nvml_env(tmp):
    fixture = os.path.join(ROOT, "tests/fixtures/h200x2-2026-11-30/nvml_snapshot.json")
    lib = os.path.join(ROOT, "build/fake_nvml/current/libnvidia-ml.so.1")
    if not os.path.exists(lib):
        sys.exit(f"submit_rate.py: no fake NVML at {lib} (cmake --build build)")
    d = json.load(open(fixture))
    pid_max = int(open("/proc/sys/kernel/pid_max").read())
    free = (p for p in range(pid_max - 1, 300, -1) if not os.path.exists(f"/proc/{p}"))
    for dev in d["devices"]:
        for p in dev.get("processes", []):
            p["pid"] = next(free)  # "another container's process": GPU1 stays foreign
    state = os.path.join(tmp, "fake_state.json")
    json.dump(d, open(state, "w"))
    config = os.path.join(tmp, "config.toml")
    open(config, "w").close()
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_VISIBLE_DEVICES", "GPULANE_TIMING")}
    env.update(GPULANE_NVML_LIBRARY=lib, FAKE_NVML_STATE=state, GPULANE_CONFIG=config)
    return env


class Daemon:
    def __init__(self, gl, base_env, folder, lease_dir):
        os.makedirs(os.path.join(folder, "work"), exist_ok=True)
        self.folder = folder
        self.env = dict(base_env, GPULANE_SOCKET=os.path.join(folder, "sock"),
                        GPULANE_STATE_DIR=os.path.join(folder, "state"), GPULANE_LEASE_DIR=lease_dir)
        self.log = open(os.path.join(folder, "daemon.log"), "w")
        self.proc = subprocess.Popen([gl, "daemon", "--user"], env=self.env, stdout=self.log, stderr=subprocess.STDOUT)
        import socket
        for _ in range(400):
            s = socket.socket(socket.AF_UNIX)
            try:
                s.connect(self.env["GPULANE_SOCKET"])
                s.close()
                break
            except OSError:
                s.close()
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        else:
            sys.exit(f"submit_rate.py: the daemon in {folder} did not come up")
        if self.proc.poll() is not None:
            sys.exit(f"submit_rate.py: the daemon in {folder} exited: {open(self.log.name).read()[-300:]}")
        self.cwd = os.path.join(folder, "work")

    def stop(self):
        self.proc.terminate()
        self.proc.wait()
        self.log.close()


def fs_of(path):
    return subprocess.run(["stat", "-f", "-c", "%T", path], capture_output=True, text=True).stdout.strip()


def sqlite_floor_ms(folder, k):
    db = sqlite3.connect(os.path.join(folder, "floor.db"), isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, spec TEXT)")
    times = []
    for _ in range(k):
        start = time.perf_counter_ns()
        db.execute("BEGIN")
        db.execute("INSERT INTO t (spec) VALUES (?)", ("x" * 2000,))
        db.execute("COMMIT")
        times.append((time.perf_counter_ns() - start) / 1e6)
    db.close()
    return times


MARK = re.compile(r"gpulane: timing: (.+?) \+([0-9.]+) ms$")
MAIN_AT = re.compile(r"gpulane: timing: main\(\) at ([0-9.]+) s monotonic")


def split_one(text, t0, t_end):
    """The parts of one GPULANE_TIMING=1 submit, ms: {label: ms}."""
    parts, main_at = {}, None
    for line in text.splitlines():
        if m := MAIN_AT.match(line):
            main_at = float(m.group(1))
        elif m := MARK.match(line):
            if m.group(1) != "main":
                parts[m.group(1)] = parts.get(m.group(1), 0) + float(m.group(2))
    if main_at is None:
        return None
    out = {"exec → main()": (main_at - t0) * 1000}
    out.update(parts)
    out["last mark → exit seen by the caller"] = (t_end - main_at) * 1000 - sum(parts.values())
    return out


def cpu_ms_of(pid):
    """User + system CPU time of a process and its threads so far, ms."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def fdatasync_times_ms(strace_out):
    times = []
    for line in open(strace_out):
        m = re.search(r"(fdatasync|fsync)\(\d+\)\s+= 0 <([0-9.]+)>", line)
        if m:
            times.append(float(m.group(2)) * 1000)
    return times


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("gpulane", nargs="*", default=[os.path.join(ROOT, "build/gpulane")])
    ap.add_argument("-n", type=int, default=200, help="rounds of the rate part (default 200)")
    ap.add_argument("--split", type=int, default=40, help="submits of the split part (default 40)")
    ap.add_argument("--no-strace", action="store_true")
    args = ap.parse_args()
    binaries = [os.path.abspath(b) for b in args.gpulane]
    labels = [f"B{i}" for i in range(len(binaries))] if len(binaries) > 1 else [""]
    load_before = open("/proc/loadavg").read().split()[:3]
    tmp = tempfile.mkdtemp(prefix="submit-rate.", dir=os.environ.get("TMPDIR", "/tmp"))
    shm = tempfile.mkdtemp(prefix="submit-rate.", dir="/dev/shm")
    lease_dir = tempfile.mkdtemp(prefix="submit-rate-leases.", dir="/dev/shm")
    os.chmod(lease_dir, 0o1777)
    env = fake_nvml_env(tmp)
    fs_disk, fs_shm = fs_of(tmp), fs_of(shm)
    daemons, tsp = [], None
    try:
        cases = {"/bin/true": (["/bin/true"], env, tmp)}
        for b, label in zip(binaries, labels):
            tag = f" [{label}]" if label else ""
            disk = Daemon(b, env, os.path.join(tmp, f"disk{label}"), lease_dir)
            mem = Daemon(b, env, os.path.join(shm, f"mem{label}"), lease_dir)
            daemons += [disk, mem]
            for d in (disk, mem):  # job 1 for `show 1`, and the first connection's costs out of the way
                spawn([b, "submit", "--hold", "--", "true"], d.env, d.cwd, None)
            cases[f"gpulane --version{tag}"] = ([b, "--version"], env, tmp)
            cases[f"gpulane show 1{tag}"] = ([b, "show", "1"], disk.env, disk.cwd)
            cases[f"gpulane submit --hold -- true{tag}"] = ([b, "submit", "--hold", "--", "true"], disk.env, disk.cwd)
            cases[f"gpulane submit --hold -- true, state on tmpfs{tag}"] = (
                [b, "submit", "--hold", "--", "true"], mem.env, mem.cwd)
        tsp_bin = shutil.which("tsp")
        if tsp_bin:
            tsp_env = dict(env, TS_SOCKET=os.path.join(tmp, "ts.sock"), TMPDIR=tmp)
            subprocess.run([tsp_bin, "-S", "1"], env=tsp_env, check=True)
            subprocess.run([tsp_bin, "sleep", "3600"], env=tsp_env, check=True, stdout=subprocess.DEVNULL)
            tsp = (tsp_bin, tsp_env)
            cases["tsp true"] = ([tsp_bin, "true"], tsp_env, tmp)
        walls = {name: [] for name in cases}
        log(f"1. rate: {args.n} rounds of {len(cases)} cases ...")
        for _ in range(args.n):
            order = list(cases)
            random.shuffle(order)
            for name in order:
                argv, e, cwd = cases[name]
                ms, _, _, rc = spawn(argv, e, cwd, None)
                if rc != 0:
                    sys.exit(f"submit_rate.py: {' '.join(argv)} exited with {rc}")
                walls[name].append(ms)

        log(f"2. split: {args.split} submits with GPULANE_TIMING=1 per binary ...")
        splits, syncs, cpu = {}, {}, {}
        for b, label, disk in zip(binaries, labels, daemons[0::2]):
            rows, cli_cpu = [], []
            daemon_cpu_before = cpu_ms_of(disk.proc.pid)
            for _ in range(args.split):
                err = os.path.join(tmp, "timing.err")
                with open(err, "w") as f:
                    _, t0, t_end, rc = spawn([b, "submit", "--hold", "--", "true"], dict(disk.env, GPULANE_TIMING="1"),
                                             disk.cwd, f.fileno())
                row = split_one(open(err).read(), t0, t_end)
                if rc != 0 or row is None:
                    sys.exit(f"submit_rate.py: a timed submit failed: {open(err).read()[-300:]}")
                rows.append(row)
                cli_cpu.append(spawn.cpu_ms)
            cpu[label] = (statistics.median(cli_cpu), (cpu_ms_of(disk.proc.pid) - daemon_cpu_before) / args.split)
            splits[label] = rows
            # Then as many again with the daemon's fdatasync calls timed (strace slows the daemon, so
            # apart from the split above).
            if not args.no_strace and shutil.which("strace"):
                strace_out = os.path.join(tmp, f"daemon{label}.strace")
                tracer = subprocess.Popen(["strace", "-f", "--seccomp-bpf", "-T", "-e", "trace=fdatasync,fsync", "-o",
                                           strace_out, "-p", str(disk.proc.pid)], stderr=subprocess.DEVNULL)
                time.sleep(0.5)  # lets strace attach first (no result depends on it)
                for _ in range(args.split):
                    spawn([b, "submit", "--hold", "--", "true"], disk.env, disk.cwd, None)
                tracer.terminate()
                tracer.wait()
                syncs[label] = fdatasync_times_ms(strace_out)
        floor = sqlite_floor_ms(tmp, args.split)
    finally:
        if tsp:
            subprocess.run([tsp[0], "-K"], env=tsp[1], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for d in daemons:
            d.stop()
        shutil.rmtree(shm, ignore_errors=True)
        shutil.rmtree(lease_dir, ignore_errors=True)
    load_after = open("/proc/loadavg").read().split()[:3]

    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    print(f"# Sequential `gpulane submit` ({time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC)\n")
    print(f"- command: `python3 bench/submit_rate.py {' '.join(args.gpulane)} -n {args.n} --split {args.split}"
          f"{' --no-strace' if args.no_strace else ''}`; working tree at {commit}")
    for b, label in zip(binaries, labels):
        version = subprocess.run([b, "--version"], capture_output=True, text=True).stdout.strip()
        print(f"- {label + ': ' if label else ''}`{b}`: {version}")
    print(f"- state on {fs_disk} ({tmp}) and, for the tmpfs rows, on {fs_shm}; {os.cpu_count()} CPUs; "
          f"load average before {' '.join(load_before)}, after {' '.join(load_after)}")
    print(f"- task-spooler: {'`' + tsp[0] + '`' if tsp else 'not installed (Debian: apt-get install task-spooler); no tsp row'}\n")
    print("| case | median ms | p90 ms | median − /bin/true ms | submits/s of the loop |")
    print("|---|---:|---:|---:|---:|")
    floor_true = statistics.median(walls["/bin/true"])
    for name, ms in walls.items():
        print(f"| `{name}` | {statistics.median(ms):.2f} | {p90(ms):.2f} | {statistics.median(ms) - floor_true:+.2f} | "
              f"{1000 * len(ms) / sum(ms):.0f} |")
    for label, rows in splits.items():
        print(f"\nSplit of one submit{' [' + label + ']' if label else ''} (state on {fs_disk}; GPULANE_TIMING=1, "
              f"{len(rows)} submits; medians of each part, so they need not add up to the total's median):\n")
        print("| part | median ms | p90 ms |")
        print("|---|---:|---:|")
        for part in rows[0]:
            values = [r.get(part, 0.0) for r in rows]
            print(f"| {part} | {statistics.median(values):.2f} | {p90(values):.2f} |")
        totals = [sum(r.values()) for r in rows]
        print(f"| **total (spawn → wait4)** | {statistics.median(totals):.2f} | {p90(totals):.2f} |")
        print(f"\nCPU time per submit: the CLI process {cpu[label][0]:.2f} ms (median, wait4), the daemon "
              f"{cpu[label][1]:.2f} ms (mean over the {len(rows)} submits, /proc/PID/stat, 10 ms ticks)")
        if label in syncs:
            s = syncs[label]
            print(f"\nThe daemon's fdatasync calls meanwhile (strace -T, {len(rows)} more submits): {len(s)} for {len(rows)} submits"
                  + (f", median {statistics.median(s):.2f} ms, p90 {p90(s):.2f} ms" if s else ""))
    print(f"\nThe disk's floor: one row (2,000 bytes) committed per transaction by Python's sqlite3 (WAL, "
          f"synchronous=FULL) in {tmp}: median {statistics.median(floor):.2f} ms, p90 {p90(floor):.2f} ms ({len(floor)} commits)")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
