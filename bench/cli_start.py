#!/usr/bin/env python3
"""CLI start-up: what every `CUDA_VISIBLE_DEVICES=$(gpulane pick)` and scripted `submit` pays
before gpulane does anything (issue 25, "CLI start").

    python3 bench/cli_start.py [GPULANE ...] [-n RUNS] [--instructions]
        (default build/gpulane, 200 runs)

Runs, interleaved round by round in a shuffled order (so that load and drift hit every command
alike): /bin/true (the floor of any command: fork, exec, exit), and for each GPULANE given
`--version`, `--help` and `pick --help` (a real subcommand's path: its options registered and
parsed, its help formatted, no daemon or GPU needed); `tsp -V` where task-spooler is installed.
Every start is os.posix_spawn + os.wait4, stdout and stderr to /dev/null, the same for each
command. Several GPULANE paths compare builds side by side in the same run; first each GPULANE
file's pages are dropped from the page cache and read back sequentially (posix_fadvise: those
files only), so that all come to the same page-cache state (--keep-page-cache skips it).

Prints a markdown table on stdout: per command the median and p90 (nearest rank) wall time in ms,
the median's difference to /bin/true's and its ratio, the median CPU time (user + system, from
wait4: less sensitive than wall time to the other builders on the machine) and the median minor
page faults; with --instructions, the instructions executed (valgrind --tool=callgrind: the same
count whatever the load). The preamble gives the command, the commit, each binary's version line
and the load average before and after.
"""
import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def spawn_once(argv, devnull):
    """One fork+exec+wait: (wall ms, cpu ms, minor faults)."""
    actions = [(os.POSIX_SPAWN_DUP2, devnull, 1), (os.POSIX_SPAWN_DUP2, devnull, 2)]
    start = time.perf_counter_ns()
    pid = os.posix_spawn(argv[0], argv, os.environ, file_actions=actions)
    _, status, usage = os.wait4(pid, 0)
    wall_ms = (time.perf_counter_ns() - start) / 1e6
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"cli_start.py: {' '.join(argv)} exited with {os.waitstatus_to_exitcode(status)}")
    return wall_ms, (usage.ru_utime + usage.ru_stime) * 1000, usage.ru_minflt


def settle_page_cache(path):
    """Drops the file's pages from the page cache and reads it back in one sequential pass.

    How many faults a start takes depends on how its pages came into the page cache (a file the
    linker or cp just wrote faults more often than one read back by readahead: +14 faults for
    --help measured on the same bytes), so every binary compared is brought to the same state."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        while os.read(fd, 1 << 20):
            pass
    finally:
        os.close(fd)


def instructions(argv):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "cg.out")
        r = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *argv],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        for line in r.stderr.splitlines():
            if "Collected :" in line:
                return int(line.split(":")[-1].strip())
    return None


def p90(values):
    s = sorted(values)
    return s[max(0, -(-9 * len(s) // 10) - 1)]  # nearest rank


def commands_for(binaries):
    commands = {"/bin/true": ["/bin/true"]}
    for b in binaries:
        label = "gpulane" if len(binaries) == 1 else b
        path = os.path.abspath(b)
        for words in (["--version"], ["--help"], ["pick", "--help"]):
            commands[f"{label} {' '.join(words)}"] = [path, *words]
    tsp = shutil.which("tsp")
    if tsp:
        commands["tsp -V"] = [tsp, "-V"]
    return commands


def preamble(args, binaries, load_before, load_after):
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True).stdout
    lines = [f"## CLI start ({args.n} runs each, interleaved, shuffled each round)", "",
             f"`python3 bench/cli_start.py {' '.join(args.gpulane)} -n {args.n}"
             f"{' --instructions' if args.instructions else ''}`",
             f"on {os.uname().nodename}, {os.cpu_count()} CPUs, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
             f"checkout {commit or '?'}{' (with uncommitted changes)' if dirty else ''}", ""]
    for b in binaries:
        version = subprocess.run([b, "--version"], capture_output=True, text=True).stdout.strip()
        lines.append(f"- `{b}`: {version}")
    lines.append(f"- load average (1, 5, 15 min) before: {' '.join(f'{x:.2f}' for x in load_before)}; "
                 f"after: {' '.join(f'{x:.2f}' for x in load_after)}")
    if not shutil.which("tsp"):
        lines.append("- task-spooler (`tsp`) is not installed here: no `tsp -V` row")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("gpulane", nargs="*", default=["build/gpulane"])
    ap.add_argument("-n", type=int, default=200, help="runs of each command (default 200)")
    ap.add_argument("--warmup", type=int, default=5, help="unmeasured runs of each first (default 5)")
    ap.add_argument("--seed", type=int, default=25, help="the shuffle's seed")
    ap.add_argument("--instructions", action="store_true", help="also count instructions (callgrind)")
    ap.add_argument("--keep-page-cache", action="store_true",
                    help="do not drop and re-read the GPULANE binaries' pages first")
    args = ap.parse_args()
    if not args.gpulane:
        args.gpulane = ["build/gpulane"]
    commands = commands_for(args.gpulane)
    if not args.keep_page_cache:
        for b in args.gpulane:
            settle_page_cache(b)
    devnull = os.open(os.devnull, os.O_WRONLY)
    load_before = os.getloadavg()
    for _ in range(args.warmup):
        for argv in commands.values():
            spawn_once(argv, devnull)
    samples = {name: [] for name in commands}
    rng = random.Random(args.seed)
    order = list(commands)
    for _ in range(args.n):
        rng.shuffle(order)
        for name in order:
            samples[name].append(spawn_once(commands[name], devnull))
    load_after = os.getloadavg()
    print(preamble(args, args.gpulane, load_before, load_after))
    base = statistics.median(w for w, _, _ in samples["/bin/true"])
    print("| command | median ms | p90 ms | median over /bin/true ms | ratio to /bin/true | "
          "CPU ms (median) | minor faults (median) | instructions |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, argv in commands.items():
        wall = [w for w, _, _ in samples[name]]
        cpu = statistics.median(c for _, c, _ in samples[name])
        faults = statistics.median(f for _, _, f in samples[name])
        med = statistics.median(wall)
        ins = ""
        if args.instructions:
            ins = instructions(argv) if shutil.which("valgrind") else "no valgrind"
        print(f"| `{name}` | {med:.2f} | {p90(wall):.2f} | {med - base:+.2f} | {med / base:.2f} | "
              f"{cpu:.1f} | {faults:.0f} | {ins} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
