#!/usr/bin/env python3
"""How long a ping waits while another client sends the daemon each expensive request (issue 9,
items 3-5), as a ratio to the idle ping latency measured in the same run.

  bench/daemon_latency.py [--gpulane build/gpulane] [--jobs 100000] [--pings 300] [--keep]

Starts its own `gpulane daemon --user` (fake NVML: build/fake_nvml/current/libnvidia-ml.so.1 with
the recorded 2 x H200 fixture), in a fresh folder under $TMPDIR, and queues --jobs held jobs (arrays
of 10,000) so that listings and dependency checks have something to walk. Then:
  idle       a pinger process alone: --pings pings (send, wait for the reply, again) on one
             connection; median and worst.
  each case  the same pinger running while this process sends the case's requests on other
             connections; the worst ping seen meanwhile, and that worst / idle median; and the
             daemon's own longest loop turns meanwhile (`ping` with loop_stats): what the daemon
             held the loop for, without this 2-core machine's scheduling of the three processes,
             apart for the turns without and with the once-a-second tick (which walks every
             unfinished job: with --jobs held jobs queued, that is its cost).
Prints a markdown table on stdout; progress on stderr. Everything it starts it stops.
"""
import argparse
import json
import multiprocessing as mp
import os
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from daemon_proto import frame, recv_exact  # noqa: E402


def read_frame(s):
    n = struct.unpack(">I", recv_exact(s, 4))[0]
    return recv_exact(s, n)


def call(sock_path, req, timeout=600):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(timeout)
    s.connect(sock_path)
    s.sendall(frame(req))
    reply = json.loads(read_frame(s))
    if req.get("stream") and reply.get("ok"):
        while read_frame(s):
            pass
    s.close()
    return reply


def wait_for_ping(sock_path, tries=400):
    """Until a just started daemon answers a ping (every 50 ms, `tries` times at most)."""
    for _ in range(tries):
        try:
            call(sock_path, {"op": "ping"}, 1)
            return
        except OSError:
            time.sleep(0.05)


def pinger(sock_path, count, stop, out):
    """Pings on one connection; `count` pings, or until `stop` is set. Puts the latencies (s)."""
    s = socket.socket(socket.AF_UNIX)
    s.connect(sock_path)
    ping = frame({"op": "ping"})
    lat = []
    while (count and len(lat) < count) or (not count and not stop.is_set()):
        t = time.perf_counter()
        s.sendall(ping)
        read_frame(s)
        lat.append(time.perf_counter() - t)
        time.sleep(0.0005)
    out.put(lat)


def submit_request(cwd, env, argv=("true",), **extra):
    spec = {"argv": list(argv), "cwd": cwd, "env": env, "request": {"count": 1}, "name": "bench"}
    spec.update(extra.pop("spec", {}))
    return {"op": "submit", "spec": spec, "hold": True, **extra}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpulane", default=os.path.join(ROOT, "build", "gpulane"))
    ap.add_argument("--jobs", type=int, default=100000)
    ap.add_argument("--pings", type=int, default=300)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    nvml = os.path.join(ROOT, "build", "fake_nvml", "current", "libnvidia-ml.so.1")
    fixture = os.path.join(ROOT, "tests", "fixtures", "h200x2-2026-11-30", "nvml_snapshot.json")
    tmp = tempfile.mkdtemp(prefix="gpulane-latency-")
    state = json.load(open(fixture))
    for dev in state["devices"]:
        for p in dev.get("processes", []):
            p["pid"] = 4000000 - p["pid"]  # nobody's: another container's process
    json.dump(state, open(os.path.join(tmp, "nvml.json"), "w"))
    open(os.path.join(tmp, "config.toml"), "w").close()
    os.makedirs(os.path.join(tmp, "leases"), mode=0o1777)
    os.makedirs(os.path.join(tmp, "work"))
    sock = os.path.join(tmp, "sock")
    env = dict(os.environ, GPULANE_NVML_LIBRARY=nvml, FAKE_NVML_STATE=os.path.join(tmp, "nvml.json"),
               GPULANE_CONFIG=os.path.join(tmp, "config.toml"), GPULANE_LEASE_DIR=os.path.join(tmp, "leases"),
               GPULANE_SOCKET=sock, GPULANE_STATE_DIR=os.path.join(tmp, "state"))
    log = open(os.path.join(tmp, "daemon.log"), "w")
    daemon = subprocess.Popen([args.gpulane, "daemon", "--user"], env=env, stdout=log, stderr=log)
    try:
        wait_for_ping(sock)
        cwd = os.path.join(tmp, "work")
        small_env = [f"{k}={v}" for k, v in env.items()]
        print(f"queueing {args.jobs} held jobs", file=sys.stderr)
        for start in range(0, args.jobs, 10000):
            r = call(sock, submit_request(cwd, small_env, array=list(range(min(10000, args.jobs - start)))))
            assert r["ok"], r
        first = r["ids"][0]
        big_env = small_env + [f"PAD{i}=" + "e" * (100 << 10) for i in range(9)]  # about 0.9 MiB
        huge_env = small_env + [f"PAD{i}=" + "e" * (100 << 10) for i in range(41)]  # about 4 MiB

        def trickle_connections(n):
            conns = []
            for _ in range(n):
                s = socket.socket(socket.AF_UNIX)
                try:
                    s.connect(sock)
                    s.sendall(b"\0\0")
                except OSError:
                    pass
                conns.append(s)
            for s in conns:
                s.close()

        def partial_frames(n):
            conns = []
            for _ in range(n):
                s = socket.socket(socket.AF_UNIX)
                s.connect(sock)
                body = b'{"v":2,"op":"ping","pad":"' + b"p" * (7 << 20) + b'"}'
                try:
                    s.sendall(struct.pack(">I", len(body)) + body[: 6 << 20])
                except OSError:
                    pass
                conns.append(s)
            for s in conns:
                s.close()

        cases = [
            # The floor of this machine: a second client that only pings, as the cases' senders do.
            ("ping (the baseline: a second client that only pings)", 300, lambda: call(sock, {"op": "ping"})),
            ("submit --after 50,000 distinct ids (refused)", 5,
             lambda: call(sock, submit_request(cwd, small_env, spec={"after_ok": list(range(1, 50001))}))),
            ("submit --after the same id 50,000 times", 5,
             lambda: call(sock, submit_request(cwd, small_env, spec={"after_ok": [first] * 50000}))),
            ("submit --after 1,000 tasks of an array", 5,
             lambda: call(sock, submit_request(cwd, small_env, spec={"after_ok": [f"{first}_[0-999]"]}))),
            ("submit an array of 1,000 tasks with a 0.9 MiB environment", 3,
             lambda: call(sock, submit_request(cwd, big_env, array=list(range(1000))))),
            ("submit with a 4 MiB environment (refused)", 5, lambda: call(sock, submit_request(cwd, huge_env))),
            ("submit an array of 10,000 tasks", 2,
             lambda: call(sock, submit_request(cwd, small_env, array=list(range(10000))))),
            ("submit an array of 100,000 tasks (the most an array may have)", 1,
             lambda: call(sock, submit_request(cwd, small_env, array=list(range(100000))))),
            ("queue all, limit 0 (one frame: the newest 1,000)", 5,
             lambda: call(sock, {"op": "queue", "all": True, "limit": 0})),
            ("queue all, limit 100,000, streamed JSON", 1,
             lambda: call(sock, {"op": "queue", "all": True, "limit": 100000, "stream": "json"})),
            ("queue (every unfinished job, one frame)", 1, lambda: call(sock, {"op": "queue"})),
            ("1,100 connections each with 2 bytes of a request", 1, lambda: trickle_connections(1100)),
            ("10 connections each with 6 MiB of a 7 MiB request", 1, lambda: partial_frames(10)),
        ]

        q = mp.Queue()
        stop = mp.Event()
        p = mp.Process(target=pinger, args=(sock, args.pings, stop, q))
        p.start()
        idle = q.get()
        p.join()
        idle_median, idle_worst = statistics.median(idle), max(idle)
        rows = []
        def worst_turn_ms():
            """The daemon's longest loop turns since the last call (ping with loop_stats), ms: without
            the tick, and with it."""
            r = call(sock, {"op": "ping", "loop_stats": True})
            return r.get("loop_worst_turn_ms", float("nan")), r.get("loop_worst_tick_turn_ms", float("nan"))

        for label, repeat, action in cases:
            print(f"case: {label}", file=sys.stderr)
            worst_turn_ms()  # from here on
            stop.clear()
            p = mp.Process(target=pinger, args=(sock, 0, stop, q))
            p.start()
            time.sleep(0.2)  # the pinger is pinging before the case starts
            t = time.perf_counter()
            reply = None
            for _ in range(repeat):
                reply = action()
            took = (time.perf_counter() - t) / repeat
            time.sleep(0.1)
            stop.set()
            lat = q.get()
            p.join()
            answer = "" if reply is None else ("ok" if reply.get("ok") else reply.get("error", "")[:60])
            rows.append((label, repeat, took, max(lat), max(lat) / idle_median, worst_turn_ms(), answer))
        print(f"- gpulane: {args.gpulane}; {args.jobs} held jobs queued; fake NVML; {os.cpu_count()} CPUs")
        print(f"- idle ping: median {idle_median * 1e3:.3f} ms, worst {idle_worst * 1e3:.3f} ms "
              f"(worst/median {idle_worst / idle_median:.1f}) over {len(idle)} pings\n")
        print("| request (another client) | times | its own time | worst ping meanwhile | / idle median "
              "| daemon's longest turn | longest tick turn | answer |")
        print("|---|---|---|---|---|---|---|---|")
        for label, repeat, took, worst, ratio, (turn_ms, tick_ms), answer in rows:
            print(f"| {label} | {repeat} | {took * 1e3:.1f} ms | {worst * 1e3:.2f} ms | {ratio:.1f} | {turn_ms:.1f} ms "
                  f"| {tick_ms:.1f} ms | {answer} |")
    finally:
        daemon.terminate()
        daemon.wait()
        if args.keep:
            print(f"kept {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
