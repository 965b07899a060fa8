#!/usr/bin/env python3
"""Stand-in for the GPU driver's clean-up, for the dry run of scripts/gpu-acceptance.sh and
scripts/acceptance-selftest.sh only: a real driver frees a process's GPU memory when the process
dies, also by SIGKILL; the fake NVML's state file ($FAKE_NVML_STATE) does not change by itself.

  fake_gpu_driver.py [--interval 0.02]

Every interval, removes from the state file the entries that the stand-in torch
(scripts/acceptance-selftest/torch) wrote ("stand_in": true) whose process ("real_pid") has
ended or is a zombie, and gives their memory back. Edits under the same flock as the stand-in
torch. Runs until SIGTERM/SIGINT or until its parent exits.
"""
import argparse
import fcntl
import json
import os
import signal
import sys
import time


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2:].split()[0] not in ("Z", "X")


def sweep(path):
    with open(path + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            with open(path) as f:
                d = json.load(f)
        except (OSError, ValueError):
            return
        changed = False
        for dev in d.get("devices", []):
            keep = []
            for p in dev.get("processes", []):
                if p.get("stand_in") and not alive(p.get("real_pid", p["pid"])):
                    dev["memory"]["used"] -= p.get("used_memory", 0)
                    dev["memory"]["free"] += p.get("used_memory", 0)
                    changed = True
                    print(f"fake driver: pid {p['pid']} ended: freed {p.get('used_memory', 0) >> 20} MiB on {dev['uuid']}",
                          file=sys.stderr, flush=True)
                else:
                    keep.append(p)
            dev["processes"] = keep
        if changed:
            tmp = f"{path}.tmp{os.getpid()}"
            with open(tmp, "w") as f:
                json.dump(d, f)
            os.rename(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--interval", type=float, default=0.02)
    args = ap.parse_args()
    path = os.environ["FAKE_NVML_STATE"]
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    parent = os.getppid()
    while os.getppid() == parent:
        sweep(path)
        time.sleep(args.interval)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(0)
