#!/usr/bin/env python3
"""Times commands end to end (fork + exec + run + exit), as a user or a script sees them.

  timeit.py [-n 30] [-w 3] [--json FILE] --case LABEL CMD [--case LABEL CMD ...] [--skip LABEL REASON ...]

CMD is split like a shell would (shlex) and executed directly, without a shell; its output is
discarded. Each case first runs -w warm-up times (a failing warm-up marks the case "failed" and
shows its stderr); then -n rounds run every case once each, interleaved, so that slow drift of
the machine (clocks, other load) affects all cases alike. Prints a markdown table: command,
median ms, p90 ms (nearest rank), ratio of the median to the first case's median.
--json writes every sample (ms) for later analysis.
"""
import argparse
import json
import math
import shlex
import statistics
import subprocess
import sys
import time


def run_once(argv, env=None):
    t0 = time.perf_counter_ns()
    proc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    ms = (time.perf_counter_ns() - t0) / 1e6
    return ms, proc.returncode, proc.stderr.decode(errors="replace")


class Ordered(argparse.Action):
    """--case and --skip rows, kept in command-line order."""

    def __call__(self, parser, namespace, values, option_string=None):
        rows = getattr(namespace, "rows", None) or []
        rows.append((self.dest, values[0], values[1]))
        namespace.rows = rows


def p90(samples):
    s = sorted(samples)
    return s[max(0, math.ceil(0.9 * len(s)) - 1)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=30, help="timed runs per case (default 30)")
    ap.add_argument("-w", type=int, default=3, help="warm-up runs per case (default 3)")
    ap.add_argument("--json", help="write the samples here")
    ap.add_argument("--case", nargs=2, action=Ordered, metavar=("LABEL", "CMD"))
    ap.add_argument("--skip", nargs=2, action=Ordered, metavar=("LABEL", "REASON"))
    args = ap.parse_args()

    rows = [{"label": label, "argv": shlex.split(cmd) if kind == "case" else None, "samples": [],
             "error": None if kind == "case" else f"skipped: {cmd}"}
            for kind, label, cmd in getattr(args, "rows", [])]
    cases = [r for r in rows if r["argv"] is not None]
    for c in cases:
        for _ in range(args.w):
            try:
                _, rc, err = run_once(c["argv"])
            except OSError as e:
                rc, err = 127, str(e)
            if rc != 0:
                c["error"] = f"failed: exit {rc}" + (f": {err.strip().splitlines()[-1][:120]}" if err.strip() else "")
                print(f"{c['label']}: {c['error']}", file=sys.stderr)
                break
    live = [c for c in cases if c["error"] is None]
    for _ in range(args.n):
        for c in live:
            ms, rc, err = run_once(c["argv"])
            if rc != 0:
                c["error"] = f"failed during timing: exit {rc}: {err.strip()[:120]}"
                live = [x for x in live if x is not c]
                continue
            c["samples"].append(ms)

    base = statistics.median(cases[0]["samples"]) if cases and cases[0]["samples"] else None
    ref = f"`{cases[0]['label']}`" if cases else "first row"
    print(f"| command | median ms | p90 ms | ratio to {ref} median |")
    print("|---|---:|---:|---:|")
    for c in rows:
        label = c["label"].replace("|", "\\|")
        if c["error"] or not c["samples"]:
            print(f"| `{label}` | {c['error'] or 'no samples'} | | |")
            continue
        med = statistics.median(c["samples"])
        ratio = f"{med / base:.1f}×" if base else "-"
        print(f"| `{label}` | {med:.1f} | {p90(c['samples']):.1f} | {ratio} |")

    if args.json:
        with open(args.json, "w") as f:
            json.dump({"n": args.n, "warmup": args.w,
                       "rows": [{"label": c["label"], "argv": c["argv"], "error": c["error"], "samples_ms": c["samples"]}
                                for c in rows]}, f, indent=1)
    return 0 if all(c["error"] is None for c in cases) else 1


if __name__ == "__main__":
    sys.exit(main())
