#!/usr/bin/env python3
"""Checks the include rules of ARCHITECTURE.md ("Rules"), for CI (a ctest test) and by hand.

  python3 scripts/check-includes.py [SRC_DIR]

Each folder of src/ may include only the folders listed for it in ALLOWED (a layering: nothing
includes a folder above it), plus:
  - sched/ includes nothing but C++ standard headers and util/ (the policy is pure); so does
    telemetry/ (history, accounting and anomaly rules on samples the daemon passes in), which
    may also use fmt for its lines for people;
  - only gpu/ includes nvml/; nothing outside cli/ includes cli/;
  - daemon/ops/ (the request handlers) never includes daemon/daemon.h: a handler sees the narrow
    context of daemon/ops/context.h, not the Daemon;
  - nothing but cli/ writes to stdout (fmt::print without stderr, printf, puts, std::cout).
Prints one line per violation (file:line: what) and exits 1 when there is any, else 0.
"""
import pathlib
import re
import sys

# Folder -> the folders it may include (besides itself). Lower layers first.
ALLOWED = {
    "util": set(),
    "nvml": {"util"},
    "sched": {"util"},
    "sim": {"sched", "util"},
    "gpu": {"nvml", "util"},
    "telemetry": {"util"},
    "os": {"gpu", "util"},
    "proto": {"gpu", "sched", "telemetry", "util"},
    "store": {"proto", "sched", "util", "telemetry"},
    "lease": {"gpu", "os", "proto", "sched", "telemetry", "util"},
    "exec": {"gpu", "lease", "os", "sched", "util", "telemetry"},
    "render": {"gpu", "lease", "sched", "store", "util", "telemetry"},
    # Slurm's client commands behind slurm/command_runner.h; translation and state mapping pure.
    "slurm": {"sched", "util"},
    "daemon": {"exec", "gpu", "lease", "os", "proto", "render", "sched", "store", "util", "telemetry"},
    # gpulane-web's executable: a client of the daemon (daemon/ for daemon/paths.h only).
    "web": {"daemon", "gpu", "proto", "render", "telemetry", "util"},
    "cli": {"daemon", "exec", "gpu", "lease", "os", "proto", "render", "sched", "sim", "slurm", "store", "util", "telemetry"},
}

PROJECT_INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/[^"]+"')
SYSTEM_INCLUDE = re.compile(r"^\s*#\s*include\s+<([^>]+)>")
STDOUT_WRITE = re.compile(r"fmt::print\((?!\s*stderr)|\bstd::cout\b|(?<![\w:])printf\(|(?<![\w:])puts\(")


def check(src: pathlib.Path) -> list:
    problems = []
    folders = sorted(p.name for p in src.iterdir() if p.is_dir())
    for folder in folders:
        if folder not in ALLOWED:
            problems.append(f"{src / folder}: folder not in the include rules (scripts/check-includes.py ALLOWED)")
    for path in sorted(src.rglob("*")):
        if path.suffix not in (".h", ".cc") or not path.is_file():
            continue
        folder = path.relative_to(src).parts[0]
        allowed = ALLOWED.get(folder, set())
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            where = f"{path}:{number}"
            m = PROJECT_INCLUDE.match(line)
            if line.strip().startswith("#") and '"daemon/daemon.h"' in line and path.relative_to(src).parts[:2] == ("daemon", "ops"):
                problems.append(f"{where}: daemon/ops/ may not include daemon/daemon.h (a handler takes ops::Context)")
            if m and m.group(1) != folder and m.group(1) not in allowed:
                problems.append(f"{where}: {folder}/ may not include {m.group(1)}/ (allowed: {', '.join(sorted(allowed)) or 'nothing'})")
            m = SYSTEM_INCLUDE.match(line)
            if m and folder in ("sched", "telemetry") and not re.fullmatch(r"[a-z_]+", m.group(1)) \
                    and not (folder == "telemetry" and m.group(1).startswith("fmt/")):
                problems.append(f"{where}: {folder}/ includes only C++ standard headers and util/, not <{m.group(1)}>")
            if folder != "cli" and STDOUT_WRITE.search(line.split("//")[0]):
                problems.append(f"{where}: only cli/ writes to stdout")
    return problems


def main() -> int:
    src = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent / "src")
    problems = check(src)
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} include rule violation(s); see ARCHITECTURE.md, Rules", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
