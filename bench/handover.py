#!/usr/bin/env python3
"""Hand-over latency between jobs that take turns on one GPU, with the parts a user feels apart.

  bench/handover.py --gpulane GL --work DIR [--jobs K] [--modes run,queue] [--gpu 0]
                    [--job "python3 scripts/acceptance/torch_job.py 1 --seconds 0.5"] [--markdown]

K jobs that all want GPU --gpu are started at once, through `gpulane run` (mode run: K processes)
and through the queue (mode queue: K `gpulane submit`s to a per-user daemon this script starts in
DIR), so they run one after another. Each job is

  sh -c 'date +%s.%N > start_i; <job>; date +%s.%N > end_i'

so start_i is taken right after the job's exec and end_i right after its command (the PyTorch
process, whose CUDA teardown is part of its exit) has gone: end_i is the end of the job's last
process, within the ~1 ms a `date` takes. For each consecutive pair:

  hand-over      start_{i+1} - end_i: gpulane's part, from one job's last process to the next exec
  teardown       end_i - t_end_i, where t_end_i is the torch job's own "end" record (TORCH_JOB_LOG,
                 just before it returns): the job's interpreter and CUDA context teardown
  queue parts    end_i -> lease granted (the next supervisor's start_time) -> exec

Prints JSON (every sample and the medians) on stdout, or with --markdown a table. Exit 1 when a
mode produced no sample.
"""
import argparse
import json
import os
import shlex
import signal
import statistics
import subprocess
import sys
import time


def read_time(path):
    try:
        with open(path) as f:
            return float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def torch_ends(log):
    """{GPULANE_JOB_ID: t} of the torch jobs' "end" records."""
    out = {}
    try:
        with open(log) as f:
            for line in f:
                try:
                    r = json.loads(line)
                except ValueError:
                    continue
                if r.get("event") == "end":
                    out[str(r.get("job"))] = r.get("t")
    except OSError:
        pass
    return out


def job_argv(d, i, job):
    script = f"date +%s.%N > {d}/start_{i}; {job}; rc=$?; date +%s.%N > {d}/end_{i}; exit $rc"
    return ["sh", "-c", script]


def median(values):
    return statistics.median(values) if values else None


def summarize(samples):
    keys = sorted({k for s in samples for k in s if k.endswith("_ms")})
    return {k: median([s[k] for s in samples if s.get(k) is not None]) for k in keys}


def pairs(d, k, torch_end_of):
    """Samples for consecutive jobs, in the order they ran (by start time)."""
    runs = []
    for i in range(k):
        start, end = read_time(f"{d}/start_{i}"), read_time(f"{d}/end_{i}")
        if start is not None and end is not None:
            runs.append((start, end, i))
    runs.sort()
    samples, notes = [], []
    for (s0, e0, i0), (s1, e1, i1) in zip(runs, runs[1:]):
        if s1 < e0:
            notes.append(f"jobs {i0} and {i1} overlapped on the GPU ({1000 * (e0 - s1):.1f} ms)")
            continue
        sample = {"job": i0, "next": i1, "handover_ms": 1000 * (s1 - e0)}
        t_end = torch_end_of(i0)
        if t_end is not None:
            sample["teardown_ms"] = 1000 * (e0 - t_end)
        samples.append(sample)
    if len(runs) < k:
        notes.append(f"{k - len(runs)} of {k} jobs left no start/end stamps")
    return samples, notes


def mode_run(args, env, d):
    os.makedirs(d)
    procs = []
    for i in range(args.jobs):
        argv = [args.gpulane, "run", "-q", "--gpus", args.gpu, "--"] + job_argv(d, i, args.job)
        procs.append(subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                      stderr=open(f"{d}/run_{i}.err", "w")))
    rcs = [p.wait(timeout=args.timeout) for p in procs]
    ends = torch_ends(env["TORCH_JOB_LOG"])
    pids = {i: p.pid for i, p in enumerate(procs)}
    samples, notes = pairs(d, args.jobs, lambda i: ends.get(f"r{pids[i]}"))
    notes += [f"gpulane run {i} exited {rc}" for i, rc in enumerate(rcs) if rc != 0]
    return samples, notes


def mode_queue(args, env, d):
    os.makedirs(d)
    qenv = dict(env, GPULANE_SOCKET=f"{d}/sock", GPULANE_STATE_DIR=f"{d}/state", GPULANE_SYSTEM_DAEMON="0")
    daemon = subprocess.Popen([args.gpulane, "daemon", "--user"], env=qenv, stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=open(f"{d}/daemon.log", "w"), start_new_session=True)
    try:
        for _ in range(300):
            if os.path.exists(f"{d}/sock"):
                break
            time.sleep(0.02)
        ids = []
        for i in range(args.jobs):
            r = subprocess.run([args.gpulane, "submit", "--gpus", args.gpu, "-o", f"{d}/job_{i}.out", "--"] +
                               job_argv(d, i, args.job), env=qenv, cwd=d, capture_output=True, text=True, timeout=60)
            if r.returncode != 0:
                return [], [f"submit {i} failed: {r.stderr.strip()}"]
            ids.append(r.stdout.strip())
        subprocess.run([args.gpulane, "wait"] + ids, env=qenv, capture_output=True, timeout=args.timeout)
        shown = {}
        for i, jid in enumerate(ids):
            r = subprocess.run([args.gpulane, "show", "--json", jid], env=qenv, capture_output=True, text=True, timeout=60)
            if r.returncode == 0:
                shown[i] = json.loads(r.stdout)
        ends = torch_ends(env["TORCH_JOB_LOG"])
        samples, notes = pairs(d, args.jobs, lambda i: ends.get(str(ids[i])))
        for s in samples:
            granted = shown.get(s["next"], {}).get("start_time")
            end, start = read_time(f"{d}/end_{s['job']}"), read_time(f"{d}/start_{s['next']}")
            if granted and end is not None and start is not None:
                s["end_to_granted_ms"] = 1000 * (granted - end)
                s["granted_to_exec_ms"] = 1000 * (start - granted)
        return samples, notes
    finally:
        os.killpg(daemon.pid, signal.SIGTERM)
        daemon.wait(timeout=30)


def fmt(x):
    return "–" if x is None else f"{x:.1f}"


def markdown(result):
    lines = ["| mode | pairs | hand-over median (ms) | p90 | teardown median (ms) | end → lease granted | granted → exec |",
             "|---|---|---|---|---|---|---|"]
    for mode, r in result["modes"].items():
        hs = sorted(s["handover_ms"] for s in r["samples"])
        p90 = hs[min(len(hs) - 1, int(0.9 * len(hs)))] if hs else None
        m = r["median"]
        lines.append(f"| {mode} | {len(hs)} | {fmt(m.get('handover_ms'))} | {fmt(p90)} | {fmt(m.get('teardown_ms'))} | "
                     f"{fmt(m.get('end_to_granted_ms'))} | {fmt(m.get('granted_to_exec_ms'))} |")
    for mode, r in result["modes"].items():
        for n in r["notes"]:
            lines.append(f"\nnote ({mode}): {n}")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpulane", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--jobs", type=int, default=11)
    ap.add_argument("--modes", default="run,queue")
    ap.add_argument("--gpu", default="0")
    ap.add_argument("--job", default="python3 scripts/acceptance/torch_job.py 1 --seconds 0.5")
    ap.add_argument("--timeout", type=float, default=240)
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    env = dict(os.environ, TORCH_JOB_LOG=os.path.join(args.work, "torch_jobs.log"))
    env.pop("CUDA_VISIBLE_DEVICES", None)
    result = {"jobs": args.jobs, "job": args.job, "gpu": args.gpu, "modes": {}}
    for mode in args.modes.split(","):
        fn = {"run": mode_run, "queue": mode_queue}[mode]
        samples, notes = fn(args, env, os.path.join(args.work, mode))
        result["modes"][mode] = {"samples": samples, "notes": notes, "median": summarize(samples)}
    print(markdown(result) if args.markdown else json.dumps(result, indent=1))
    return 0 if all(r["samples"] for r in result["modes"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
