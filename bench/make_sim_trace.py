#!/usr/bin/env python3
"""Writes a synthetic job trace for `gpulane simulate` (the CSV of docs/simulate.md).

  python3 bench/make_sim_trace.py --jobs 100000 --gpus 8 --load 0.9 --seed 1 > trace.csv

Jobs arrive as a Poisson process sized so the offered load on --gpus GPUs is --load. Each job asks
for 1 GPU (65 %), 2 (15 %), 4 (10 %) or 8 (5 %), or shares one GPU declaring 10-40 GiB (5 %); runs
a log-normal time (median 20 min, heavy tail, 1 min .. 3 days); belongs to one of --users users
(a few submit most jobs: Zipf-like); and 80 % give a time limit of 1.2-4 x their runtime rounded up
to the hour, the rest none. Deterministic for a given --seed (Python's random).
"""
import argparse
import math
import random
import sys


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--load", type=float, default=0.9)
    ap.add_argument("--users", type=int, default=6)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rnd = random.Random(a.seed)
    kinds = [(1, 0.65), (2, 0.15), (4, 0.10), (8, 0.05), ("mem", 0.05)]
    weights = [1.0 / (u + 1) for u in range(a.users)]
    jobs = []
    for _ in range(a.jobs):
        x, kind = rnd.random(), None
        for k, p in kinds:
            x -= p
            if x <= 0:
                kind = k
                break
        kind = kind or 1
        gpus, mem, share = (1, rnd.randint(10, 40) << 30, None) if kind == "mem" else (min(kind, a.gpus), 0, None)
        share = mem / (80 << 30) if mem else gpus
        duration = min(3 * 86400, max(60, rnd.lognormvariate(math.log(1200), 1.4)))
        user = rnd.choices(range(a.users), weights)[0]
        limit = ""
        if rnd.random() < 0.8:
            limit = str(int(math.ceil(duration * rnd.uniform(1.2, 4) / 3600) * 3600))
        jobs.append([gpus, mem, int(duration), f"user{user}", limit, share])
    work = sum(j[5] * j[2] for j in jobs)
    span = work / (a.gpus * a.load)  # seconds over which the jobs arrive
    rate = a.jobs / span
    t = 0.0
    out = sys.stdout
    out.write("submit_s,duration_s,gpus,mem_bytes,user,time_limit_s\n")
    for gpus, mem, duration, user, limit, _ in jobs:
        out.write(f"{int(t)},{duration},{gpus},{mem},{user},{limit}\n")
        t += rnd.expovariate(rate)
    return 0


if __name__ == "__main__":
    sys.exit(main())
