#!/usr/bin/env python3
"""Watches a gpulane lease directory while acceptance jobs run and records, per GPU, the most
that was ever leased at one moment. Read-only: it opens lease files O_RDONLY|O_NOFOLLOW and skips
stale ones (whose lock nobody holds), as gpulane does.

  lease_sampler.py --dir DIR --out FILE [--interval 0.05]

Runs until SIGTERM/SIGINT (or until its parent exits), then writes FILE (JSON):
  {"samples": N, "gpus": {uuid: {"max_declared_bytes", "max_shared", "max_exclusive", "max_mixed"}},
   "max_live_leases": M}
max_mixed counts moments where a whole-GPU lease and another lease were live on one GPU.
"""
import argparse
import fcntl
import glob
import json
import os
import signal
import sys
import time


def live_leases(d):
    out = []
    for path in glob.glob(os.path.join(d, "*.lease")):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                continue  # nobody holds it: stale
            except OSError:
                pass
            data = b""
            while True:
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                data += chunk
            try:
                out.append(json.loads(data))
            except ValueError:
                pass
        finally:
            os.close(fd)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--interval", type=float, default=0.05)
    args = ap.parse_args()
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    parent = os.getppid()
    gpus = {}
    samples = 0
    max_live = 0
    while not stop and os.getppid() == parent:
        leases = live_leases(args.dir)
        samples += 1
        max_live = max(max_live, len(leases))
        now = {}
        for lease in leases:
            for g in lease.get("gpus", []):
                e = now.setdefault(g["uuid"], {"declared": 0, "shared": 0, "exclusive": 0})
                if "mem_bytes" in g:
                    e["shared"] += 1
                    e["declared"] += g["mem_bytes"]
                else:
                    e["exclusive"] += 1
        for uuid, e in now.items():
            m = gpus.setdefault(uuid, {"max_declared_bytes": 0, "max_shared": 0, "max_exclusive": 0, "max_mixed": 0})
            m["max_declared_bytes"] = max(m["max_declared_bytes"], e["declared"])
            m["max_shared"] = max(m["max_shared"], e["shared"])
            m["max_exclusive"] = max(m["max_exclusive"], e["exclusive"])
            if e["exclusive"] and e["exclusive"] + e["shared"] > 1:
                m["max_mixed"] = max(m["max_mixed"], e["exclusive"] + e["shared"])
        time.sleep(args.interval)
    with open(args.out + ".tmp", "w") as f:
        json.dump({"samples": samples, "gpus": gpus, "max_live_leases": max_live}, f, indent=1)
    os.rename(args.out + ".tmp", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
