#!/usr/bin/env python3
"""gpulane-web's /metrics latency under load (issue 23 item 6; target: p99 <= 50 ms), on a fake
8-GPU machine, loopback only:

  /usr/bin/python3 bench/web_load.py [--seconds 40] [--gpulane build/gpulane] > bench/results/web-load-<date>.md

Starts its own `gpulane daemon --user` (and so its gpulane-web) in a fresh folder under $TMPDIR on
the fake NVML (build/fake_nvml/current) with 8 GPUs cloned from the recorded H200, the sampler at
its default 1 s. Then, for --seconds each, one scenario after another:
  quiet        nothing but the scraper
  dashboards   8 dashboard-like clients, each on its own keep-alive connection: the page's first
               request (/api/v1/status?history=1h&columns=1), then /api/v1/status each second; as a
               browser, a client whose kept-alive connection the server closed opens a new one and
               asks again (counted); a poll fails when that fails too
  slowloris    the 8 dashboards, and 100 connections each trickling its head a byte a second
               (opened again whenever the server cuts one: 408 five seconds after its first byte)
  idle flood   the 8 dashboards, and 3,000 connections opened and left idle (opened again when the
               server sheds or times one out: at most 256 are kept)
The scraper, in its own process: GET /metrics on a fresh connection every 0.3 s (past the 0.25 s
gpulane-web shares an answer: each scrape asks the daemon), timed from connect to the answer's
last byte; a scrape unanswered within 10 s counts as failed. Load generators run in processes of
their own (Python threads of one process would queue the scraper behind them).
Prints a markdown table on stdout (p50, p99, max of the scrapes; the dashboards' own polls);
progress on stderr. Everything it starts it stops.
"""
import argparse
import json
import multiprocessing as mp
import os
import resource
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from web_bench import ROOT, eight_gpus, wait_for  # noqa: E402

SCRAPE_EVERY_S = 0.3
TRICKLERS = 100
IDLE = 3000


def exchange(port, request, timeout_s=10):
    """Sends `request` on a new connection and reads until the server closes it: (seconds, bytes) or (None, b'')."""
    start = time.perf_counter()
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout_s)
    try:
        s.sendall(request)
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        return time.perf_counter() - start, data
    except OSError:
        return None, b""
    finally:
        s.close()


def read_response(sock, timeout_s=10):
    """One response on a keep-alive connection (by its Content-Length): its status, or 0."""
    sock.settimeout(timeout_s)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return 0
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    length = next((int(l.split(b":", 1)[1]) for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")), 0)
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            return 0
        body += chunk
    return int(head.split(b" ", 2)[1])


def dashboards(port, stop, out):
    """8 dashboard-like clients (threads of this process): the page's first request, then a poll each second."""
    import threading
    times, failed, reopened = [], [0], [0]

    def tab():
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        path = "/api/v1/status?history=1h&columns=1"
        while not stop.is_set():
            t = time.perf_counter()
            request = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
            ok = False
            for attempt in range(2):  # as a browser does: a kept-alive connection the server closed is opened again, once
                try:
                    s.sendall(request)
                    ok = read_response(s) == 200
                except OSError:
                    ok = False
                if ok:
                    break
                s.close()
                s = socket.create_connection(("127.0.0.1", port), timeout=10)
                reopened[0] += 1
            if ok:
                times.append(time.perf_counter() - t)
            else:
                failed[0] += 1
            path = "/api/v1/status"
            stop.wait(max(0.0, 1.0 - (time.perf_counter() - t)))
        s.close()

    threads = [threading.Thread(target=tab) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out.put((times, failed[0], reopened[0]))


def slowloris(port, stop):
    """TRICKLERS connections, each sending its head a byte a second, never ending it; opened again when cut."""
    def opened():
        s = socket.create_connection(("127.0.0.1", port))
        s.setblocking(False)
        s.send(b"GET /metrics HTTP/1.1\r\nX-Slow: ")
        return s
    conns = [opened() for _ in range(TRICKLERS)]
    while not stop.wait(1.0):
        for i, s in enumerate(conns):
            try:
                if select.select([s], [], [], 0)[0] and not s.recv(4096):
                    raise ConnectionResetError
                s.send(b"a")
            except OSError:
                s.close()
                conns[i] = opened()
    for s in conns:
        s.close()


def idle_flood(port, stop):
    """IDLE connections opened and left idle; those the server closes are opened again."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, IDLE + 200), hard))

    def opened():
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", port))
        return s
    conns = [opened() for _ in range(IDLE)]
    while not stop.wait(0.5):
        readable = select.poll()
        by_fd = {}
        for s in conns:
            readable.register(s, select.POLLIN)
            by_fd[s.fileno()] = s
        closed = {fd for fd, _ in readable.poll(0)}
        for i, s in enumerate(conns):
            if s.fileno() in closed:
                try:
                    gone = not s.recv(4096)
                except OSError:
                    gone = True
                if gone:
                    s.close()
                    conns[i] = opened()
    for s in conns:
        s.close()


def scrape_for(port, seconds):
    request = f"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n".encode()
    times, failed = [], 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        t, data = exchange(port, request)
        if t is None or not data.startswith(b"HTTP/1.1 200 "):
            failed += 1
        else:
            times.append(t)
        time.sleep(SCRAPE_EVERY_S)
    return times, failed


def pct(samples, p):
    s = sorted(samples)
    return s[max(0, -(-p * len(s) // 100) - 1)] * 1000 if s else float("nan")


def scenario(port, seconds, with_dashboards, attack):
    stop = mp.Event()
    out = mp.Queue()
    procs = []
    if with_dashboards:
        procs.append(mp.Process(target=dashboards, args=(port, stop, out)))
    if attack:
        procs.append(mp.Process(target=attack, args=(port, stop)))
    for p in procs:
        p.start()
    time.sleep(3 if procs else 0)  # the load in place before the first scrape
    scrapes, failed = scrape_for(port, seconds)
    stop.set()
    polls = out.get(timeout=60) if with_dashboards else ([], 0, 0)
    for p in procs:
        p.join(30)
    return scrapes, failed, polls


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpulane", default=os.path.join(ROOT, "build", "gpulane"))
    ap.add_argument("--seconds", type=float, default=40)
    args = ap.parse_args()
    load_at_start = open("/proc/loadavg").read().split()[:3]
    tmp = tempfile.mkdtemp(prefix="gpulane-web-load-")
    json.dump(eight_gpus(), open(os.path.join(tmp, "nvml.json"), "w"))
    open(os.path.join(tmp, "config.toml"), "w").write('[web]\nlisten = "127.0.0.1:0"\n')
    os.makedirs(os.path.join(tmp, "leases"), mode=0o1777)
    env = dict(os.environ, GPULANE_NVML_LIBRARY=os.path.join(ROOT, "build", "fake_nvml", "current", "libnvidia-ml.so.1"),
               FAKE_NVML_STATE=os.path.join(tmp, "nvml.json"), GPULANE_CONFIG=os.path.join(tmp, "config.toml"),
               GPULANE_LEASE_DIR=os.path.join(tmp, "leases"), GPULANE_SOCKET=os.path.join(tmp, "sock"),
               GPULANE_STATE_DIR=os.path.join(tmp, "state"), GPULANE_SYSTEM_DAEMON="0")
    log_path = os.path.join(tmp, "daemon.log")
    daemon = subprocess.Popen([args.gpulane, "daemon", "--user"], env=env, stdout=open(log_path, "w"), stderr=subprocess.STDOUT)
    try:
        marker = "gpulane-web: listening on http://127.0.0.1:"
        port = wait_for("gpulane-web's start", lambda: marker in open(log_path).read() and
                        int(open(log_path).read().split(marker)[1].split("/")[0]))
        wait_for("a sample of all 8 GPUs", lambda: exchange(port, f"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                                            "Connection: close\r\n\r\n".encode())[1]
                 .count(b"\nDCGM_FI_DEV_GPU_UTIL{") == 8)
        rows = []
        for name, dash, attack in [("quiet: the scraper alone", False, None),
                                   ("8 dashboards polling each second", True, None),
                                   (f"8 dashboards + slowloris: {TRICKLERS} heads trickled a byte a second", True, slowloris),
                                   (f"8 dashboards + idle flood: {IDLE:,} idle connections kept open", True, idle_flood)]:
            print(f"{name}: {args.seconds:g} s", file=sys.stderr)
            rows.append((name, *scenario(port, args.seconds, dash, attack)))
        load = open("/proc/loadavg").read().split()[:3]
        print(f"# gpulane-web's /metrics under load, fake 8-GPU machine ({time.strftime('%Y-%m-%d')})\n")
        print(f"Command: `/usr/bin/python3 bench/web_load.py --seconds {args.seconds:g}`; host {socket.gethostname()}, "
              f"{os.cpu_count()} cores shared with other work (load average {' '.join(load_at_start)} at the start, "
              f"{' '.join(load)} at the end); the fake NVML, loopback. A scrape: GET /metrics on a fresh connection "
              f"every {SCRAPE_EVERY_S} s, connect to last byte. Target: p99 ≤ 50 ms.\n")
        print("| scenario | scrapes | failed | p50 ms | p99 ms | max ms | dashboards' polls | their p50 / p99 ms | failed polls "
              "| connections the server closed (opened again) |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for name, scrapes, failed, (polls, poll_failed, reopened) in rows:
            dash = (f"{len(polls)} | {pct(polls, 50):.1f} / {pct(polls, 99):.1f} | {poll_failed} | {reopened}"
                    if polls or poll_failed else "- | - | - | -")
            print(f"| {name} | {len(scrapes)} | {failed} | {pct(scrapes, 50):.1f} | {pct(scrapes, 99):.1f} | "
                  f"{max(scrapes) * 1000 if scrapes else float('nan'):.1f} | {dash} |")
    finally:
        daemon.terminate()
        daemon.wait(30)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
