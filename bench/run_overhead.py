#!/usr/bin/env python3
"""Measures `gpulane run`'s per-job overhead and its hand-over latency, with baselines measured in
the same run (plain `true`; task-spooler). Driven by bench/run_overhead.sh, which sets up NVML, the
lease directory and the tsp server; prints the markdown table.

  run_overhead.py --gpulane GL --gpu I --lease-dir D --work DIR [-n 30] [-w 3] [--rounds 20]
                  [--tsp TSP --tsp-socket SOCK | --tsp-skip REASON] [--json FILE]

Per job: `true` and `gpulane run -g 1 -- true`, each W warm-ups, then N interleaved runs, timed from
fork to exit (bench/timeit.py's run_once).
Hand-over, per round: A = `gpulane run --gpus I -- sh -c 'sleep 0.2; date +%s.%N >> ends'` is
started; once a lease file is in the (private) lease directory, B = `gpulane run --gpus I -- sh -c
'date +%s.%N >> starts'` is started and waits (its "waiting" line on stderr proves it did);
latency = B's date - A's date. For tsp: `tsp sh -c A`, `tsp sh -c B`, `tsp -w B` against a
one-slot server (job output files in --work). Two warm-up rounds each, then R rounds, gpulane and tsp interleaved.
"""
import argparse
import glob
import importlib.util
import json
import math
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("bench_timeit", os.path.join(HERE, "timeit.py"))
bench_timeit = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_timeit)

A_SLEEP = "0.2"
OVERHEAD_TARGET_MS = 20.0
HANDOVER_TARGET_MS = 10.0


def p90(samples):
    s = sorted(samples)
    return s[max(0, math.ceil(0.9 * len(s)) - 1)]


def read_time(path):
    with open(path) as f:
        lines = f.read().split()
    return float(lines[-1]) if lines else None


def measure_overhead(gl, n, w, daemon_socket):
    # Without a daemon `gpulane run` initialises NVML itself; with one (daemon_socket) it takes the
    # daemon's GPU snapshot instead.
    direct = dict(os.environ, GPULANE_DIRECT_NVML="1")
    via_daemon = None
    if daemon_socket:
        via_daemon = {k: v for k, v in os.environ.items() if k != "GPULANE_DIRECT_NVML"}
        via_daemon["GPULANE_SOCKET"] = daemon_socket
    cases = [{"label": "true", "argv": ["true"], "samples": [], "error": None, "env": None},
             {"label": "gpulane run -g 1 -- true", "argv": [gl, "run", "-g", "1", "--", "true"], "samples": [],
              "error": None, "env": direct}]
    if via_daemon:
        cases.append({"label": "gpulane run -g 1 -- true (daemon running)", "argv": [gl, "run", "-g", "1", "--", "true"],
                      "samples": [], "error": None, "env": via_daemon})
    for c in cases:
        for _ in range(w):
            _, rc, err = bench_timeit.run_once(c["argv"], c["env"])
            if rc != 0:
                c["error"] = f"failed: exit {rc}" + (f": {err.strip().splitlines()[-1][:160]}" if err.strip() else "")
                break
    for _ in range(n):
        for c in cases:
            if c["error"]:
                continue
            ms, rc, err = bench_timeit.run_once(c["argv"], c["env"])
            if rc != 0:
                c["error"] = f"failed during timing: exit {rc}: {err.strip()[:160]}"
                continue
            c["samples"].append(ms)
    for c in cases:
        if c["error"]:
            print(f"{c['label']}: {c['error']}", file=sys.stderr)
    return cases


def gpulane_round(gl, gpu, lease_dir, work, k):
    """One hand-over round; returns (latency_ms or None, note)."""
    ends, starts = os.path.join(work, f"gl_end.{k}"), os.path.join(work, f"gl_start.{k}")
    a = subprocess.Popen([gl, "run", "--gpus", gpu, "--", "sh", "-c", f"sleep {A_SLEEP}; date +%s.%N >> {ends}"],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 20
    while not glob.glob(os.path.join(lease_dir, "*.lease")):  # the directory is ours: only A leases now
        if a.poll() is not None or time.monotonic() > deadline:
            err = a.communicate(timeout=30)[1].decode(errors="replace").strip()
            return None, f"A never held a lease (exit {a.poll()}): {err[-200:]}"
        time.sleep(0.002)
    b = subprocess.Popen([gl, "run", "--gpus", gpu, "--", "sh", "-c", f"date +%s.%N >> {starts}"],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        a_err = a.communicate(timeout=60)[1].decode(errors="replace")
        b_err = b.communicate(timeout=60)[1].decode(errors="replace")
    except subprocess.TimeoutExpired:
        for p in (a, b):
            p.kill()
            p.wait()
        return None, "a job did not end within 60 s"
    if a.returncode != 0 or b.returncode != 0:
        return None, f"exit A {a.returncode}, B {b.returncode}: {(a_err + b_err).strip()[-200:]}"
    if "waiting" not in b_err:
        return None, "B did not wait behind A (no 'waiting' line): " + b_err.strip()[-200:]
    t_end, t_start = read_time(ends), read_time(starts)
    if t_end is None or t_start is None:
        return None, "a date stamp is missing"
    return (t_start - t_end) * 1000, ""


def tsp_round(tsp, socket, work, k):
    ends, starts = os.path.join(work, f"ts_end.{k}"), os.path.join(work, f"ts_start.{k}")
    env = dict(os.environ, TS_SOCKET=socket, TMPDIR=work)

    def ts(*args):
        return subprocess.run([tsp, *args], env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)

    # (Not -n: with it the job's output goes to the client's stdout, which then stays open.)
    ra = ts("sh", "-c", f"sleep {A_SLEEP}; date +%s.%N >> {ends}")
    rb = ts("sh", "-c", f"date +%s.%N >> {starts}")
    if ra.returncode != 0 or rb.returncode != 0:
        return None, f"tsp failed to queue: {(ra.stderr + rb.stderr).strip()[-200:]}"
    rw = ts("-w", rb.stdout.strip())
    ts("-C")
    if rw.returncode != 0:
        return None, f"tsp -w {rb.stdout.strip()}: exit {rw.returncode} {rw.stderr.strip()[-200:]}"
    t_end, t_start = read_time(ends), read_time(starts)
    if t_end is None or t_start is None:
        return None, "a date stamp is missing"
    return (t_start - t_end) * 1000, ""


def fmt_ms(x):
    return f"{x:.1f}" if x >= 1 else f"{x:.2f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpulane", required=True)
    ap.add_argument("--gpu", required=True)
    ap.add_argument("--lease-dir", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("-n", type=int, default=30)
    ap.add_argument("-w", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--tsp")
    ap.add_argument("--tsp-socket")
    ap.add_argument("--tsp-skip")
    ap.add_argument("--json")
    ap.add_argument("--daemon-socket", help="a gpulane daemon to measure `run` through as well")
    args = ap.parse_args()

    print(f"per-job overhead: {args.w} warm-ups + {args.n} runs of each ...", file=sys.stderr)
    cases = measure_overhead(args.gpulane, args.n, args.w, args.daemon_socket)

    rows = {"gpulane": {"samples": [], "notes": []}}
    if args.tsp:
        rows["tsp"] = {"samples": [], "notes": []}
    print(f"hand-over: 2 warm-up rounds + {args.rounds} rounds{' each for gpulane and tsp' if args.tsp else ''} ...",
          file=sys.stderr)
    for k in range(args.rounds + 2):
        for name in rows:
            if name == "gpulane":
                ms, note = gpulane_round(args.gpulane, args.gpu, args.lease_dir, args.work, k)
            else:
                ms, note = tsp_round(args.tsp, args.tsp_socket, args.work, k)
            if k < 2:
                if ms is None:
                    rows[name]["notes"].append(f"warm-up round {k + 1}: {note}")
                continue
            if ms is None:
                rows[name]["notes"].append(f"round {k - 1}: {note}")
                print(f"{name} round {k - 1}: {note}", file=sys.stderr)
            else:
                rows[name]["samples"].append(ms)

    med = lambda s: statistics.median(s) if s else None
    true_c, gl_c = cases[0], cases[1]
    out = {"overhead": {}, "handover": {}, "targets": {"overhead_extra_ms": OVERHEAD_TARGET_MS, "handover_ms": HANDOVER_TARGET_MS}}
    print("| measurement | median ms | p90 ms | baseline (same run) | vs baseline | target |")
    print("|---|---:|---:|---|---:|---|")
    # per job
    for c in cases:
        c["median"] = med(c["samples"])
    if true_c["median"] is not None:
        print(f"| per job: `true` (baseline: process start) | {fmt_ms(true_c['median'])} | {fmt_ms(p90(true_c['samples']))} | – | – | – |")
    else:
        print(f"| per job: `true` (baseline) | {true_c['error'] or 'no samples'} | | | | |")
    extra = None
    if gl_c["median"] is not None:
        if true_c["median"] is not None:
            extra = gl_c["median"] - true_c["median"]
            vs = f"+{extra:.1f} ms ({gl_c['median'] / true_c['median']:.1f}×)"
            verdict = "met" if extra <= OVERHEAD_TARGET_MS else f"**missed** (+{extra:.2f} ms)"
        else:
            vs, verdict = "–", "–"
        print(f"| per job: `gpulane run -g 1 -- true` | {fmt_ms(gl_c['median'])} | {fmt_ms(p90(gl_c['samples']))} | `true` | {vs} | "
              f"≤ {OVERHEAD_TARGET_MS:.0f} ms extra: {verdict} |")
    else:
        print(f"| per job: `gpulane run -g 1 -- true` | {gl_c['error'] or 'no samples'} | | | | ≤ {OVERHEAD_TARGET_MS:.0f} ms extra |")
    if len(cases) > 2 and cases[2]["median"] is not None and true_c["median"] is not None:
        dc = cases[2]
        d_extra = dc["median"] - true_c["median"]
        print(f"| per job: `gpulane run -g 1 -- true`, daemon running | {fmt_ms(dc['median'])} | {fmt_ms(p90(dc['samples']))} | "
              f"`true` | +{d_extra:.1f} ms ({dc['median'] / true_c['median']:.1f}×) | ≤ {OVERHEAD_TARGET_MS:.0f} ms extra: "
              f"{'met' if d_extra <= OVERHEAD_TARGET_MS else f'**missed** (+{d_extra:.2f} ms)'} |")
    elif len(cases) > 2:
        print(f"| per job: `gpulane run -g 1 -- true`, daemon running | {cases[2]['error'] or 'no samples'} | | | | |")
    out["overhead"] = {c["label"]: {"samples_ms": c["samples"], "median_ms": c["median"], "error": c["error"]} for c in cases}
    out["overhead"]["extra_ms"] = extra
    out["overhead"]["target_met"] = extra is not None and extra <= OVERHEAD_TARGET_MS
    # hand-over
    ts_med = None
    if "tsp" in rows:
        s = rows["tsp"]["samples"]
        ts_med = med(s)
        if s:
            print(f"| hand-over: task-spooler `tsp -S 1` (baseline), {len(s)} rounds | {fmt_ms(ts_med)} | {fmt_ms(p90(s))} | – | – | – |")
        else:
            print(f"| hand-over: task-spooler `tsp -S 1` (baseline) | failed: {'; '.join(rows['tsp']['notes'][-1:])} | | | | |")
    else:
        print(f"| hand-over: task-spooler (baseline) | skipped: {args.tsp_skip or 'not run'} | | | | |")
    s = rows["gpulane"]["samples"]
    gl_med = med(s)
    if s:
        if ts_med:
            vs = f"{gl_med / ts_med:.2f}× ({gl_med - ts_med:+.1f} ms)"
        else:
            vs = "–"
        verdict = "met" if gl_med <= HANDOVER_TARGET_MS else f"**missed** ({gl_med:.2f} ms)"
        print(f"| hand-over: `gpulane run --gpus {args.gpu}`, {len(s)} rounds | {fmt_ms(gl_med)} | {fmt_ms(p90(s))} | "
              f"{'tsp' if ts_med else '–'} | {vs} | ≤ {HANDOVER_TARGET_MS:.0f} ms: {verdict} |")
    else:
        print(f"| hand-over: `gpulane run --gpus {args.gpu}` | failed: {'; '.join(rows['gpulane']['notes'][-1:])} | | | | "
              f"≤ {HANDOVER_TARGET_MS:.0f} ms |")
    notes = [f"{name}: {n}" for name, r in rows.items() for n in r["notes"]]
    if notes:
        print()
        print("Rounds left out:")
        for n in notes:
            print(f"- {n}")
    for name, r in rows.items():
        out["handover"][name] = {"samples_ms": r["samples"], "median_ms": med(r["samples"]), "notes": r["notes"]}
    out["handover"]["target_met"] = gl_med is not None and gl_med <= HANDOVER_TARGET_MS
    if args.tsp_skip:
        out["handover"]["tsp_skipped"] = args.tsp_skip
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    ok = all(c["error"] is None for c in cases) and len(s) >= max(1, args.rounds // 2) and \
        (not args.tsp or len(rows["tsp"]["samples"]) >= max(1, args.rounds // 2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
