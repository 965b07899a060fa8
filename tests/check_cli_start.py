#!/usr/bin/env python3
"""CliStart.VersionPageFaults: `gpulane --version` touches at most LIMIT pages more than /bin/true.

Page faults are what a start of gpulane costs on a virtual machine (each a trip through the
hypervisor: bench/results/cli-start-lazy-streams-2026-12-06.md). Before the standard streams were
made lazy (src/cli/cli11.h) `gpulane --version` took 65-69 minor faults more than /bin/true; now
about 47. The count is the same run after run (unlike wall time), so this holds under any load: the
smallest of a few runs each, from wait4's rusage.

Usage: tests/check_cli_start.py GPULANE [LIMIT]   (default 55)
"""
import os
import sys


def min_faults(argv, runs=7):
    devnull = os.open(os.devnull, os.O_WRONLY)
    best = None
    for _ in range(runs):
        pid = os.posix_spawn(argv[0], argv, os.environ,
                             file_actions=[(os.POSIX_SPAWN_DUP2, devnull, 1)])
        _, status, usage = os.wait4(pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            sys.exit(f"{' '.join(argv)} exited with {os.waitstatus_to_exitcode(status)}")
        best = usage.ru_minflt if best is None else min(best, usage.ru_minflt)
    return best


def main():
    gpulane = os.path.abspath(sys.argv[1])
    limit = int(sys.argv[2]) if len(sys.argv) > 2 else 55
    floor = min_faults(["/bin/true"])
    faults = min_faults([gpulane, "--version"])
    print(f"/bin/true: {floor} minor faults; gpulane --version: {faults} ({faults - floor:+d}, limit +{limit})")
    if faults - floor > limit:
        print(f"gpulane --version takes {faults - floor} page faults more than /bin/true (limit {limit}): "
              "something now runs before main or at exit (static initialisers, <iostream>: src/cli/cli11.h); "
              "find it with perf record -e page-faults -d (bench/cli_start.py)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
