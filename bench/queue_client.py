#!/usr/bin/env python3
"""Speaks gpulane's wire protocol directly and measures the job queue; driven by
bench/queue_throughput.sh, which starts the daemons, task-spooler and Slurm. Every subcommand but
`report` prints one JSON object on stdout; `report` prints the markdown table.

  queue_client.py flood --socket S --clients N --seconds T --cwd DIR [--start-delay 0.5]
      N client processes, each with its own persistent connection, submit held jobs one request
      at a time (send, wait for the acknowledgement, send the next) for T seconds.
  queue_client.py array --socket S --count N --cwd DIR
      One held array submission of N tasks (indices 0..N-1).
  queue_client.py seq-rate --n N [--chunks 3] [-w 3] --case LABEL CMD [--case ...] [--skip LABEL REASON ...]
      Each CMD run W times (warm-up), then N times one after another (a fresh process each time,
      output discarded); the
      cases take turns in --chunks chunks so that drift of the machine hits all of them alike.
  queue_client.py latency -n 10 -w 2 --case LABEL CMD [--case ...] [--skip ...]
      Fork-to-exit time of each CMD (bench/timeit.py's run_once), interleaved.
  queue_client.py ping-during --socket S [--label L] -- CMD...
      While CMD runs (output discarded: a listing), pings the daemon on a connection of its own
      (send, wait for the reply, 1 ms pause, again): how long other clients wait meanwhile.
  queue_client.py sqlite-commits --dir D --seconds T
      The disk's floor for durable submissions: one INSERT per transaction into a WAL database with
      synchronous=FULL (like the daemon's), in D, for T seconds.
  queue_client.py handover --gpulane GL --work DIR --rounds R [--tsp TSP --tsp-socket SOCK]
      A = `sh -c 'sleep 0.3; date +%s.%N > a_end'` and B = `sh -c 'date +%s.%N > b_start'`
      submitted back to back (`gpulane submit`; `tsp`), latency = b_start - a_end.
  queue_client.py report --results DIR
      The markdown table from the JSON files the other subcommands wrote into DIR.

The submission request is the one `gpulane submit --hold -- true` sends (src/cli/cmd_submit.cc,
store::SpecToJson): argv, cwd, this process's whole environment, 1 GPU, name "true". It is encoded
once per client; the time measured is the daemon's, not Python's JSON encoder's.
"""
import argparse
import glob
import importlib.util
import json
import math
import multiprocessing as mp
import os
import shlex
import socket
import sqlite3
import statistics
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("bench_timeit", os.path.join(HERE, "timeit.py"))
bench_timeit = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_timeit)

PROTOCOL_VERSION = 2
A_SLEEP = "0.3"
TARGETS = {"flood_per_s": 2000.0, "cli_per_s": 500.0, "queue_10k_ms": 100.0, "queue_100k_ms": 500.0, "handover_ms": 10.0,
           "ping_during_ms": 100.0}
SLURM_DOCUMENTED_PER_S = 1000.0


# ---------------------------------------------------------------- the protocol
def frame(message):
    body = json.dumps(message, separators=(",", ":")).encode()
    return struct.pack(">I", len(body)) + body


def recv_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise ConnectionError("the daemon closed the connection")
        buf += chunk
    return bytes(buf)


def read_reply(sock):
    (n,) = struct.unpack(">I", recv_exact(sock, 4))
    return json.loads(recv_exact(sock, n))


def connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    return s


def call(path, message, timeout=600):
    with connect(path) as s:
        s.settimeout(timeout)
        s.sendall(frame(message))
        return read_reply(s)


def submit_spec(cwd, argv=("true",)):
    """What `gpulane submit --hold -- true` sends (store::SpecToJson's fields)."""
    return {"argv": list(argv), "cwd": cwd, "env": [f"{k}={v}" for k, v in os.environ.items()],
            "request": {"count": 1, "gpu_list": "", "share_foreign": False, "order": "memory", "priority": 0},
            "name": argv[0],
            "after_ok": [], "after_any": [], "output_path": "", "error_path": "", "kill_grace_s": 10.0}


# ---------------------------------------------------------------- flood
def _flood_client(path, request, start_at, seconds, results):
    acked, errors, lat_ns, ids = 0, [], [], []
    try:
        s = connect(path)
        s.settimeout(60)
    except OSError as e:
        results.put({"acked": 0, "errors": [f"connect: {e}"], "lat_ns": [], "ids": [], "end": time.time()})
        return
    while time.time() < start_at:
        time.sleep(0.0005)
    deadline = start_at + seconds
    try:
        while time.time() < deadline:
            t0 = time.perf_counter_ns()
            s.sendall(request)
            reply = read_reply(s)
            lat_ns.append(time.perf_counter_ns() - t0)
            if reply.get("ok"):
                acked += 1
                ids.extend(reply["ids"])
            else:
                errors.append(reply.get("error", "?"))
                if len(errors) > 20:
                    break
    except (OSError, ConnectionError, ValueError) as e:
        errors.append(f"{type(e).__name__}: {e}")
    end = time.time()
    s.close()
    results.put({"acked": acked, "errors": errors[:5], "lat_ns": lat_ns, "ids": ids, "end": end})


def cmd_flood(args):
    request = frame({"v": PROTOCOL_VERSION, "op": "submit", "spec": submit_spec(args.cwd), "hold": True})
    ctx = mp.get_context("fork")
    results = ctx.Queue()
    start_at = time.time() + args.start_delay
    procs = [ctx.Process(target=_flood_client, args=(args.socket, request, start_at, args.seconds, results))
             for _ in range(args.clients)]
    for p in procs:
        p.start()
    got = [results.get(timeout=args.seconds + 120) for _ in procs]
    for p in procs:
        p.join()
    acked = sum(g["acked"] for g in got)
    window = max(g["end"] for g in got) - start_at
    lat = sorted(x / 1e6 for g in got for x in g["lat_ns"])
    ids = [i for g in got for i in g["ids"]]
    out = {"clients": args.clients, "seconds": window, "acked": acked, "rate_per_s": acked / window if window > 0 else 0,
           "request_bytes": len(request), "errors": [e for g in got for e in g["errors"]][:5],
           "distinct_ids": len(set(ids)),
           "latency_ms": {"median": statistics.median(lat) if lat else None, "p99": pct(lat, 0.99), "max": lat[-1] if lat else None}}
    print(json.dumps(out))
    return 0 if acked and not out["errors"] and out["distinct_ids"] == acked else 1


def pct(sorted_samples, q):
    if not sorted_samples:
        return None
    return sorted_samples[max(0, math.ceil(q * len(sorted_samples)) - 1)]


# ---------------------------------------------------------------- array
def cmd_array(args):
    msg = {"v": PROTOCOL_VERSION, "op": "submit", "spec": submit_spec(args.cwd), "hold": True, "array": list(range(args.count))}
    t0 = time.perf_counter()
    reply = call(args.socket, msg)
    dt = time.perf_counter() - t0
    if not reply.get("ok"):
        print(json.dumps({"count": args.count, "error": reply.get("error")}))
        return 1
    print(json.dumps({"count": args.count, "tasks": len(reply["ids"]), "array_job_id": reply.get("array_job_id"),
                      "seconds": dt, "rate_per_s": len(reply["ids"]) / dt}))
    return 0


# ---------------------------------------------------------------- one-shot commands
class Ordered(argparse.Action):
    """--case and --skip rows, kept in command-line order."""

    def __call__(self, parser, namespace, values, option_string=None):
        rows = getattr(namespace, "rows", None) or []
        rows.append((self.dest, values[0], values[1]))
        namespace.rows = rows


def parse_rows(args):
    return [{"label": label, "argv": shlex.split(cmd) if kind == "case" else None, "samples": [],
             "error": None if kind == "case" else f"skipped: {cmd}"}
            for kind, label, cmd in getattr(args, "rows", [])]


def run_quiet(argv):
    try:
        return bench_timeit.run_once(argv)
    except OSError as e:
        return 0.0, 127, str(e)


def first_error_line(rc, err):
    return f"exit {rc}" + (f": {err.strip().splitlines()[-1][:160]}" if err.strip() else "")


def cmd_seq_rate(args):
    rows = parse_rows(args)
    live = [r for r in rows if r["argv"]]
    for r in live:
        r["runs"], r["seconds"] = 0, 0.0
        for _ in range(args.w):
            _, rc, err = run_quiet(r["argv"])
            if rc != 0:
                r["error"] = f"failed in a warm-up: {first_error_line(rc, err)}"
                print(f"{r['label']}: {r['error']}", file=sys.stderr)
                break
    per_chunk = [args.n // args.chunks + (1 if i < args.n % args.chunks else 0) for i in range(args.chunks)]
    for k in per_chunk:
        for r in live:
            if r["error"]:
                continue
            t0 = time.perf_counter()
            for _ in range(k):
                _, rc, err = run_quiet(r["argv"])
                if rc != 0:
                    r["error"] = f"failed after {r['runs']} runs: {first_error_line(rc, err)}"
                    print(f"{r['label']}: {r['error']}", file=sys.stderr)
                    break
                r["runs"] += 1
            r["seconds"] += time.perf_counter() - t0
    for r in rows:
        r.pop("samples", None)
        if r.get("runs"):
            r["rate_per_s"] = r["runs"] / r["seconds"]
            r["ms_per_submission"] = 1000 * r["seconds"] / r["runs"]
    print(json.dumps({"n": args.n, "chunks": args.chunks, "rows": rows}))
    return 0 if all(r["error"] is None or r["error"].startswith("skipped") for r in rows) else 1


def cmd_latency(args):
    rows = parse_rows(args)
    live = [r for r in rows if r["argv"]]
    for r in live:
        for _ in range(args.w):
            _, rc, err = run_quiet(r["argv"])
            if rc != 0:
                r["error"] = f"failed: {first_error_line(rc, err)}"
                print(f"{r['label']}: {r['error']}", file=sys.stderr)
                break
    live = [r for r in live if r["error"] is None]
    for _ in range(args.n):
        for r in live:
            if r["error"]:
                continue
            ms, rc, err = run_quiet(r["argv"])
            if rc != 0:
                r["error"] = f"failed during timing: {first_error_line(rc, err)}"
                continue
            r["samples"].append(ms)
    for r in rows:
        if r["samples"]:
            r["median_ms"] = statistics.median(r["samples"])
            r["p90_ms"] = pct(sorted(r["samples"]), 0.9)
    print(json.dumps({"n": args.n, "warmup": args.w, "rows": rows}))
    return 0 if all(r["error"] is None or r["error"].startswith("skipped") for r in rows) else 1


# ---------------------------------------------------------------- other clients during a listing
def cmd_ping_during(args):
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    ping = frame({"v": PROTOCOL_VERSION, "op": "ping"})
    s = connect(args.socket)
    s.settimeout(120)
    lat, errors = [], []
    t0 = time.perf_counter()
    proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    while proc.poll() is None:
        p0 = time.perf_counter_ns()
        try:
            s.sendall(ping)
            reply = read_reply(s)
        except (OSError, ConnectionError, ValueError) as e:
            errors.append(f"{type(e).__name__}: {e}")
            break
        lat.append((time.perf_counter_ns() - p0) / 1e6)
        if not reply.get("ok"):
            errors.append(reply.get("error", "?"))
        time.sleep(0.001)
    err = proc.communicate()[1].decode(errors="replace")
    listing_ms = 1000 * (time.perf_counter() - t0)
    s.close()
    if proc.returncode != 0:
        errors.append(f"{' '.join(command)}: {first_error_line(proc.returncode, err)}")
    lat.sort()
    out = {"label": args.label, "command": command, "listing_ms": listing_ms, "pings": len(lat), "errors": errors[:5],
           "median_ms": statistics.median(lat) if lat else None, "p99_ms": pct(lat, 0.99), "max_ms": lat[-1] if lat else None}
    print(json.dumps(out))
    return 0 if lat and not errors else 1


# ---------------------------------------------------------------- the disk's floor
def cmd_sqlite_commits(args):
    path = os.path.join(args.dir, "floor.db")
    db = sqlite3.connect(path, isolation_level=None)
    mode = db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
    db.execute("PRAGMA synchronous=FULL")
    sync = db.execute("PRAGMA synchronous").fetchone()[0]
    db.execute("CREATE TABLE IF NOT EXISTS jobs (id INTEGER PRIMARY KEY AUTOINCREMENT, spec TEXT NOT NULL)")
    row = json.dumps(submit_spec(args.dir))
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < args.seconds:
        db.execute("BEGIN IMMEDIATE")
        db.execute("INSERT INTO jobs (spec) VALUES (?)", (row,))
        db.execute("COMMIT")
        n += 1
    dt = time.perf_counter() - t0
    db.close()
    for suffix in ("", "-wal", "-shm"):
        try:
            os.unlink(path + suffix)
        except FileNotFoundError:
            pass
    print(json.dumps({"commits": n, "seconds": dt, "rate_per_s": n / dt, "ms_per_commit": 1000 * dt / n,
                      "journal_mode": mode, "synchronous": sync, "row_bytes": len(row)}))
    return 0


# ---------------------------------------------------------------- hand-over
def read_time(path):
    try:
        with open(path) as f:
            words = f.read().split()
    except FileNotFoundError:
        return None
    return float(words[-1]) if words else None


def gpulane_round(gl, work, k):
    d = os.path.join(work, f"gl.{k}")
    os.makedirs(d)
    a_end, b_start = os.path.join(d, "a_end"), os.path.join(d, "b_start")

    def gl_run(*argv, timeout=60):
        return subprocess.run([gl, *argv], cwd=d, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)

    ra = gl_run("submit", "--", "sh", "-c", f"sleep {A_SLEEP}; date +%s.%N > {a_end}")
    rb = gl_run("submit", "--", "sh", "-c", f"date +%s.%N > {b_start}")
    if ra.returncode != 0 or rb.returncode != 0:
        return None, f"submit failed: A exit {ra.returncode}, B exit {rb.returncode}: {(ra.stderr + rb.stderr).strip()[-200:]}"
    a, b = ra.stdout.strip(), rb.stdout.strip()
    rw = gl_run("wait", a, b)
    if rw.returncode != 0:
        return None, f"gpulane wait {a} {b}: exit {rw.returncode}: {rw.stderr.strip()[-200:]}"
    jobs = {}
    for j in (a, b):
        rs = gl_run("show", "--json", j)
        if rs.returncode == 0:
            jobs[j] = json.loads(rs.stdout)
    t_end, t_start = read_time(a_end), read_time(b_start)
    if t_end is None or t_start is None:
        return None, "a date stamp is missing"
    ga, gb = (jobs.get(j, {}).get("gpu_uuids") for j in (a, b))
    if ga != gb:
        return None, f"A and B ran on different GPUs ({ga} / {gb}): B did not wait for A"
    if t_start < t_end:
        return None, f"B started {1000 * (t_end - t_start):.1f} ms before A ended: B got the GPU first (out of submission order)"
    # Where the time goes: B's supervisor records its lease grant as start_time (before it writes
    # its "running" status durably and starts the command).
    granted = jobs.get(b, {}).get("start_time")
    parts = {"a_end_to_b_granted_ms": (granted - t_end) * 1000, "b_granted_to_b_start_ms": (t_start - granted) * 1000} if granted else {}
    return (t_start - t_end) * 1000, parts


def tsp_round(tsp, sock, work, k):
    d = os.path.join(work, f"ts.{k}")
    os.makedirs(d)
    a_end, b_start = os.path.join(d, "a_end"), os.path.join(d, "b_start")
    env = dict(os.environ, TS_SOCKET=sock, TMPDIR=d)

    def ts(*argv):
        return subprocess.run([tsp, *argv], env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)

    ra = ts("sh", "-c", f"sleep {A_SLEEP}; date +%s.%N > {a_end}")
    rb = ts("sh", "-c", f"date +%s.%N > {b_start}")
    if ra.returncode != 0 or rb.returncode != 0:
        return None, f"tsp failed to queue: {(ra.stderr + rb.stderr).strip()[-200:]}"
    rw = ts("-w", rb.stdout.strip())
    ts("-C")
    if rw.returncode != 0:
        return None, f"tsp -w {rb.stdout.strip()}: exit {rw.returncode} {rw.stderr.strip()[-200:]}"
    t_end, t_start = read_time(a_end), read_time(b_start)
    if t_end is None or t_start is None:
        return None, "a date stamp is missing"
    return (t_start - t_end) * 1000, {}


def cmd_handover(args):
    """Rounds take turns (gpulane, tsp, gpulane, ...); a failed round is noted and made up for, up
    to 2 x R attempts, so that each row gets R valid rounds where it can."""
    rows = {"gpulane": {"samples": [], "notes": [], "parts": [], "attempts": 0}}
    if args.tsp:
        rows["tsp"] = {"samples": [], "notes": [], "parts": [], "attempts": 0}
    k = 0
    while any(len(r["samples"]) < args.rounds and r["attempts"] < 2 * args.rounds for r in rows.values()):
        for name, r in rows.items():
            warm = k < args.warmup
            if not warm and (len(r["samples"]) >= args.rounds or r["attempts"] >= 2 * args.rounds):
                continue
            ms, extra = gpulane_round(args.gpulane, args.work, k) if name == "gpulane" else tsp_round(args.tsp, args.tsp_socket, args.work, k)
            if not warm:
                r["attempts"] += 1
            label = f"warm-up round {k + 1}" if warm else f"attempt {r['attempts']}"
            if ms is None:
                r["notes"].append(f"{label}: {extra}")
                print(f"{name} {label}: {extra}", file=sys.stderr)
            elif not warm:
                r["samples"].append(ms)
                r["parts"].append(extra)
        k += 1
    for r in rows.values():
        if r["samples"]:
            r["median_ms"] = statistics.median(r["samples"])
            r["p90_ms"] = pct(sorted(r["samples"]), 0.9)
        for key in ("a_end_to_b_granted_ms", "b_granted_to_b_start_ms"):
            vals = [p[key] for p in r["parts"] if key in p]
            if vals:
                r.setdefault("parts_median_ms", {})[key] = statistics.median(vals)
    print(json.dumps({"rounds": args.rounds, "warmup": args.warmup, "a_sleep_s": float(A_SLEEP), "rows": rows}))
    return 0 if len(rows["gpulane"]["samples"]) >= max(1, args.rounds // 2) else 1


# ---------------------------------------------------------------- report
def fmt_ms(x):
    return "–" if x is None else (f"{x:.1f}" if x >= 1 else f"{x:.2f}")


def fmt_rate(x):
    return "–" if x is None else f"{x:,.0f}/s"


def load(results, name):
    try:
        with open(os.path.join(results, name + ".json")) as f:
            return json.load(f)
    except (FileNotFoundError, ValueError):
        return None


def rate_verdict(rate, target):
    if rate >= target:
        return f"≥ {target:,.0f}/s: met"
    short = 100 * (1 - rate / target)
    return f"≥ {target:,.0f}/s: **missed** by {short:.1f} %" if short < 10 else f"≥ {target:,.0f}/s: **missed** by {short:.0f} %"


def ms_verdict(ms, target):
    if ms <= target:
        return f"≤ {target:,.0f} ms: met"
    return f"≤ {target:,.0f} ms: **missed**, {ms / target:.1f}× the target"


def cmd_report(args):
    R = args.results
    lines = ["| # | measurement | result | baseline (same run) | vs baseline | target |", "|---|---|---:|---|---:|---|"]
    notes = []
    measured = True

    def row(*cells):
        lines.append("| " + " | ".join(cells) + " |")

    # 1. concurrent durable submissions
    floods = [os.path.basename(p)[:-5] for p in glob.glob(os.path.join(R, "flood_*.json"))]
    durability = []
    for name in sorted((f for f in floods if len(f.split("_")) == 2 and f.split("_")[1].isdigit()), key=lambda s: int(s.split("_")[1])):
        f = load(R, name)
        if not f:
            continue
        rows_in_db = (load(R, name + "_durable") or {}).get("rows")
        durability.append((f["clients"], f["acked"], rows_in_db))
        floor = load(R, "sqlite_floor_" + name.split("_")[1])
        floor_rate = floor["rate_per_s"] if floor else None
        if floor:
            row("1", f"baseline: the disk's floor just before: one SQLite commit per submission (WAL, synchronous=FULL, "
                     f"{floor['row_bytes']:,} B row, same file system as jobs.db), one writer, {floor['seconds']:.1f} s",
                f"{fmt_rate(floor_rate)} ({floor['ms_per_commit']:.2f} ms/commit)", "–", "–", "–")
        rate = f["rate_per_s"]
        vs = f"{rate / floor_rate:.1f}× floor; " if floor_rate else ""
        vs += f"{rate / SLURM_DOCUMENTED_PER_S:.2f}× Slurm (doc.)"
        row("1", f"`submit` requests through the socket: {f['clients']} client process{'es' if f['clients'] > 1 else ''}, one persistent "
                 f"connection each, held jobs, {f['seconds']:.1f} s (per request: median {fmt_ms(f['latency_ms']['median'])} ms, "
                 f"p99 {fmt_ms(f['latency_ms']['p99'])} ms)",
            f"{fmt_rate(rate)} ({f['acked']:,} acknowledged)", "disk floor; Slurm's documented 1,000/s (not measured)", vs,
            rate_verdict(rate, TARGETS["flood_per_s"]))
        if f["errors"]:
            notes.append(f"{name}: errors: {'; '.join(f['errors'])}")
    full = load(R, "flood_busy")
    if full:
        empty = load(R, f"flood_{full['clients']}")
        rate = full["rate_per_s"]
        row("1", f"the same with {full['queued_before']:,} held jobs already queued: {full['clients']} client processes, "
                 f"{full['seconds']:.1f} s (per request: median {fmt_ms(full['latency_ms']['median'])} ms, p99 {fmt_ms(full['latency_ms']['p99'])} ms)",
            f"{fmt_rate(rate)} ({full['acked']:,} acknowledged)", f"{full['clients']} clients, empty queue (above)" if empty else "–",
            f"{rate / empty['rate_per_s']:.2f}×" if empty else "–", rate_verdict(rate, TARGETS["flood_per_s"]))
    if durability:
        ok = all(a == r for _, a, r in durability)
        row("1", "durability: rows in jobs.db after the daemon is killed with SIGKILL = acknowledged submissions",
            ", ".join(f"{c} client{'s' if c > 1 else ''}: {r if r is not None else '?':,} = {a:,}" if r == a else
                      f"{c} client{'s' if c > 1 else ''}: **{r} ≠ {a}**" for c, a, r in durability),
            "–", "–", "equal: " + ("met" if ok else "**missed**"))

    # 2. sequential CLI submissions
    seq = load(R, "sequential")
    if seq:
        rows = {r["label"]: r for r in seq["rows"]}
        base = {k: rows.get(k) for k in ("tsp", "sbatch")}
        for key, label in (("tsp", "baseline: task-spooler `tsp true` behind a running job (`tsp -S 1`, own server)"),
                           ("sbatch", "baseline: Slurm `sbatch -H --wrap true` (one-node local cluster)")):
            r = base[key]
            if r is None:
                continue
            if r.get("rate_per_s"):
                row("2", f"{label}, {r['runs']} one after another", f"{fmt_rate(r['rate_per_s'])} ({r['ms_per_submission']:.1f} ms each)", "–", "–", "–")
            else:
                row("2", label, r["error"], "–", "–", "–")
        gl = rows.get("gpulane")
        if gl and gl.get("rate_per_s"):
            rate = gl["rate_per_s"]
            have = [k for k in ("tsp", "sbatch") if base[k] and base[k].get("rate_per_s")]
            row("2", f"`gpulane submit --hold -- true`, {gl['runs']} one after another (a CLI process each)",
                f"{fmt_rate(rate)} ({gl['ms_per_submission']:.1f} ms each)", ", ".join(have) or "–",
                "; ".join(f"{rate / base[k]['rate_per_s']:.2f}× {k}" for k in have) or "–", rate_verdict(rate, TARGETS["cli_per_s"]))
        else:
            measured = False
            row("2", "`gpulane submit --hold -- true`", (gl or {}).get("error") or "not measured", "", "", f"≥ {TARGETS['cli_per_s']:.0f}/s")

    # 3. queue listing
    for size, target_key in ((10000, "queue_10k_ms"), (100000, "queue_100k_ms")):
        arr = load(R, f"array_{size}")
        lat = load(R, f"queue_{size}")
        if arr and arr.get("tasks"):
            row("3", f"set-up: one held array request of {arr['tasks']:,} tasks through the socket (→ {size:,} queued)",
                f"{arr['seconds'] * 1000:,.0f} ms ({fmt_rate(arr['rate_per_s'])})", "–", "–", "–")
        elif arr:
            measured = False
            notes.append(f"array request for {size:,} queued jobs: {arr.get('error')}")
        if not lat:
            continue
        rows = lat["rows"]
        bases = [r for r in rows if not r["label"].startswith("gpulane")]
        for r in bases:
            result = f"{fmt_ms(r['median_ms'])} ms (p90 {fmt_ms(r['p90_ms'])})" if r.get("median_ms") is not None else r["error"]
            row("3", f"baseline: {r['label']}, {size:,} held jobs", result, "–", "–", "–")
        short = lambda b: b["label"].split("`")[1].split(" ")[0] if "`" in b["label"] else b["label"]
        for r in rows:
            if not r["label"].startswith("gpulane"):
                continue
            if r.get("median_ms") is None:
                measured = False
                row("3", f"`{r['label']}`, {size:,} held jobs", r["error"], "", "", f"≤ {TARGETS[target_key]:.0f} ms")
                continue
            have = [b for b in bases if b.get("median_ms")]
            row("3", f"`{r['label']} > /dev/null`, {size:,} held jobs, median of {len(r['samples'])}",
                f"{fmt_ms(r['median_ms'])} ms (p90 {fmt_ms(r['p90_ms'])})", ", ".join(short(b) for b in have) or "–",
                "; ".join(f"{r['median_ms'] / b['median_ms']:.1f}× {short(b)}" for b in have) or "–",
                ms_verdict(r["median_ms"], TARGETS[target_key]))

    # 3. another client while the daemon answers a listing of 100,000 jobs
    for name in sorted(os.path.basename(p)[:-5] for p in glob.glob(os.path.join(R, "ping_during_*.json"))):
        pd = load(R, name)
        if not pd:
            continue
        what = f"a `ping` on another connection while `{pd['label']}` lists {pd.get('queued', 0):,} held jobs"
        if pd.get("max_ms") is None:
            measured = False
            row("3", what, "; ".join(pd["errors"]) or "no ping answered", "", "", f"≤ {TARGETS['ping_during_ms']:.0f} ms")
            continue
        row("3", f"{what} ({pd['listing_ms']:,.0f} ms): worst-case delay of {pd['pings']} pings (median "
                 f"{fmt_ms(pd['median_ms'])} ms, p99 {fmt_ms(pd['p99_ms'])} ms)",
            f"{fmt_ms(pd['max_ms'])} ms", "–", "–", ms_verdict(pd["max_ms"], TARGETS["ping_during_ms"]))
        if pd["errors"]:
            notes.append(f"{name}: errors: {'; '.join(pd['errors'])}")

    # 4. hand-over
    ho = load(R, "handover")
    if ho:
        rows = ho["rows"]
        ts = rows.get("tsp")
        ts_med = ts.get("median_ms") if ts else None
        if ts:
            row("4", f"baseline: hand-over with task-spooler `tsp -S 1`, {len(ts['samples'])} rounds",
                f"{fmt_ms(ts_med)} ms (p90 {fmt_ms(ts.get('p90_ms'))})" if ts_med is not None else "failed", "–", "–", "–")
        elif load(R, "handover_tsp_skip"):
            row("4", "baseline: hand-over with task-spooler", f"skipped: {load(R, 'handover_tsp_skip')['reason']}", "–", "–", "–")
        g = rows["gpulane"]
        if g.get("median_ms") is not None:
            parts = g.get("parts_median_ms", {})
            split = (f"; medians of the parts: A's end → B's lease granted {fmt_ms(parts['a_end_to_b_granted_ms'])} ms, "
                     f"grant → B's command running {fmt_ms(parts['b_granted_to_b_start_ms'])} ms") if len(parts) == 2 else ""
            row("4", f"hand-over through the daemon: B's start − A's end, A and B submitted back to back with `gpulane submit`, "
                     f"one usable GPU, {len(g['samples'])} rounds{split}",
                f"{fmt_ms(g['median_ms'])} ms (p90 {fmt_ms(g['p90_ms'])})", "tsp" if ts_med else "–",
                f"{g['median_ms'] / ts_med:.2f}× ({g['median_ms'] - ts_med:+.1f} ms)" if ts_med else "–",
                ms_verdict(g["median_ms"], TARGETS["handover_ms"]))
        else:
            measured = False
            row("4", "hand-over through the daemon", f"failed: {'; '.join(g['notes'][-1:])}", "", "", f"≤ {TARGETS['handover_ms']:.0f} ms")
        for name, r in rows.items():
            notes.extend(f"hand-over, {name}, {n} (left out)" for n in r["notes"])
    print("\n".join(lines))
    if notes:
        print()
        print("Notes:")
        for n in notes:
            print(f"- {n}")
    return 0 if measured else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("flood")
    p.add_argument("--socket", required=True)
    p.add_argument("--clients", type=int, default=4)
    p.add_argument("--seconds", type=float, default=5)
    p.add_argument("--start-delay", type=float, default=0.5)
    p.add_argument("--cwd", required=True)
    p = sub.add_parser("array")
    p.add_argument("--socket", required=True)
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--cwd", required=True)
    for name in ("seq-rate", "latency"):
        p = sub.add_parser(name)
        p.add_argument("--case", nargs=2, action=Ordered, metavar=("LABEL", "CMD"))
        p.add_argument("--skip", nargs=2, action=Ordered, metavar=("LABEL", "REASON"))
        if name == "seq-rate":
            p.add_argument("--n", type=int, default=300)
            p.add_argument("--chunks", type=int, default=3)
            p.add_argument("-w", type=int, default=3)
        else:
            p.add_argument("-n", type=int, default=10)
            p.add_argument("-w", type=int, default=2)
    p = sub.add_parser("ping-during")
    p.add_argument("--socket", required=True)
    p.add_argument("--label", default="")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD ...")
    p = sub.add_parser("sqlite-commits")
    p.add_argument("--dir", required=True)
    p.add_argument("--seconds", type=float, default=2)
    p = sub.add_parser("handover")
    p.add_argument("--gpulane", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--tsp")
    p.add_argument("--tsp-socket")
    p = sub.add_parser("report")
    p.add_argument("--results", required=True)
    args = ap.parse_args()
    return {"flood": cmd_flood, "array": cmd_array, "seq-rate": cmd_seq_rate, "latency": cmd_latency,
            "sqlite-commits": cmd_sqlite_commits, "handover": cmd_handover, "ping-during": cmd_ping_during,
            "report": cmd_report}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
