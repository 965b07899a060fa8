#!/usr/bin/env python3
"""jobs.db stays bounded under repeated submit-and-cancel cycles of a large held array, with
daemon.keep_finished short, and the daemon answers pings while it prunes (issue 23, item 8).

  bench/retention.py [--gpulane build/gpulane] [--cycles 3] [--tasks 100000] [--keep 5]

Starts its own `gpulane daemon --user` (fake NVML, the recorded 2 x H200 fixture) in a fresh folder
under $TMPDIR with `daemon.keep_finished = "<keep>s"` (the config file is read as trusted: run it as
root, as the test suite is). Each cycle: submit one held array of --tasks tasks, cancel it, then
ping on one connection (send, wait for the reply, again) until the daemon has pruned the last task
(a `show` of it answers "no longer kept"); jobs.db's size (with its -wal) after the submit, after
the prune; the pings' median, p99 and worst while pruning, and the daemon's own longest loop turn
meanwhile (`ping` with loop_stats). Prints a markdown table on stdout; progress on stderr.
"""
import argparse
import json
import multiprocessing as mp
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from daemon_latency import call, pinger, submit_request, wait_for_ping  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def db_mib(state):
    total = 0
    for suffix in ("", "-wal"):
        path = os.path.join(state, "jobs.db" + suffix)
        if os.path.exists(path):
            total += os.path.getsize(path)
    return total / (1 << 20)


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(p / 100 * len(values)))]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpulane", default=os.path.join(ROOT, "build", "gpulane"))
    ap.add_argument("--cycles", type=int, default=3)
    ap.add_argument("--tasks", type=int, default=100000)
    ap.add_argument("--keep", type=int, default=5, help="daemon.keep_finished, seconds (0: \"forever\", the baseline)")
    args = ap.parse_args()
    nvml = os.path.join(ROOT, "build", "fake_nvml", "current", "libnvidia-ml.so.1")
    fixture = os.path.join(ROOT, "tests", "fixtures", "h200x2-2026-11-30", "nvml_snapshot.json")
    tmp = tempfile.mkdtemp(prefix="gpulane-retention-")
    state_json = json.load(open(fixture))
    for dev in state_json["devices"]:
        for p in dev.get("processes", []):
            p["pid"] = 4000000 - p["pid"]
    json.dump(state_json, open(os.path.join(tmp, "nvml.json"), "w"))
    with open(os.path.join(tmp, "config.toml"), "w") as f:
        keep = f"{args.keep}s" if args.keep else "forever"
        f.write(f'[daemon]\nkeep_finished = "{keep}"\n[telemetry]\nenabled = false\n[web]\nlisten = "off"\n')
    os.makedirs(os.path.join(tmp, "leases"), mode=0o1777)
    os.makedirs(os.path.join(tmp, "work"))
    sock, state = os.path.join(tmp, "sock"), os.path.join(tmp, "state")
    env = dict(os.environ, GPULANE_NVML_LIBRARY=nvml, FAKE_NVML_STATE=os.path.join(tmp, "nvml.json"),
               GPULANE_CONFIG=os.path.join(tmp, "config.toml"), GPULANE_LEASE_DIR=os.path.join(tmp, "leases"),
               GPULANE_SOCKET=sock, GPULANE_STATE_DIR=state)
    log = open(os.path.join(tmp, "daemon.log"), "w")
    daemon = subprocess.Popen([args.gpulane, "daemon", "--user"], env=env, stdout=log, stderr=log)
    rows = []
    try:
        wait_for_ping(sock)
        cwd = os.path.join(tmp, "work")
        small_env = [f"{k}={v}" for k, v in env.items()]
        q = mp.Queue()
        stop = mp.Event()
        for cycle in range(1, args.cycles + 1):
            print(f"cycle {cycle}: submit {args.tasks} held tasks", file=sys.stderr)
            r = call(sock, submit_request(cwd, small_env, array=list(range(args.tasks))))
            assert r["ok"], r
            first, last = r["ids"][0], r["ids"][-1]
            after_submit = db_mib(state)
            t = time.perf_counter()
            r = call(sock, {"op": "cancel", "ids": [first]})
            assert r["ok"], r
            cancel_s = time.perf_counter() - t
            if not args.keep:  # the baseline: nothing is pruned
                rows.append((cycle, after_submit, db_mib(state), cancel_s) + (float("nan"),) * 7)
                print(f"cycle {cycle}: {rows[-1]}", file=sys.stderr)
                continue
            call(sock, {"op": "ping", "loop_stats": True})  # the daemon's worst turn from here on
            stop.clear()
            p = mp.Process(target=pinger, args=(sock, 0, stop, q))
            p.start()
            t = time.perf_counter()
            while True:  # pruned once its last task is no longer kept
                shown = call(sock, {"op": "show", "id": last})
                if not shown.get("ok") and "no longer kept" in json.dumps(shown):
                    break
                time.sleep(0.2)
            pruned_s = time.perf_counter() - t
            stop.set()
            lat = q.get()
            p.join()
            turns = call(sock, {"op": "ping", "loop_stats": True})
            rows.append((cycle, after_submit, db_mib(state), cancel_s, pruned_s, len(lat),
                         statistics.median(lat) * 1e3, pct(lat, 99) * 1e3, max(lat) * 1e3,
                         turns.get("loop_worst_turn_ms", float("nan")), turns.get("loop_worst_tick_turn_ms", float("nan"))))
            print(f"cycle {cycle}: {rows[-1]}", file=sys.stderr)
    finally:
        daemon.terminate()
        daemon.wait(30)
        if not any("--keep-dir" == a for a in sys.argv):
            shutil.rmtree(tmp, ignore_errors=True)
    keep = f"{args.keep}s" if args.keep else "forever"
    print(f"{args.cycles} cycles of {args.tasks:,} held tasks submitted and cancelled, daemon.keep_finished = \"{keep}\"\n")
    print("| cycle | jobs.db after submit (MiB) | jobs.db after prune (MiB) | cancel (s) | cancel to pruned (s) "
          "| pings | ping p50 (ms) | ping p99 (ms) | ping max (ms) | daemon's worst turn (ms) | worst tick turn (ms) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        print("| {} | {:.1f} | {:.1f} | {:.1f} | {:.1f} | {:.0f} | {:.2f} | {:.2f} | {:.1f} | {:.1f} | {:.1f} |".format(*row))


if __name__ == "__main__":
    main()
