#!/usr/bin/env python3
"""What the daemon's sampler costs, and how fast `gpulane report` and the metrics text are
(issue 11, "Speed and footprint"), on a fake machine of 8 H200s (the fake NVML, the recorded
fixture cloned), each figure beside a baseline measured in the same run:

  bench/telemetry_footprint.py [--gpulane build/gpulane] [--seconds 600] [--records 100000] [--runs 10]

  footprint  two `gpulane daemon --user` side by side for --seconds: one with the sampler at 1 Hz
             (telemetry.interval = 1s), one with telemetry.enabled = false (the baseline). For each:
             CPU seconds used (utime + stime, /proc/<pid>/stat) as a share of one core over the
             period, and resident memory at the end (VmRSS) and at its peak (VmHWM).
  report     `gpulane report --since 30d` over --records finished jobs' usage records (written
             into history.db before the daemon starts), median of --runs; baseline: the same
             command with no record, in the same run.
  metrics    the daemon's `metrics` answer (the text /metrics serves) for the 8 GPUs, median of
             --runs round trips; baseline: `ping` on the same socket.

Prints a Markdown table on stdout; progress on stderr. Everything it starts it stops. The targets
of the issue: sampling <= 0.5 % of a core and <= 20 MiB RSS; report <= 200 ms; scrape <= 5 ms.
"""
import argparse
import json
import os
import random
import shutil
import socket
import sqlite3
import statistics
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TICKS = os.sysconf("SC_CLK_TCK")


def call(sock_path, req, timeout=30):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(timeout)
    s.connect(sock_path)
    body = json.dumps({"v": 2, **req}).encode()
    s.sendall(struct.pack(">I", len(body)) + body)
    head = b""
    while len(head) < 4:
        head += s.recv(4 - len(head))
    n = struct.unpack(">I", head)[0]
    data = b""
    while len(data) < n:
        data += s.recv(n - len(data))
    s.close()
    return json.loads(data)


def eight_gpus():
    return fake_gpus(8)


def fake_gpus(n):
    """The recorded fixture's first H200 cloned `n` times (UUIDs, bus IDs and minors made unique, no process)."""
    fixture = json.load(open(os.path.join(ROOT, "tests", "fixtures", "h200x2-2026-11-30", "nvml_snapshot.json")))
    base = fixture["devices"][0]
    devices = []
    for i in range(n):
        d = json.loads(json.dumps(base))
        d["uuid"] = f"GPU-{0xd0000000 + i:08x}-92ce-068a-58c5-7c2f58de6be6"
        d["pci_bus_id"] = f"00000000:{0x18 + 0x10 * i:02X}:00.0"
        d["minor"] = i
        d["processes"] = []
        d["energy_mj"] = 1000000 + i
        devices.append(d)
    fixture["devices"] = devices
    return fixture


class Daemon:
    def __init__(self, gpulane, folder, config):
        self.folder = folder
        os.makedirs(os.path.join(folder, "leases"), mode=0o1777)
        with open(os.path.join(folder, "config.toml"), "w") as f:
            f.write(config)
        self.sock = os.path.join(folder, "sock")
        self.env = dict(os.environ, GPULANE_NVML_LIBRARY=os.path.join(ROOT, "build", "fake_nvml", "current", "libnvidia-ml.so.1"),
                        FAKE_NVML_STATE=os.path.join(os.path.dirname(folder), "nvml.json"),
                        GPULANE_CONFIG=os.path.join(folder, "config.toml"), GPULANE_LEASE_DIR=os.path.join(folder, "leases"),
                        GPULANE_SOCKET=self.sock, GPULANE_STATE_DIR=os.path.join(folder, "state"), GPULANE_SYSTEM_DAEMON="0")
        self.gpulane = gpulane
        self.proc = None

    def start(self):
        self.log = open(os.path.join(self.folder, "daemon.log"), "w")
        self.proc = subprocess.Popen([self.gpulane, "daemon", "--user"], env=self.env, stdout=self.log, stderr=self.log)
        for _ in range(400):
            try:
                call(self.sock, {"op": "ping"}, 1)
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"daemon did not start: {open(os.path.join(self.folder, 'daemon.log')).read()}")

    def cpu_s(self):
        fields = open(f"/proc/{self.proc.pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime

    def memory_kib(self):
        out = {}
        for line in open(f"/proc/{self.proc.pid}/status"):
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0])
        return out

    def stop(self):
        if self.proc:
            self.proc.terminate()
            self.proc.wait(10)


def fill_history(db_path, records):
    """`records` usage rows over the last 30 days, as the sampler writes them (store/history_store.cc)."""
    os.makedirs(os.path.dirname(db_path), exist_ok=True)
    con = sqlite3.connect(db_path)
    con.execute("CREATE TABLE IF NOT EXISTS job_usage ("
                " id INTEGER PRIMARY KEY AUTOINCREMENT, job_id TEXT NOT NULL, uid INTEGER NOT NULL, user TEXT NOT NULL,"
                " name TEXT NOT NULL, gpu_uuids TEXT NOT NULL, gpu_indices TEXT NOT NULL, start_s REAL NOT NULL, end_s REAL NOT NULL,"
                " wait_s REAL, gpus REAL NOT NULL, gpu_s REAL NOT NULL, energy_j REAL, peak_memory_bytes INTEGER,"
                " mean_memory_bytes REAL, mean_util_pct REAL, p10_util_pct REAL, idle_fraction REAL, samples INTEGER NOT NULL)")
    con.execute("CREATE INDEX IF NOT EXISTS job_usage_end ON job_usage (end_s)")
    now = time.time()
    rng = random.Random(11)
    rows = []
    ends = sorted(now - rng.uniform(0, 29 * 86400) for _ in range(records))  # stored as jobs end
    for i in range(records):
        end = ends[i]
        run = rng.uniform(60, 36000)
        g = rng.randrange(8)
        rows.append((str(i + 1), 1000 + i % 20, f"user{i % 20}", "python train.py", f"GPU-{g}", str(g), end - run, end, rng.uniform(0, 3600), 1.0, run, run * 500, 40 << 30, 30e9,
                     rng.uniform(0, 100), rng.uniform(0, 50), rng.uniform(0, 1), int(run)))
    con.executemany("INSERT INTO job_usage (job_id, uid, user, name, gpu_uuids, gpu_indices, start_s, end_s, wait_s, gpus,"
                    " gpu_s, energy_j, peak_memory_bytes, mean_memory_bytes, mean_util_pct, p10_util_pct, idle_fraction,"
                    " samples) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
    con.commit()
    con.close()


def timed_ms(argv, env, runs):
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        r = subprocess.run(argv, env=env, capture_output=True)
        times.append((time.perf_counter() - t0) * 1e3)
        if r.returncode != 0:
            raise RuntimeError(f"{argv}: {r.stderr.decode()}")
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpulane", default=os.path.join(ROOT, "build", "gpulane"))
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--records", type=int, default=100000)
    ap.add_argument("--runs", type=int, default=10)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="gpulane-telemetry-bench-")
    json.dump(eight_gpus(), open(os.path.join(tmp, "nvml.json"), "w"))
    sampled = Daemon(args.gpulane, os.path.join(tmp, "sampled"), '[telemetry]\ninterval = "1s"\n')
    plain = Daemon(args.gpulane, os.path.join(tmp, "plain"), "[telemetry]\nenabled = false\n")
    empty = Daemon(args.gpulane, os.path.join(tmp, "empty"), '[telemetry]\ninterval = "1s"\n')
    try:
        print(f"filling history.db with {args.records} usage records", file=sys.stderr)
        fill_history(os.path.join(tmp, "sampled", "state", "history.db"), args.records)
        for d in (sampled, plain, empty):
            d.start()
        cpu0 = {d: d.cpu_s() for d in (sampled, plain)}
        print(f"sampling 8 fake GPUs for {args.seconds:g} s", file=sys.stderr)
        t0 = time.monotonic()
        time.sleep(args.seconds)
        wall = time.monotonic() - t0
        cpu = {d: d.cpu_s() - cpu0[d] for d in (sampled, plain)}
        mem = {d: d.memory_kib() for d in (sampled, plain)}
        samples = call(sampled.sock, {"op": "metrics"})["text"].rsplit("gpulane_sampler_samples_total ", 1)[1].split()[0]
        report = [args.gpulane, "report", "--since", "30d"]
        report_ms = timed_ms(report, sampled.env, args.runs)
        report_empty_ms = timed_ms(report, empty.env, args.runs)

        def round_trips(req):
            times = []
            for _ in range(args.runs * 10):
                t = time.perf_counter()
                call(sampled.sock, req)
                times.append((time.perf_counter() - t) * 1e3)
            return statistics.median(times)

        metrics_ms, ping_ms = round_trips({"op": "metrics"}), round_trips({"op": "ping"})
    finally:
        for d in (sampled, plain, empty):
            d.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    share = lambda s: 100 * s / wall
    print(f"- gpulane: {args.gpulane}; 8 fake H200s; {os.cpu_count()} CPUs; {wall:.0f} s; {samples} samples taken\n")
    print("| what | sampler at 1 Hz | baseline | target |")
    print("|---|---|---|---|")
    print(f"| daemon CPU, % of one core | {share(cpu[sampled]):.3f} % | {share(cpu[plain]):.3f} % (telemetry off) | sampler's part <= 0.5 % |")
    print(f"| daemon CPU, sampler's part | {share(cpu[sampled] - cpu[plain]):.3f} % | | <= 0.5 % |")
    print(f"| daemon RSS at the end | {mem[sampled]['VmRSS'] / 1024:.1f} MiB | {mem[plain]['VmRSS'] / 1024:.1f} MiB | <= 20 MiB |")
    print(f"| daemon peak RSS | {mem[sampled]['VmHWM'] / 1024:.1f} MiB | {mem[plain]['VmHWM'] / 1024:.1f} MiB | |")
    print(f"| `gpulane report --since 30d`, {args.records} records, median of {args.runs} | {report_ms:.1f} ms | "
          f"{report_empty_ms:.1f} ms (no record) ({report_ms / report_empty_ms:.1f}x) | <= 200 ms |")
    print(f"| `metrics` round trip (the /metrics text), median | {metrics_ms:.2f} ms | {ping_ms:.2f} ms (ping) "
          f"({metrics_ms / ping_ms:.1f}x) | <= 5 ms |")


if __name__ == "__main__":
    sys.exit(main())
