#!/usr/bin/env python3
"""The seams of issue 25, item 3: below cli/ (every folder of src/ but cli/), code reads no clock,
forks no process, builds no ProcfsProcessTable, opens no NVML backend and opens no job or history
store of its own; those come from what the executables' main() passes down (leveldb's Env, ninja's
real implementations wired in one file): os::Env (os/env.h: clock, /proc, spawner, GPUs) and, for
the stores, daemon::DaemonParts (daemon/daemon_parts.h, built by `gpulane daemon`). Until that
is done everywhere, scripts/seam-exceptions.txt names each file that still does, with how many
times and why; a file may do it that often or less, never more, and a file not named may not at
all. Prints each breach on one line and exits 1; prints nothing and exits 0 when the tree keeps
the rules.

  scripts/check-seams.py SRC_DIR            the check (ctest ArchitectureSeams)
  scripts/check-seams.py --report SRC_DIR   every place, by kind and file (for a closing note)
"""
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / 'lib'))
import src_check  # noqa: E402

KINDS = {
    # A clock read: std::chrono's clocks (also through an alias of any name: `Clock::now()`, `PollClock::now()`), the C calls, and
    # a SystemClock (util/clock.h) built on the spot instead of the one os::Env carries.
    'clock': re.compile(r'\b(system_clock|steady_clock|high_resolution_clock)::now\s*\(|\b\w*Clock::now\s*\(|'
                        r'\bclock_gettime\s*\(|\bgettimeofday\s*\(|\btime\s*\(\s*(nullptr|NULL|0)\s*\)|'
                        r'\bSystemClock\s*(\(\s*\)|\{\s*\}|\s+[A-Za-z_]\w*\s*[;({])'),
    'fork': re.compile(r'\b(fork|vfork)\s*\(\s*\)|\bposix_spawnp?\s*\(|\bclone3?\s*\('),
    'procfs': re.compile(r'\bProcfsProcessTable\s+\w+\s*[;({]|\bProcfsProcessTable\s*[({]|'
                         r'make_(unique|shared)<\s*(os::)?ProcfsProcessTable\s*>'),
    # NVML opened: NvmlBackend::Open, an NvmlBackend or NvmlOpener built (not os::Env's GPUs).
    'nvml': re.compile(r'\bNvmlBackend::Open\s*\(|make_(unique|shared)<\s*NvmlBackend\s*>|\bnew\s+NvmlBackend\b|'
                       r'\bNvmlOpener\s+\w+\s*[;({]|\bNvmlOpener\s*[({]'),
    # A job or history store opened (SQLite): not DaemonParts' open_store/open_history.
    'store': re.compile(r'\b(JobStore|HistoryStore)::Open\s*\(|\bCountJobs\s*\(|\bsqlite3_open(_v2|16)?\s*\('),
}
# Where each seam is implemented: the one place allowed to do it.
HOME = {
    'clock': {'src/util/timing.cc', 'src/util/clock.h', 'src/os/env.h'},
    'fork': {'src/os/spawn.cc'},
    'procfs': {'src/os/process_table.cc', 'src/os/process_table.h', 'src/os/env.h'},
    'nvml': {'src/gpu/nvml_backend.cc', 'src/gpu/nvml_backend.h', 'src/gpu/nvml_opener.h', 'src/os/env.h'},
    'store': {'src/store/job_store.cc', 'src/store/history_store.cc', 'src/store/job_counts.cc', 'src/store/job_counts.h',
              'src/daemon/daemon_parts.cc'},
}


def code_lines(path):
    """The file's lines with // comments cut (enough for these patterns)."""
    for line in path.read_text(errors='replace').splitlines():
        yield line.split('//', 1)[0]


def read_exceptions(path):
    allowed = {}
    for raw in path.read_text().splitlines() if path.exists() else []:
        line = raw.strip()
        if not line or line.startswith('#'):
            continue
        key, _, reason = line.partition(' -- ')
        m = re.match(r'(\S+)\s+(' + '|'.join(KINDS) + r')\s+(\d+)$', key.strip())
        if not m or not reason.strip():
            sys.exit(f'{path}: "{line}": write PATH KIND COUNT -- why')
        allowed[(m.group(1), m.group(2))] = int(m.group(3))
    return allowed


def main():
    report, src, root = src_check.parse_args('check-seams.py')
    allowed = read_exceptions(root / 'scripts' / 'seam-exceptions.txt')
    counts = {}
    for rel, path in src_check.cpp_files(src, root):
        if rel.startswith('src/cli/') or rel.endswith('/main.cc'):
            continue
        for line in code_lines(path):
            for kind, pattern in KINDS.items():
                if rel not in HOME[kind]:
                    counts[(rel, kind)] = counts.get((rel, kind), 0) + len(pattern.findall(line))
    counts = {k: n for k, n in counts.items() if n}
    if report:
        for (rel, kind), n in sorted(counts.items(), key=lambda kv: (kv[0][1], kv[0][0])):
            print(f'{kind:6s} {n:3d}  {rel}')
        for kind in KINDS:
            print(f'{kind}: {sum(n for (_, k), n in counts.items() if k == kind)} in all')
        return 0
    breaches = []
    for (rel, kind), n in sorted(counts.items()):
        limit = allowed.get((rel, kind), 0)
        if n > limit:
            breaches.append(f'{rel}: {n} direct {kind} call(s) below cli/, {limit} allowed: take it from the caller '
                            '(os::Env; the stores: daemon::DaemonParts) instead')
    for (rel, kind), limit in sorted(allowed.items()):
        if counts.get((rel, kind), 0) < limit:
            breaches.append(f'scripts/seam-exceptions.txt: "{rel} {kind} {limit}" allows more than the file does now '
                            f'({counts.get((rel, kind), 0)}): lower it')
    for b in breaches:
        print(b)
    return 1 if breaches else 0


if __name__ == '__main__':
    sys.exit(main())
