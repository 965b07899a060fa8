#!/usr/bin/env python3
"""Turns `gpulane simulate --json` on stdin into a Markdown table (bench/simulate-compare.sh)."""
import json
import sys


def h(s: float) -> str:
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.1f} min"
    if s < 172800:
        return f"{s / 3600:.1f} h"
    return f"{s / 86400:.1f} d"


d = json.load(sys.stdin)
t = d["trace"]
print(f"{t['jobs']:,} jobs, {t['users']} users; " + "; ".join(t["notes"]))
print()
print("| policy | util | wait mean | median | p95 | p99 | JCT mean | JCT p99 | bsld mean | makespan | Jain | starved > 24 h |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for p in d["policies"]:
    print(f"| {p['policy']} | {100 * p['utilisation']:.1f} % | {h(p['wait_mean_s'])} | {h(p['wait_median_s'])} | "
          f"{h(p['wait_p95_s'])} | {h(p['wait_p99_s'])} | {h(p['jct_mean_s'])} | {h(p['jct_p99_s'])} | "
          f"{p['bounded_slowdown_mean']:.1f} | {h(p['makespan_s'])} | {p['jain_slowdown']:.3f} | {p['starved_24h']:,} |")
print()
