#!/usr/bin/env python3
"""Root never opens a user's path with root's rights (docs/security.md): for CI (a ctest test) and by hand.

  python3 scripts/check-user-paths.py [SRC_DIR]

The system daemon and its supervisors run as root, and every path a user can name or change (a
job's logs, its working folder, the programs on its PATH, anything under her control) must be
opened through os/user_file.h (os::OpenAsUser and its helpers: the user's rights, no symlinks,
no blocking, regular files only, bounded reads). This check finds every other call under
src/daemon/ and src/exec/ that takes a path (open, openat, fopen, file streams, std::filesystem,
stat, lstat, access, opendir, chdir, unlink, rename, mkdir, chmod, readlink, remove, truncate; and
os::FileSystem's Stat, ReadFile, WriteFileDurably, WriteFileAtomically, RemoveFile, ListDir and
LockedExclusively, os::Env's files, which have root's rights too) and
fails unless the line is in ALLOWED below with the reason it is not a user's path. An entry that
matches no line any more fails too, so the list stays the list of what is there.
Prints one line per problem (file:line: what) and exits 1 when there is any, else 0.
"""
import pathlib
import re
import sys

FOLDERS = ("daemon", "exec")

PATH_CALL = re.compile(
    r"(?<![\w.>:])(?:std::|::)?"
    r"(open|openat|openat2|fopen|freopen|stat|lstat|fstatat|statx|access|faccessat|opendir|chdir|unlink|unlinkat|"
    r"rename|renameat|renameat2|mkdir|mkdirat|chmod|chown|lchown|readlink|realpath|remove|truncate|mkfifo)\s*\("
    r"|std::(?:i|o)?fstream\b|std::filesystem::|\bfs::"
    r"|\.(?:Stat|ReadFile|WriteFileDurably|WriteFileAtomically|RemoveFile|ListDir|LockedExclusively)\s*\(")  # os::FileSystem (os/file_system.h): root's rights as well

STATE = "the daemon's own state folder (root's, 0700; the user's own for a per-user daemon), never a user's path"
OWN = "a fixed path of the system, not one a user names"
CHILD = "in the job's forked child after it became the job's user (PrepareChild): the user's own rights"
ISOLATION = ("device isolation (exec/device_isolation): /dev and /proc/driver/nvidia entries, system paths, in the "
             "job's own mount namespace before it runs")
ADMIN = "a path from the admin's config or the daemon's own paths (daemon/paths.h), not a user's"

# file (relative to src/) -> [(a fragment of the line, why it is not a user's path)]
ALLOWED = {
    "exec/command_check.cc": [
        ("stat(path.c_str(), &st)", "called only by `gpulane run` and `submit` (cli/), in the user's own process with her own rights"),
        ("access(path.c_str(), X_OK)", "called only by `gpulane run` and `submit` (cli/), in the user's own process with her own rights"),
    ],
    "daemon/daemon.cc": [
        ("mkdir(partial.c_str()", ADMIN + ": the daemon's folders"),
        ('open("/dev/null"', OWN),
        ('open((paths_.state_dir + "/daemon.lock")', STATE),
        ('readlink("/proc/self/exe"', OWN),
        ("unlink(paths_.socket.c_str())", ADMIN + ": its socket"),
    ],
    "daemon/job_files.cc": [
        ("open(dir.c_str()", STATE),
        ("open(path.c_str()", STATE),
        ("unlink(path.c_str())", STATE),
        ("open(reserve.c_str()", STATE),
        ("rename(reserve.c_str(), status_path().c_str())", STATE),
        ("files_.RemoveFile(reserve_path())", STATE),
        ("files_.ReadFile(exec_path())", STATE),
        ("files_.WriteFileDurably(spec_path()", STATE),
        ("files_.ReadFile(spec_path())", STATE),
        ("files_.WriteFileDurably(status_path()", STATE),
        ("files_.WriteFileAtomically(status_path()", STATE),
        ("files_.ReadFile(status_path())", STATE),
        ("files_.LockedExclusively(lock_path())", STATE),
        ("files_.RemoveFile(path)", STATE + ": the job's five files (JobFiles::Remove)"),
        ("files_.RemoveFile(status_path())", STATE),
        ("files.ListDir(jobs_dir)", STATE + ": the jobs folder"),
    ],
    "daemon/launcher.cc": [
        ('open("/dev/null"', OWN),
        ("open(log_path_.c_str()", STATE + ": supervisor.log"),
    ],
    "daemon/paths.cc": [
        ("stat(path.c_str(), &st)", ADMIN + ": whether a daemon socket exists"),
        ("lstat(dir.c_str(), &st)", ADMIN + ": the runtime folder, checked for its owner and mode"),
        ("mkdir(dir.c_str(), 0700)", ADMIN + ": the runtime folder"),
        ("chmod(dir.c_str(), 0700)", ADMIN + ": the runtime folder"),
    ],
    "daemon/sampler_thread.cc": [
        ("std::fopen(temp.c_str()", ADMIN + ": telemetry.hpc_job_mapping_dir"),
        ("std::rename(temp.c_str(), path.c_str())", ADMIN + ": telemetry.hpc_job_mapping_dir"),
        ("std::remove(temp.c_str())", ADMIN + ": telemetry.hpc_job_mapping_dir"),
    ],
    "daemon/server.cc": [
        ('open("/dev/null"', OWN),
    ],
    "daemon/store_marker.cc": [
        ("files.Stat(marker_path", STATE),
        ("files.ReadFile(marker_path)", STATE),
        ("files.Stat(db_path", STATE),
        ("files.WriteFileDurably(StoreMarkerPath(db_path)", STATE),
    ],
    "daemon/supervisor.cc": [
        ("unlink(token.c_str())", "the test fault point GPULANE_TEST_SUPERVISOR_DIES: the supervisor's environment is "
                                  "the daemon's, not the job's"),
        ("open(files.lock_path().c_str()", STATE),
        ("fs.Stat(std::filesystem::path(files.status_path())", STATE + ": whether its jobs folder is still there"),
    ],
    "daemon/web_child.cc": [
        ('open("/dev/null"', OWN),
        ("access(spec.exe.c_str(), X_OK)", ADMIN + ": gpulane-web beside the daemon's own binary"),
    ],
    "exec/device_isolation.cc": [
        ("opendir(dir.c_str())", ISOLATION),
        ("fstatat(dirfd(d), e->d_name", ISOLATION),
        ("std::ifstream in(path)", ISOLATION + ": the driver's params and nvidia-caps/mig-minors"),
        ("mkdir(path, 0555)", ISOLATION),
        ("open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0444)", ISOLATION + ": a mount point on its tmpfs"),
        ("open(plan.proc_kept[i].path.c_str()", ISOLATION),
        ("open(plan.gpus_kept[i].c_str()", ISOLATION),
        ("mkdir(plan.gpus_dir.c_str(), 0555)", ISOLATION),
        ("open(plan.params_path.c_str()", ISOLATION + ": on its tmpfs"),
    ],
    "exec/isolation_run.cc": [
        ('open("/proc/self/ns/mnt"', OWN + ": the spawner's own mount namespace (GPULANE_ISOLATE_TIMING=1 only)"),
    ],
    "exec/job_runner.cc": [
        ("opendir(task_dir.c_str())", OWN + ": /proc/<pid>/task"),
        ('std::ifstream in(task_dir + "/"', OWN + ": /proc/<pid>/task/<tid>/children"),
        ('opendir("/proc")', OWN),
        ('std::ifstream in(fmt::format("/proc/{}/stat"', OWN),
        ("std::string stat((std::istreambuf_iterator<char>(in)), {})", "a string named stat (/proc/<pid>/stat's text), no call"),
    ],
    "exec/job_child.cc": [
        ("fd = open(opened, flags, 0644)", CHILD),
        ("lstat(opened, &st)", CHILD),
        ("chdir(spec.cwd.c_str())", CHILD),
    ],
    "exec/notify.cc": [
        ("access(candidate.c_str(), X_OK)", "curl on the supervisor's own PATH (root's environment), before it becomes the user"),
        ('open("/dev/null"', OWN),
    ],
}

STRING = re.compile(r'"(?:[^"\\]|\\.)*"')


def code_of(line: str) -> str:
    """The line without its // comment and with string literals emptied (kept as "")."""
    without_strings = STRING.sub('""', line)
    cut = without_strings.find("//")
    return without_strings if cut < 0 else without_strings[:cut]


def check(src: pathlib.Path) -> list:
    problems = []
    used = set()
    for folder in FOLDERS:
        for path in sorted((src / folder).rglob("*")):
            if path.suffix not in (".h", ".cc") or not path.is_file():
                continue
            rel = path.relative_to(src).as_posix()
            allowed = ALLOWED.get(rel, [])
            in_block_comment = False
            for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                stripped = line.strip()
                if in_block_comment:
                    in_block_comment = "*/" not in stripped
                    continue
                if stripped.startswith("/*"):
                    in_block_comment = "*/" not in stripped
                    continue
                if not PATH_CALL.search(code_of(line)):
                    continue
                hits = [i for i, (fragment, _) in enumerate(allowed) if fragment in line]
                if not hits:
                    problems.append(f"{path}:{number}: a path is opened or changed here outside os/user_file.h "
                                    f"(os::OpenAsUser); if it is not a user's path, add it to ALLOWED in "
                                    f"scripts/check-user-paths.py with the reason")
                used.update((rel, i) for i in hits)
    for rel, entries in ALLOWED.items():
        for i, (fragment, _) in enumerate(entries):
            if (rel, i) not in used:
                problems.append(f"{src / rel}: ALLOWED entry {fragment!r} matches no line: remove it from "
                                f"scripts/check-user-paths.py")
    return problems


def main() -> int:
    src = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent / "src")
    problems = check(src)
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} problem(s); see docs/security.md, \"Root never opens a user's path with root's rights\"",
              file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
