#!/usr/bin/env python3
"""The daemon stalls of issue 23, item 8, measured through the wire protocol (docs/protocol.md).

  bench/daemon_stalls.py cancel  [--gpulane build/gpulane] [--jobs 300000]
      Queues --jobs held tasks (arrays of 100,000), then `cancel --user <me>` on one connection while
      a pinger pings on another (send, wait for the reply, 0.5 ms pause, again): how long the cancel
      took, how many it cancelled, and the longest a ping waited meanwhile.
  bench/daemon_stalls.py hold    [--gpulane build/gpulane] [--jobs 300000]
      Queues --jobs held tasks that wait (--after) for a held job, then `release` of all of them and
      then `hold` of all of them (each on one connection, by array id, as `gpulane release 12 13`
      sends it) while the pinger pings: for each, how long it took, how many it changed, and the
      longest a ping waited meanwhile. (Released, the tasks stay pending: their dependency never
      runs, so nothing starts.)
  bench/daemon_stalls.py restart [--gpulane build/gpulane] [--jobs 600000]
      Queues --jobs held tasks, stops the daemon (SIGTERM), starts it again and pings it from the
      moment it is started: when the first ping is answered, the longest gap between answered pings,
      and when a queue request is first answered with the whole queue (not "still loading").
  bench/daemon_stalls.py pastcap [--gpulane build/gpulane] [--submits 200] [--nvml fake|real]
      The cost of a launch decision for jobs past `daemon.max_waiting` (docs/scheduling.md): with
      max_waiting 1 and one job holding every GPU (`sleep`), --submits 1-GPU jobs are submitted one
      at a time (each submit makes the daemon decide its launches), in two rounds on one daemon:
      first jobs without a time limit (never launched past the cap: the decision reads nothing),
      then jobs with a 1-minute limit (each decision reads the GPUs and the lease folder, as the
      lease line's waiters do). For each round: submit round trip median and p99, the loop's
      longest turn (`ping` with loop_stats); and their ratio, the baseline being the first round.
      `--nvml real`: the machine's own libnvidia-ml (a real GPU), else the fake with 2 x H200.
  bench/daemon_stalls.py flood   [--gpulane build/gpulane] [--submits 5000] [--clients 4]
      A system-mode daemon; root submits --submits held jobs as fast as --clients connections take
      them while `nobody` asks for the queue as `gpulane queue` does (a streamed table, read to its
      end) again and again: that other user's queue latency, median and p99, during the flood.

Each starts its own daemon (fake NVML: fake_nvml/current/libnvidia-ml.so.1 beside --gpulane, with the recorded
2 x H200 fixture) in a fresh folder under $TMPDIR, prints one JSON object on stdout (with the
1-minute load average before and after, from /proc/loadavg: the machine is shared) and progress on
stderr, and stops everything it started.
"""
import argparse
import json
import multiprocessing as mp
import os
import pwd
import shutil
import signal
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


def load1():
    return float(open("/proc/loadavg").read().split()[0])


def read_reply(s):
    n = struct.unpack(">I", recv_exact(s, 4))[0]
    return json.loads(recv_exact(s, n))


def call(sock_path, req, timeout=600):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(timeout)
    s.connect(sock_path)
    s.sendall(frame(req))
    reply = read_reply(s)
    s.close()
    return reply


def pct(sorted_samples, q):
    return sorted_samples[min(len(sorted_samples) - 1, max(0, int(q * len(sorted_samples) + 0.999999) - 1))] if sorted_samples else None


class Daemon:
    """A daemon of its own in a fresh folder; `system`: `gpulane daemon` (any user may connect)."""

    def __init__(self, gpulane, system=False, config="", real_nvml=False):
        self.gpulane, self.system = gpulane, system
        self.tmp = tempfile.mkdtemp(prefix="gpulane-stalls-")
        os.chmod(self.tmp, 0o755)
        fixture = os.path.join(ROOT, "tests", "fixtures", "h200x2-2026-11-30", "nvml_snapshot.json")
        state = json.load(open(fixture))
        for dev in state["devices"]:
            for p in dev.get("processes", []):
                p["pid"] = 4000000 - p["pid"]  # nobody's: another container's process
        json.dump(state, open(os.path.join(self.tmp, "nvml.json"), "w"))
        with open(os.path.join(self.tmp, "config.toml"), "w") as f:
            f.write(config)
        os.makedirs(os.path.join(self.tmp, "leases"), mode=0o1777)
        os.chmod(os.path.join(self.tmp, "leases"), 0o1777)
        self.work = os.path.join(self.tmp, "work")
        os.makedirs(self.work)
        self.sock = os.path.join(self.tmp, "run", "sock")
        nvml = os.path.join(os.path.dirname(os.path.abspath(gpulane)), "fake_nvml", "current", "libnvidia-ml.so.1")
        self.env = dict(os.environ, GPULANE_NVML_LIBRARY=nvml, FAKE_NVML_STATE=os.path.join(self.tmp, "nvml.json"),
                        GPULANE_CONFIG=os.path.join(self.tmp, "config.toml"),
                        GPULANE_LEASE_DIR=os.path.join(self.tmp, "leases"), GPULANE_SOCKET=self.sock,
                        GPULANE_STATE_DIR=os.path.join(self.tmp, "state"))
        if real_nvml:  # the machine's own library and GPUs
            del self.env["GPULANE_NVML_LIBRARY"], self.env["FAKE_NVML_STATE"]
        self.proc = None

    def start(self):
        log = open(os.path.join(self.tmp, "daemon.log"), "a")
        argv = [self.gpulane, "daemon"] + ([] if self.system else ["--user"])
        self.proc = subprocess.Popen(argv, env=self.env, stdout=log, stderr=log)
        return time.perf_counter()

    def wait_ping(self, timeout_s=120):
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            try:
                if call(self.sock, {"op": "ping"}, 5).get("ok"):
                    return
            except OSError:
                time.sleep(0.02)
        raise RuntimeError("the daemon did not answer")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(120)

    def queue_held(self, jobs, after=None):
        """Queues `jobs` held tasks in arrays of 100,000 (each waiting for job `after`, if given); their array ids."""
        small_env = ["PATH=/usr/bin:/bin"]
        done, arrays = 0, []
        while done < jobs:
            n = min(100000, jobs - done)
            spec = {"argv": ["true"], "cwd": self.work, "env": small_env, "request": {"count": 1}, "name": "bench"}
            if after is not None:
                spec["after_ok"] = [after]
            r = call(self.sock, {"op": "submit", "spec": spec, "hold": True, "array": list(range(n))})
            assert r["ok"], r
            arrays.append(r["array_job_id"])
            done += n
            print(f"  {done} held jobs queued", file=sys.stderr)
        return arrays

    def cleanup(self):
        self.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)


def pinger(sock_path, stop, out):
    """Pings on one connection until `stop` is set; puts (latencies, longest gap between answers), seconds."""
    s = socket.socket(socket.AF_UNIX)
    s.connect(sock_path)
    ping = frame({"op": "ping"})
    lat, gap, last = [], 0.0, time.perf_counter()
    while not stop.is_set():
        t = time.perf_counter()
        s.sendall(ping)
        read_reply(s)
        now = time.perf_counter()
        lat.append(now - t)
        gap, last = max(gap, now - last), now
        time.sleep(0.0005)
    out.put((lat, gap))


def cmd_cancel(args):
    d = Daemon(args.gpulane)
    try:
        d.start()
        d.wait_ping()
        d.queue_held(args.jobs)
        load_before = load1()
        stop, out = mp.Event(), mp.Queue()
        p = mp.Process(target=pinger, args=(d.sock, stop, out))
        p.start()
        time.sleep(0.3)
        t = time.perf_counter()
        reply = call(d.sock, {"op": "cancel", "user": pwd.getpwuid(os.getuid()).pw_name})
        cancel_s = time.perf_counter() - t
        time.sleep(0.1)
        stop.set()
        lat, gap = out.get(timeout=60)
        p.join()
        left = call(d.sock, {"op": "queue", "stream": "table"})
        lat.sort()
        print(json.dumps({"case": "cancel", "gpulane": args.gpulane, "jobs": args.jobs, "ok": reply.get("ok"),
                          "cancelled": len(reply.get("cancelled", [])), "cancel_s": round(cancel_s, 3),
                          "left_in_queue": left.get("count"), "pings": len(lat),
                          "ping_median_ms": round(1e3 * statistics.median(lat), 2), "ping_p99_ms": round(1e3 * pct(lat, 0.99), 2),
                          "ping_max_ms": round(1e3 * lat[-1], 1), "longest_gap_ms": round(1e3 * gap, 1),
                          "load1_before": load_before, "load1_after": load1()}))
    finally:
        d.cleanup()


def pinged_call(sock_path, request):
    """`request` on its own connection while the pinger pings: (reply, seconds, sorted latencies, longest gap)."""
    stop, out = mp.Event(), mp.Queue()
    p = mp.Process(target=pinger, args=(sock_path, stop, out))
    p.start()
    time.sleep(0.3)
    t = time.perf_counter()
    reply = call(sock_path, request)
    took_s = time.perf_counter() - t
    time.sleep(0.1)
    stop.set()
    lat, gap = out.get(timeout=60)
    p.join()
    lat.sort()
    return reply, took_s, lat, gap


def cmd_hold(args):
    d = Daemon(args.gpulane)
    try:
        d.start()
        d.wait_ping()
        spec = {"argv": ["true"], "cwd": d.work, "env": ["PATH=/usr/bin:/bin"], "request": {"count": 1}, "name": "gate"}
        gate = call(d.sock, {"op": "submit", "spec": spec, "hold": True})
        assert gate["ok"], gate
        arrays = d.queue_held(args.jobs, after=gate["ids"][0])
        for op in ("release", "hold"):
            load_before = load1()
            call(d.sock, {"op": "ping", "loop_stats": True})  # the loop's longest turns from here on
            reply, took_s, lat, gap = pinged_call(d.sock, {"op": op, "ids": [str(a) for a in arrays]})
            stats = call(d.sock, {"op": "ping", "loop_stats": True})
            print(json.dumps({"case": op, "gpulane": args.gpulane, "jobs": args.jobs, "ok": reply.get("ok"),
                              "changed": len(reply.get("changed", [])), "seconds": round(took_s, 3),
                              "pings": len(lat), "ping_median_ms": round(1e3 * statistics.median(lat), 2),
                              "ping_p99_ms": round(1e3 * pct(lat, 0.99), 2), "ping_max_ms": round(1e3 * lat[-1], 1),
                              "longest_gap_ms": round(1e3 * gap, 1),
                              "loop_worst_turn_ms": round(stats.get("loop_worst_turn_ms", -1), 1),
                              "loop_worst_tick_turn_ms": round(stats.get("loop_worst_tick_turn_ms", -1), 1),
                              "load1_before": load_before, "load1_after": load1()}))
            sys.stdout.flush()
    finally:
        d.cleanup()


def cmd_restart(args):
    d = Daemon(args.gpulane)
    try:
        d.start()
        d.wait_ping()
        d.queue_held(args.jobs)
        d.stop()
        load_before = load1()
        started = d.start()
        first_ping = first_queue = None
        gap, last, pings, loading_seen, listed = 0.0, None, 0, None, None
        while first_queue is None and time.perf_counter() - started < 300:
            try:
                s = socket.socket(socket.AF_UNIX)
                s.settimeout(60)
                s.connect(d.sock)
            except OSError:
                time.sleep(0.005)
                continue
            try:
                s.sendall(frame({"op": "ping"}))
                pong = read_reply(s)
                now = time.perf_counter()
                pings += 1
                if first_ping is None:
                    first_ping = now - started
                if last is not None:
                    gap = max(gap, now - last)
                last = now
                if "loading" in pong:
                    loading_seen = pong["loading"]
                s.sendall(frame({"op": "queue", "all": False, "stream": "table"}))  # as `gpulane queue`
                q = read_reply(s)  # the head: the count of jobs listed, or an error while loading
                if q.get("ok"):
                    first_queue = time.perf_counter() - started
                    listed = q.get("count")
            except (OSError, ConnectionError):
                pass
            finally:
                s.close()
            time.sleep(0.005)
        print(json.dumps({"case": "restart", "gpulane": args.gpulane, "jobs": args.jobs,
                          "first_ping_s": round(first_ping, 3) if first_ping is not None else None,
                          "first_full_queue_s": round(first_queue, 3) if first_queue is not None else None,
                          "queue_listed": listed, "pings": pings, "longest_gap_ms": round(1e3 * gap, 1), "loading_seen": loading_seen,
                          "load1_before": load_before, "load1_after": load1()}))
    finally:
        d.cleanup()


def flood_client(sock_path, request, count, out):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sock_path)
    acked = 0
    for _ in range(count):
        s.sendall(request)
        acked += bool(read_reply(s).get("ok"))
    out.put(acked)


def other_user_queue(sock_path, uid, stop, out):
    """As `nobody`: `gpulane queue`'s request (a streamed table), read to its end, again and again."""
    os.setgid(uid[1])
    os.setuid(uid[0])
    lat = []
    request = frame({"op": "queue", "all": False, "stream": "table"})
    while not stop.is_set():
        t = time.perf_counter()
        s = socket.socket(socket.AF_UNIX)
        s.connect(sock_path)
        s.sendall(request)
        head = read_reply(s)
        assert head.get("ok"), head
        while True:  # raw text parts, then an empty one
            n = struct.unpack(">I", recv_exact(s, 4))[0]
            if n == 0:
                break
            recv_exact(s, n)
        s.close()
        lat.append((t, time.perf_counter() - t))
        time.sleep(0.01)
    out.put(lat)


def cmd_flood(args):
    d = Daemon(args.gpulane, system=True)
    try:
        d.start()
        d.wait_ping()
        os.chmod(os.path.dirname(d.sock), 0o755)
        nobody = pwd.getpwnam("nobody")
        stop, out = mp.Event(), mp.Queue()
        q = mp.Process(target=other_user_queue, args=(d.sock, (nobody.pw_uid, nobody.pw_gid), stop, out))
        q.start()
        time.sleep(1.0)  # the idle figure: calls before the flood
        spec = {"argv": ["true"], "cwd": d.work, "env": ["PATH=/usr/bin:/bin"], "request": {"count": 1}, "name": "flood"}
        request = frame({"op": "submit", "spec": spec, "hold": True})
        load_before = load1()
        acks = mp.Queue()
        per = args.submits // args.clients
        t = time.perf_counter()
        clients = [mp.Process(target=flood_client, args=(d.sock, request, per, acks)) for _ in range(args.clients)]
        for c in clients:
            c.start()
        acked = sum(acks.get(timeout=600) for _ in clients)
        end = time.perf_counter()
        flood_s = end - t
        for c in clients:
            c.join()
        stop.set()
        calls = out.get(timeout=120)
        q.join()
        idle = sorted(1e3 * x for start, x in calls if start + x < t)
        during = sorted(1e3 * x for start, x in calls if start >= t and start < end)
        print(json.dumps({"case": "flood", "gpulane": args.gpulane, "submits": args.submits, "clients": args.clients,
                          "acked": acked, "flood_s": round(flood_s, 2), "queue_calls_during": len(during),
                          "idle_queue_median_ms": round(statistics.median(idle), 1),
                          "queue_median_ms": round(statistics.median(during), 1), "queue_p99_ms": round(pct(during, 0.99), 1),
                          "queue_max_ms": round(during[-1], 1), "load1_before": load_before, "load1_after": load1()}))
    finally:
        d.cleanup()


def timed_submits(d, count, request):
    """`count` submits of `request` one after another: sorted round trips (ms), and the loop's longest
    turn meanwhile (ms, `ping` with loop_stats: reset before, read after)."""
    call(d.sock, {"op": "ping", "loop_stats": True})
    took = []
    for _ in range(count):
        t = time.perf_counter()
        r = call(d.sock, {"op": "submit", "spec": {"argv": ["true"], "cwd": d.work, "env": ["PATH=/usr/bin:/bin"],
                                                    "request": request, "name": "pastcap"}})
        took.append(1e3 * (time.perf_counter() - t))
        assert r.get("ok"), r
    stats = call(d.sock, {"op": "ping", "loop_stats": True})
    took.sort()
    return took, max(stats.get("loop_worst_turn_ms", 0), stats.get("loop_worst_tick_turn_ms", 0))


def cmd_pastcap(args):
    d = Daemon(args.gpulane, config="[daemon]\nmax_waiting = 1\n", real_nvml=args.nvml == "real")
    try:
        state_path = os.path.join(d.tmp, "nvml.json")
        state = json.load(open(state_path))
        for dev in state["devices"]:  # the fake GPUs idle: the blocker takes them
            dev["processes"], dev["util"] = [], {"gpu": 0, "memory": 0}
            dev["memory"]["used"] = 648347648  # GPU 0's, idle
            dev["memory"]["free"] = dev["memory"]["total"] - dev["memory"]["used"]
        json.dump(state, open(state_path, "w"))
        d.start()
        d.wait_ping()
        gpus = call(d.sock, {"op": "ping"}).get("gpus", 0)
        assert gpus > 0, "the daemon sees no GPU"
        blocker = {"argv": ["sleep", "600"], "cwd": d.work, "env": ["PATH=/usr/bin:/bin"],
                   "request": {"count": gpus, "time_limit_s": 900}, "name": "blocker"}
        r = call(d.sock, {"op": "submit", "spec": blocker})
        assert r.get("ok"), r
        deadline = time.time() + 60
        while time.time() < deadline:  # the blocker holds every GPU before the rounds start
            jobs = call(d.sock, {"op": "queue"}).get("jobs", [])
            if any(j["spec"].get("name") == "blocker" and j.get("state") == "running" for j in jobs):
                break
            time.sleep(0.2)
        else:
            raise RuntimeError("the blocker did not start within 60 s: %s" % jobs)
        load_before = load1()
        rounds = {}
        for name, request in (("no_time_limit", {"count": 1}), ("time_limit", {"count": 1, "time_limit_s": 60})):
            took, worst = timed_submits(d, args.submits, request)
            rounds[name] = {"submit_median_ms": round(statistics.median(took), 2), "submit_p99_ms": round(pct(took, 0.99), 2),
                            "loop_worst_turn_ms": round(worst, 2)}
        jobs = call(d.sock, {"op": "queue"}).get("jobs", [])
        base, past = rounds["no_time_limit"], rounds["time_limit"]
        print(json.dumps({"case": "pastcap", "gpulane": args.gpulane, "nvml": args.nvml, "gpus": gpus,
                          "submits_per_round": args.submits, "max_waiting": 1,
                          "still_pending": sum(j.get("state") == "pending" for j in jobs),
                          "baseline": base, "past_cap": past,
                          "submit_median_ratio": round(past["submit_median_ms"] / base["submit_median_ms"], 2),
                          "load1_before": load_before, "load1_after": load1()}))
    finally:
        try:  # the blocker's supervisor and its sleep end with it
            call(d.sock, {"op": "cancel", "user": pwd.getpwuid(os.getuid()).pw_name}, 30)
        except OSError:
            pass
        d.cleanup()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="case", required=True)
    for name, jobs in (("cancel", 300000), ("hold", 300000), ("restart", 600000)):
        p = sub.add_parser(name)
        p.add_argument("--gpulane", default=os.path.join(ROOT, "build", "gpulane"))
        p.add_argument("--jobs", type=int, default=jobs)
    p = sub.add_parser("flood")
    p.add_argument("--gpulane", default=os.path.join(ROOT, "build", "gpulane"))
    p.add_argument("--submits", type=int, default=5000)
    p.add_argument("--clients", type=int, default=4)
    p = sub.add_parser("pastcap")
    p.add_argument("--gpulane", default=os.path.join(ROOT, "build", "gpulane"))
    p.add_argument("--submits", type=int, default=200)
    p.add_argument("--nvml", choices=("fake", "real"), default="fake")
    args = ap.parse_args()
    {"cancel": cmd_cancel, "hold": cmd_hold, "restart": cmd_restart, "flood": cmd_flood,
     "pastcap": cmd_pastcap}[args.case](args)


if __name__ == "__main__":
    sys.exit(main())
