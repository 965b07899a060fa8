#!/usr/bin/env python3
"""gpulane-web's speed on a fake 8-GPU machine (issue 11, "Speed and footprint"): a /metrics scrape
(target 5 ms) and a dashboard page load (target 300 ms), each with a baseline measured in the same
run and the ratio to it.

  /usr/bin/python3 bench/web_bench.py [--scrapes 300] [--loads 20] [--profile 10] [--gpulane build/gpulane] [--keep]

Starts its own `gpulane daemon --user` (and so its gpulane-web, `[web] listen = "127.0.0.1:0"`) in
a fresh folder under $TMPDIR on the fake NVML (build/fake_nvml/current) with 8 GPUs cloned from the
recorded H200, waits until /metrics has a sample of each GPU, then 65 s with the sampler at 100 ms
(telemetry.interval), so that each GPU's ring holds over 600 points: the page's first answer is as
large as after an hour at the default 1 s (it carries 600 points a GPU at most).
Then, interleaved in rounds so that drift of the machine hits every row alike:
  scrape      GET /metrics over one keep-alive HTTP/1.1 connection, as Prometheus scrapes, each 0.3 s
              after the last (gpulane-web shares an answer for 0.25 s: each scrape asks the daemon)
  baseline    the daemon's `metrics` op over its Unix socket, a new connection each (what gpulane-web
              asks for each scrape: the HTTP side's cost is the difference)
  floor       GET /api/v1/server (answered by gpulane-web alone): HTTP's own round trip here
and in Debian's headless Chromium (playwright-core from web/node_modules, bench/web_page_load.mjs):
  page load   a fresh page: navigation until the dashboard has drawn every GPU's card and chart
              (body[data-ready], after /api/v1/status?history=1h&columns=1), two ways:
              on the page's clock, navigation start until its mark 'painted' (web/src/app.js: the
              frame after ready has been painted); and as the harness sees it, page.goto until
              Playwright's raf polling finds the page drawn (its own round trips included)
  baseline    a fresh page navigating to the dashboard's own stylesheet (/app.css): a browser
              navigation's floor on the same server, the same two ways (its 'painted' set by an
              init script the same way, after its load event); each row's ratio is to the
              baseline measured on the same clock
  profile     with --profile N: N more page loads by bench/web_page_profile.mjs, where the time goes
              (the page's Resource and Navigation Timing and its marks, medians)
Prints a markdown table on stdout (median, p90, ratio to the baseline, the target); progress on stderr.
Everything it starts it stops.
"""
import argparse
import copy
import http.client
import json
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
WARM_S = 65  # at 10 samples a second: 650 points a GPU, over the 600 a page's first answer carries (http_server.cc)
SHARED_S = 0.3  # gpulane-web answers identical questions within 0.25 s from one daemon answer (web/daemon_client.h)


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from daemon_proto import frame, recv_exact  # noqa: E402


def call(sock_path, req):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sock_path)
    s.sendall(frame(req))
    n = struct.unpack(">I", recv_exact(s, 4))[0]
    reply = json.loads(recv_exact(s, n))
    s.close()
    return reply


def eight_gpus():
    fixture = json.load(open(os.path.join(ROOT, "tests", "fixtures", "h200x2-2026-11-30", "nvml_snapshot.json")))
    base = fixture["devices"][0]
    fixture["devices"] = []
    for i in range(8):
        d = copy.deepcopy(base)
        d["uuid"] = f"GPU-d{i:07x}-0000-4000-8000-{i:012x}"
        d["pci_bus_id"] = f"00000000:{0x18 + 0x10 * i:02X}:00.0"
        d["minor"] = i
        d["processes"] = []
        fixture["devices"].append(d)
    return fixture


def p90(samples):
    s = sorted(samples)
    return s[max(0, -(-9 * len(s) // 10) - 1)]


def wait_for(what, predicate, timeout_s=60):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise SystemExit(f"web_bench: {what} did not happen within {timeout_s} s")


def http_get(conn, path):
    t = time.perf_counter()
    conn.request("GET", path)
    r = conn.getresponse()
    body = r.read()
    if r.status != 200:
        raise SystemExit(f"web_bench: GET {path}: HTTP {r.status}: {body[:200]!r}")
    return time.perf_counter() - t, body


def row(label, samples_s, baseline_s, target):
    med = statistics.median(samples_s) * 1000
    base = statistics.median(baseline_s) * 1000
    return f"| {label} | {len(samples_s)} | {med:.2f} | {p90(samples_s) * 1000:.2f} | {med / base:.2f} | {target} |"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpulane", default=os.path.join(ROOT, "build", "gpulane"))
    ap.add_argument("--scrapes", type=int, default=300)
    ap.add_argument("--loads", type=int, default=20)
    ap.add_argument("--profile", type=int, default=0)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    load_at_start = open("/proc/loadavg").read().split()[:3]
    tmp = tempfile.mkdtemp(prefix="gpulane-web-bench-")
    json.dump(eight_gpus(), open(os.path.join(tmp, "nvml.json"), "w"))
    open(os.path.join(tmp, "config.toml"), "w").write('[web]\nlisten = "127.0.0.1:0"\n[telemetry]\ninterval = "100ms"\n')
    os.makedirs(os.path.join(tmp, "leases"), mode=0o1777)
    sock = os.path.join(tmp, "sock")
    env = dict(os.environ, GPULANE_NVML_LIBRARY=os.path.join(ROOT, "build", "fake_nvml", "current", "libnvidia-ml.so.1"),
               FAKE_NVML_STATE=os.path.join(tmp, "nvml.json"), GPULANE_CONFIG=os.path.join(tmp, "config.toml"),
               GPULANE_LEASE_DIR=os.path.join(tmp, "leases"), GPULANE_SOCKET=sock,
               GPULANE_STATE_DIR=os.path.join(tmp, "state"), GPULANE_SYSTEM_DAEMON="0")
    log_path = os.path.join(tmp, "daemon.log")
    daemon = subprocess.Popen([args.gpulane, "daemon", "--user"], env=env, stdout=open(log_path, "w"), stderr=subprocess.STDOUT)
    try:
        marker = "gpulane-web: listening on http://127.0.0.1:"
        port = wait_for("gpulane-web's start", lambda: marker in open(log_path).read() and
                        int(open(log_path).read().split(marker)[1].split("/")[0]))
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        wait_for("a sample of all 8 GPUs", lambda: http_get(conn, "/metrics")[1].count(b"\nDCGM_FI_DEV_GPU_UTIL{") == 8)
        print(f"daemon and gpulane-web up (port {port}); {WARM_S} s for the rings to fill", file=sys.stderr)
        time.sleep(WARM_S)  # the state a page meets: over 600 points a GPU (the chart's cap), as after an hour at 1 s
        conn.close()  # idle past the server's keep-alive: a new connection, as a scraper's after a restart
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        print(f"{args.scrapes} rounds", file=sys.stderr)
        scrape, baseline, floor = [], [], []
        for _ in range(args.scrapes):
            time.sleep(SHARED_S)  # past the time gpulane-web shares an answer: each scrape asks the daemon
            scrape.append(http_get(conn, "/metrics")[0])
            t = time.perf_counter()
            call(sock, {"op": "metrics"})
            baseline.append(time.perf_counter() - t)
            floor.append(http_get(conn, "/api/v1/server")[0])
        text_bytes = len(http_get(conn, "/metrics")[1])
        print(f"{args.loads} page loads in Chromium", file=sys.stderr)
        page = subprocess.run(["node", os.path.join(ROOT, "bench", "web_page_load.mjs"), f"http://127.0.0.1:{port}/",
                               str(args.loads), "8"], capture_output=True, text=True, timeout=600)
        if page.returncode != 0:
            raise SystemExit(f"web_bench: the page load benchmark failed: {page.stdout}{page.stderr}")
        loads = json.loads(page.stdout)
        profile = None
        if args.profile:
            print(f"{args.profile} page loads profiled", file=sys.stderr)
            profile = subprocess.run(["node", os.path.join(ROOT, "bench", "web_page_profile.mjs"), f"http://127.0.0.1:{port}/",
                                      str(args.profile), "8"], capture_output=True, text=True, timeout=600)
            if profile.returncode != 0:
                raise SystemExit(f"web_bench: the page load profile failed: {profile.stdout}{profile.stderr}")
        load = open("/proc/loadavg").read().split()[:3]
        cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"], capture_output=True, text=True)
        print(f"# gpulane-web on a fake 8-GPU machine ({time.strftime('%Y-%m-%d')})\n")
        shown = f" --profile {args.profile}" if args.profile else ""
        print(f"Command: `/usr/bin/python3 bench/web_bench.py --scrapes {args.scrapes} --loads {args.loads}{shown}`; host "
              f"{socket.gethostname()}, {os.cpu_count()} cores ({cpu.stdout.strip()}), Chromium "
              f"{loads['browser']}; load average at the start {' '.join(load_at_start)}, at the end {' '.join(load)} (other work on the machine meanwhile); the fake NVML (a "
              f"dry run, not GPU numbers). /metrics is {text_bytes} bytes.\n")
        print("| what | n | median ms | p90 ms | ratio to its baseline | target |")
        print("|---|---|---|---|---|---|")
        print(row("GET /metrics (keep-alive, as Prometheus)", scrape, baseline, "≤ 5 ms"))
        print(row("baseline: the daemon's `metrics` op on its socket", baseline, baseline, ""))
        print(row("floor: GET /api/v1/server (no daemon)", floor, baseline, ""))
        s = [x / 1000 for x in loads["page_ms"]]
        b = [x / 1000 for x in loads["baseline_ms"]]
        sp = [x / 1000 for x in loads["page_painted_ms"]]
        bp = [x / 1000 for x in loads["baseline_painted_ms"]]
        print(row("dashboard page load, the page's clock: navigation start to 'painted' (the frame with every GPU's "
                  "card and chart painted)", sp, bp, "≤ 300 ms"))
        print(row("baseline, the page's clock: navigation to /app.css, start to 'painted' (the frame after its load)",
                  bp, bp, ""))
        print(row("dashboard page load as the harness sees it: page.goto until body[data-ready] and every chart drawn "
                  "(Playwright's raf polling; its own round trips included)", s, b, "≤ 300 ms"))
        print(row("baseline as the harness sees it: page.goto of /app.css until loaded", b, b, ""))
        if profile:
            print(f"\nWhere a page load's time goes (bench/web_page_profile.mjs, {args.profile} more loads after the "
                  "table's, the same server; the page's marks are web/src/app.js's):\n")
            print(profile.stdout.rstrip())
    finally:
        daemon.terminate()
        daemon.wait(30)
        if args.keep:
            print(f"kept {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
