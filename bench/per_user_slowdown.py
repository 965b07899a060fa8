#!/usr/bin/env python3
"""Who makes Jain's index what it is: from `gpulane simulate --per-job-csv FILE`, per policy, the
index over users' mean bounded slowdowns (10 s bound, as sim/metrics.h), the users with the largest
means (their share of the sum of squares, jobs, GPU-days, median runtime, mean wait), the jobs with
the largest slowdowns and the jobs that end last (what decides the makespan, hence utilisation).

    bench/per_user_slowdown.py FILE [--top N]
"""
import argparse
import collections
import csv

BOUND_S = 10


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=5)
    a = ap.parse_args()
    by_policy = collections.defaultdict(list)
    for r in csv.DictReader(open(a.csv)):
        for k in ("submit_s", "start_s", "end_s", "wait_s", "duration_s"):
            r[k] = float(r[k])
        r["run_s"] = r["end_s"] - r["start_s"]
        r["bsld"] = max(1.0, (r["wait_s"] + r["run_s"]) / max(r["run_s"], BOUND_S))
        by_policy[r["policy"] + " " + r["placement"]].append(r)
    for policy, rows in by_policy.items():
        first = min(r["submit_s"] for r in rows)
        users = collections.defaultdict(list)
        for r in rows:
            users[r["user"]].append(r)
        mean = {u: sum(r["bsld"] for r in v) / len(v) for u, v in users.items()}
        squares = sum(m * m for m in mean.values())
        jain = sum(mean.values()) ** 2 / (len(mean) * squares)
        print(f"{policy}: Jain {jain:.4f} over {len(mean)} users")
        for u, m in sorted(mean.items(), key=lambda kv: -kv[1])[: a.top]:
            v = users[u]
            gpu_days = sum(r["run_s"] * float(r["gpus"]) for r in v) / 86400
            runs = sorted(r["run_s"] for r in v)
            print(f"  user {u}: mean bsld {m:.0f} ({100 * m * m / squares:.1f} % of the sum of squares), {len(v)} jobs, "
                  f"{gpu_days:.1f} GPU-days, median run {runs[len(runs) // 2]:.0f} s, "
                  f"mean wait {sum(r['wait_s'] for r in v) / len(v) / 86400:.1f} d")
        print("  largest slowdowns:")
        for r in sorted(rows, key=lambda r: -r["bsld"])[: a.top]:
            print(f"    job {r['job']} user {r['user']} {r['gpus']} GPU(s) run {r['run_s']:.0f} s "
                  f"submitted {(r['submit_s'] - first) / 86400:.1f} d waited {r['wait_s'] / 86400:.2f} d: bsld {r['bsld']:.0f}")
        print(f"  last submission {(max(r['submit_s'] for r in rows) - first) / 86400:.1f} d; last ends:")
        for r in sorted(rows, key=lambda r: -r["end_s"])[: a.top]:
            print(f"    job {r['job']} {r['gpus']} GPU(s) run {r['run_s'] / 86400:.2f} d submitted "
                  f"{(r['submit_s'] - first) / 86400:.1f} d started {(r['start_s'] - first) / 86400:.1f} d "
                  f"ended {(r['end_s'] - first) / 86400:.1f} d")


if __name__ == "__main__":
    main()
