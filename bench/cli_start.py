#!/usr/bin/env python3
"""CLI start-up: what every `CUDA_VISIBLE_DEVICES=$(gpulane pick)` and scripted `submit` pays
before gpulane does anything (issue 25, "CLI start").

    python3 bench/cli_start.py [GPULANE ...] [-n RUNS] [--instructions] [--work]
        (default build/gpulane, 200 runs)

Runs, interleaved round by round in a shuffled order (so that load and drift hit every command
alike): /bin/true (the floor of any command: fork, exec, exit), and for each GPULANE given
`--version`, `--help` and `pick --help` (a real subcommand's path: its options registered and
parsed, its help formatted, no daemon or GPU needed); `tsp -V` where task-spooler is installed.
With --work, two commands that do their work too, per GPULANE: `pick` on the fake NVML
(build/fake_nvml/current, the recorded 2 x H200 fixture with its processes made foreign, as
bench/submit_rate.py; an empty config; leases on tmpfs; GPULANE_DIRECT_NVML=1, so NVML is read by
pick itself) and `submit --hold -- true` (from the current folder) to one per-user daemon (the first GPULANE's, its state on
tmpfs, so that the row is the client's start and round trip, not the disk's fdatasync).
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


def spawn_once(argv, devnull, env=None):
    """One fork+exec+wait: (wall ms, cpu ms, minor faults)."""
    actions = [(os.POSIX_SPAWN_DUP2, devnull, 1), (os.POSIX_SPAWN_DUP2, devnull, 2)]
    start = time.perf_counter_ns()
    pid = os.posix_spawn(argv[0], argv, env or os.environ, file_actions=actions)
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
        os.fdatasync(fd)  # a file the linker just wrote has dirty pages, which DONTNEED cannot drop
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        while os.read(fd, 1 << 20):
            pass
    finally:
        os.close(fd)


def instructions(argv, env=None):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "cg.out")
        r = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *argv],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
        for line in r.stderr.splitlines():
            if "Collected :" in line:
                return int(line.split(":")[-1].strip())
    return None


def p90(values):
    s = sorted(values)
    return s[max(0, -(-9 * len(s) // 10) - 1)]  # nearest rank


def commands_for(binaries, work_env=None):
    """{name: (argv, env)}; env None: this process's."""
    commands = {"/bin/true": (["/bin/true"], None)}
    for b in binaries:
        label = "gpulane" if len(binaries) == 1 else b
        path = os.path.abspath(b)
        for words in (["--version"], ["--help"], ["pick", "--help"]):
            commands[f"{label} {' '.join(words)}"] = ([path, *words], None)
        if work_env:
            commands[f"{label} pick"] = ([path, "pick"], dict(work_env, GPULANE_DIRECT_NVML="1"))
            commands[f"{label} submit --hold -- true"] = ([path, "submit", "--hold", "--", "true"], work_env)
    tsp = shutil.which("tsp")
    if tsp:
        commands["tsp -V"] = ([tsp, "-V"], None)
    return commands


def preamble(args, binaries, load_before, load_after):
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True).stdout
    lines = [f"## CLI start ({args.n} runs each, interleaved, shuffled each round)", "",
             f"`python3 bench/cli_start.py {' '.join(args.gpulane)} -n {args.n}"
             f"{' --instructions' if args.instructions else ''}{' --work' if args.work else ''}`",
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
    ap.add_argument("--work", action="store_true",
                    help="also `pick` on the fake NVML and `submit --hold -- true` to a daemon (tmpfs state)")
    args = ap.parse_args()
    if not args.gpulane:
        args.gpulane = ["build/gpulane"]
    if not args.work:
        return measure(args, commands_for(args.gpulane))
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from submit_rate import Daemon, fake_nvml_env  # the fake machine and per-user daemon of that bench
    shm = tempfile.mkdtemp(prefix="cli-start.", dir="/dev/shm")
    try:
        lease_dir = os.path.join(shm, "leases")
        os.makedirs(lease_dir, mode=0o1777)
        daemon = Daemon(os.path.abspath(args.gpulane[0]), fake_nvml_env(shm), os.path.join(shm, "daemon"), lease_dir)
        try:
            return measure(args, commands_for(args.gpulane, daemon.env))
        finally:
            daemon.stop()
    finally:
        shutil.rmtree(shm, ignore_errors=True)


def measure(args, commands):
    if not args.keep_page_cache:
        for b in args.gpulane:
            settle_page_cache(b)
    devnull = os.open(os.devnull, os.O_WRONLY)
    load_before = os.getloadavg()
    for _ in range(args.warmup):
        for argv, env in commands.values():
            spawn_once(argv, devnull, env)
    samples = {name: [] for name in commands}
    rng = random.Random(args.seed)
    order = list(commands)
    for _ in range(args.n):
        rng.shuffle(order)
        for name in order:
            samples[name].append(spawn_once(*commands[name][:1], devnull, commands[name][1]))
    load_after = os.getloadavg()
    print(preamble(args, args.gpulane, load_before, load_after))
    base = statistics.median(w for w, _, _ in samples["/bin/true"])
    print("| command | median ms | p90 ms | median over /bin/true ms | ratio to /bin/true | "
          "CPU ms (median) | minor faults (median) | instructions |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, (argv, env) in commands.items():
        wall = [w for w, _, _ in samples[name]]
        cpu = statistics.median(c for _, c, _ in samples[name])
        faults = statistics.median(f for _, _, f in samples[name])
        med = statistics.median(wall)
        ins = ""
        if args.instructions:
            ins = instructions(argv, env) if shutil.which("valgrind") else "no valgrind"
        print(f"| `{name}` | {med:.2f} | {p90(wall):.2f} | {med - base:+.2f} | {med / base:.2f} | "
              f"{cpu:.1f} | {faults:.0f} | {ins} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
