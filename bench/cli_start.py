#!/usr/bin/env python3
"""CLI start-up: what every `CUDA_VISIBLE_DEVICES=$(gpulane pick)` and scripted `submit` pays
before gpulane does anything (issue 25, "CLI start").

    python3 bench/cli_start.py [GPULANE] [-n RUNS]      (default build/gpulane, 60 runs)

For each command: the median and p90 wall time of RUNS starts (fork+exec+exit, measured around
subprocess.run, interleaved so that load hits every command alike), its difference to /bin/true's
median (the baseline, measured in the same run), and, where valgrind is installed, the
instructions it executes (callgrind: the same count whatever else the machine is doing).
Prints a markdown table on stdout.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def instructions(argv):
    if not shutil.which("valgrind"):
        return None
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "cg.out")
        r = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *argv],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        for line in r.stderr.splitlines():
            if "Collected :" in line:
                return int(line.split(":")[-1].strip())
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("gpulane", nargs="?", default="build/gpulane")
    ap.add_argument("-n", type=int, default=60)
    args = ap.parse_args()
    commands = {"/bin/true": ["/bin/true"], "gpulane --version": [args.gpulane, "--version"]}
    if shutil.which("tsp"):
        commands["tsp -V"] = ["tsp", "-V"]
    times = {name: [] for name in commands}
    for _ in range(args.n):
        for name, argv in commands.items():
            start = time.perf_counter()
            subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            times[name].append((time.perf_counter() - start) * 1000)
    base = statistics.median(times["/bin/true"])
    print(f"## CLI start ({args.n} runs each, interleaved; load before: {os.getloadavg()[0]:.2f})\n")
    print(f"`python3 bench/cli_start.py {args.gpulane} -n {args.n}`; {os.cpu_count()} CPUs\n")
    print("| command | median ms | p90 ms | median over /bin/true ms | instructions |")
    print("|---|---:|---:|---:|---:|")
    for name, argv in commands.items():
        t = sorted(times[name])
        p90 = t[int(0.9 * (len(t) - 1))]
        ins = instructions(argv)
        print(f"| `{name}` | {statistics.median(t):.2f} | {p90:.2f} | {statistics.median(t) - base:+.2f} | "
              f"{ins if ins is not None else 'no valgrind'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
