#!/usr/bin/env python3
"""Issue 23, item 8: a user rewriting a junk file in the lease directory in a loop must not make
every waiting request burn a core (it took 43-63 % of one per waiting `run`).

    python3 bench/lease_dir_churn.py [GPULANE] [--seconds 5]     (default build/gpulane)

On the fake NVML (the recorded 2 x H200, tests/fixtures/h200x2-2026-11-30) with a lease directory
of its own: `gpulane run --gpus 0 -- sleep` holds GPU 0, a second `gpulane run --gpus 0 -- true`
waits in line behind it. The waiting run's CPU (utime + stime from /proc/<pid>/stat, % of one
core) is measured for --seconds while nothing changes (the baseline, the same run), then while this
script rewrites leases/junk as fast as it can. Prints a markdown table on stdout.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
FIXTURE = os.path.join(ROOT, "tests/fixtures/h200x2-2026-11-30/nvml_snapshot.json")


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(pid, seconds, churn_path=None):
    start_cpu, start = cpu_s(pid), time.monotonic()
    writes = 0
    while time.monotonic() - start < seconds:
        if churn_path:
            with open(churn_path, "w") as f:
                f.write(f"junk {writes}\n")
            writes += 1
        else:
            time.sleep(0.05)
    wall = time.monotonic() - start
    return 100 * (cpu_s(pid) - start_cpu) / wall, writes / wall


def wait_for(folder, suffix, what):
    deadline = time.monotonic() + 10
    while not (os.path.isdir(folder) and any(n.endswith(suffix) for n in os.listdir(folder))):
        if time.monotonic() > deadline:
            sys.exit(f"lease_dir_churn.py: {what} in 10 s")
        time.sleep(0.02)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("gpulane", nargs="?", default=os.path.join(ROOT, "build/gpulane"))
    ap.add_argument("--seconds", type=float, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        state = json.load(open(FIXTURE))
        for dev in state["devices"]:
            dev["processes"] = []
            dev["memory"]["used"] = 0
            dev["memory"]["free"] = dev["memory"]["total"]
            dev["util"] = {"gpu": 0, "memory": 0}
        with open(os.path.join(d, "nvml.json"), "w") as f:
            json.dump(state, f)
        lib = os.path.join(os.path.dirname(os.path.abspath(args.gpulane)), "fake_nvml/current/libnvidia-ml.so.1")
        env = dict(os.environ, GPULANE_NVML_LIBRARY=lib, FAKE_NVML_STATE=os.path.join(d, "nvml.json"),
                   GPULANE_LEASE_DIR=os.path.join(d, "leases"), GPULANE_SOCKET=os.path.join(d, "sock"),
                   GPULANE_STATE_DIR=os.path.join(d, "state"), GPULANE_SYSTEM_DAEMON="0")
        env.pop("CUDA_VISIBLE_DEVICES", None)
        holder = subprocess.Popen([args.gpulane, "run", "--gpus", "0", "--", "sleep", "600"], env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        leases = os.path.join(d, "leases")
        wait_for(leases, ".lease", "the first run took no lease")
        waiter = subprocess.Popen([args.gpulane, "run", "--gpus", "0", "--", "true"], env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(leases, ".wait", "the second run took no place in line")
        try:
            quiet_pct, _ = measure(waiter.pid, args.seconds)
            churn_pct, rate = measure(waiter.pid, args.seconds, os.path.join(d, "leases", "junk"))
        finally:
            for p in (waiter, holder):
                p.terminate()
                p.wait()
    print(f"## A waiting `gpulane run` while the lease directory changes ({args.seconds:g} s each, {os.cpu_count()} CPUs)\n")
    print(f"`python3 bench/lease_dir_churn.py {args.gpulane}`\n")
    print("| lease directory | changes per s | the waiting run's CPU, % of a core |")
    print("|---|---:|---:|")
    print(f"| quiet (baseline) | 0 | {quiet_pct:.1f} |")
    print(f"| junk file rewritten in a loop | {rate:.0f} | {churn_pct:.1f} |")


if __name__ == "__main__":
    main()
