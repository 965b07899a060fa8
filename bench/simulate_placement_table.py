#!/usr/bin/env python3
"""Turns `gpulane simulate --placement mostfree,bestfit --json` on stdin into a Markdown table with
each figure's ratio against mostfree's (bench/simulate-placement.sh)."""
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


def ratio(x: float, base: float) -> str:
    if base == 0:
        return "=" if x == 0 else "n/a"
    return f"{100 * (x / base - 1):+.2f} %"


d = json.load(sys.stdin)
runs = d["policies"]
base = next(p for p in runs if p["placement"] == "mostfree")
whole = base["whole_jobs"]
print(f"{d['trace']['jobs']:,} jobs ({whole:,} whole-GPU, {d['trace']['jobs'] - whole:,} shares)")
print()
cols = [("util", "utilisation", lambda v: f"{100 * v:.1f} %"),
        ("wait mean", "wait_mean_s", h),
        ("whole-GPU wait mean", "whole_wait_mean_s", h),
        ("whole-GPU wait p99", "whole_wait_p99_s", h),
        ("share wait mean", "shared_wait_mean_s", h),
        ("share wait p99", "shared_wait_p99_s", h),
        ("GPUs partly used (mean)", "shared_gpus_mean", lambda v: f"{v:.2f}"),
        ("GPUs idle (mean)", "idle_gpus_mean", lambda v: f"{v:.2f}"),
        ("fragmented wait", "fragmented_s", h)]
print("| placement | " + " | ".join(c[0] for c in cols) + " |")
print("|---" * (len(cols) + 1) + "|")
for p in runs:
    cells = []
    for _, key, fmt in cols:
        cell = fmt(p[key])
        if p is not base:
            cell += f" ({ratio(p[key], base[key])})"
        cells.append(cell)
    print(f"| {p['placement']} | " + " | ".join(cells) + " |")
print()
