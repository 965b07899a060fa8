"""A page's sandbox for the doc tests: a temporary HOME, lease directory, runtime and temp folder, a
working folder that mirrors the clone, the fake NVML on the idle 2 x H200 recording, and one bash
session that runs the page's commands in order (tests/doc/README.md)."""
import dataclasses
import os
import pwd
import select
import shutil
import signal
import subprocess
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
IDLE_RECORDING = "tests/fixtures/h200x2-2026-11-30-idle/nvml_snapshot.json"
# Programs the pages run that a clone does not have: a stand-in for each (tests/doc/standins/).
STANDIN_SCRIPTS = ("train.py", "eval.py", "big.py", "export.py", "sweep.py")
STANDIN_OUTPUTS = ("runs",)  # what the stand-ins make in the working folder: the user's programs' own output
# The user's own config: the daemon's dashboard on a free port, never 9470 (tests never bind it).
USER_CONFIG = '[web]\nlisten = "127.0.0.1:0"\n'


@dataclasses.dataclass
class Result:
    rc: int | None
    output: str
    timed_out: bool = False
    interrupted: bool = False
    limit_s: int = 0


def children_of(pid):
    kids = []
    for task in os.listdir(f"/proc/{pid}/task") if os.path.isdir(f"/proc/{pid}/task") else []:
        try:
            with open(f"/proc/{pid}/task/{task}/children") as f:
                kids += [int(k) for k in f.read().split()]
        except OSError:
            pass
    return kids


def descendants(pid):
    found, todo = [], children_of(pid)
    while todo:
        p = todo.pop()
        found.append(p)
        todo += children_of(p)
    return found


def signal_all(pids, sig):
    for p in pids:
        try:
            os.kill(p, sig)
        except ProcessLookupError:
            pass


class Session:
    """One `bash --norc --noprofile` reading the page's commands from a pipe (its stdin is /dev/null,
    so a command that reads stdin cannot eat the next ones); after each command it writes its exit
    status to a second pipe."""

    def __init__(self, env, cwd, log_path):
        self.log_path = log_path
        self.log = open(log_path, "ab")
        script_r, self.script_w = os.pipe()
        self.status_r, status_w = os.pipe()
        self.status_fd = status_w
        self.bash = subprocess.Popen(
            ["bash", "--norc", "--noprofile", f"/proc/self/fd/{script_r}"], stdin=subprocess.DEVNULL,
            stdout=self.log, stderr=subprocess.STDOUT, env=env, cwd=cwd, pass_fds=(script_r, status_w),
            start_new_session=True)
        os.close(script_r)
        os.close(status_w)
        self.pending = b""

    def _read_status(self, limit_s):
        deadline = time.monotonic() + limit_s
        while b"\n" not in self.pending:
            left = deadline - time.monotonic()
            if left <= 0 or self.bash.poll() is not None and not select.select([self.status_r], [], [], 0)[0]:
                return None
            if select.select([self.status_r], [], [], min(left, 0.5))[0]:
                chunk = os.read(self.status_r, 4096)
                if not chunk:
                    return None
                self.pending += chunk
        line, self.pending = self.pending.split(b"\n", 1)
        return int(line)

    def run(self, command, limit_s, interrupt=False):
        """Runs COMMAND; past LIMIT_S its processes get SIGINT (INTERRUPT: a Ctrl-C that the page
        expects) or SIGTERM, then SIGKILL."""
        if self.bash.poll() is not None:
            return Result(None, "(not run: the page's shell ended at an earlier command)", limit_s=limit_s)
        before = set(children_of(self.bash.pid))
        start = os.path.getsize(self.log_path)
        os.write(self.script_w, (command + f'\nprintf "%d\\n" $? >&{self.status_fd}\n').encode())
        rc = self._read_status(limit_s)
        timed_out = rc is None and self.bash.poll() is None
        if timed_out:
            own = [p for k in children_of(self.bash.pid) if k not in before for p in [k] + descendants(k)]
            signal_all(own, signal.SIGINT if interrupt else signal.SIGTERM)
            rc = self._read_status(10)
            if rc is None:
                signal_all(own, signal.SIGKILL)
                rc = self._read_status(5)
            if rc is None:  # the shell itself loops (a `while` of builtins): end it, and the page with it
                os.killpg(self.bash.pid, signal.SIGKILL)
                self.bash.wait()
        with open(self.log_path, "rb") as f:
            f.seek(start)
            output = f.read().decode("utf-8", "replace")
        if self.bash.poll() is not None and rc is None:
            output += f"\n(the shell ended, exit status {self.bash.returncode})"
        return Result(rc, output, timed_out=timed_out and not interrupt, interrupted=timed_out and interrupt,
                      limit_s=limit_s)

    def close(self):
        os.close(self.script_w)  # bash reads end of file and exits; background jobs live on
        try:
            self.bash.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.bash.kill()
            self.bash.wait()
        os.close(self.status_r)
        self.log.close()


class Sandbox:
    def __init__(self, build, source):
        self.build, self.source = build, source

    def __enter__(self):
        self.root = tempfile.mkdtemp(prefix="gpulane-doctest-")
        os.chmod(self.root, 0o755)
        for d in ("home", "run", "leases", "tmp", "bin", "work"):
            os.mkdir(os.path.join(self.root, d))
        os.chmod(self.path("run"), 0o700)
        os.chmod(self.path("leases"), 0o1777)
        self._mirror_clone()
        self._install_standins()
        cfg = self.path("home/.config/gpulane")
        os.makedirs(cfg)
        with open(os.path.join(cfg, "config.toml"), "w") as f:
            f.write(USER_CONFIG)
        shutil.copy(os.path.join(self.source, IDLE_RECORDING), self.path("nvml_state.json"))
        return self

    def __exit__(self, *exc):
        self.stop_processes()
        shutil.rmtree(self.root, ignore_errors=True)

    def path(self, rel):
        return os.path.join(self.root, rel)

    def _mirror_clone(self):
        """work/: a link to each top-level entry of the clone (build/ to the build folder), so the pages'
        relative paths work and what their commands write (job logs, files) stays in the sandbox."""
        for entry in os.listdir(self.source):
            if entry not in ("build", ".git"):
                os.symlink(os.path.join(self.source, entry), self.path(f"work/{entry}"))
        os.symlink(self.build, self.path("work/build"))

    def _install_standins(self):
        standins = os.path.join(HERE, "standins")
        for name in ("python", "torchrun"):
            shutil.copy(os.path.join(standins, name), self.path(f"bin/{name}"))
        for name in STANDIN_SCRIPTS:
            shutil.copy(os.path.join(standins, "program.py"), self.path(f"work/{name}"))

    def env(self):
        user = pwd.getpwuid(os.getuid()).pw_name
        return {
            "HOME": self.path("home"), "USER": user, "LOGNAME": user, "SHELL": "/bin/bash",
            "PATH": f"{self.path('bin')}:{self.build}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "LANG": "C.UTF-8", "TERM": "dumb", "TMPDIR": self.path("tmp"), "XDG_RUNTIME_DIR": self.path("run"),
            # the fake NVML, as scripts/setup.sh runs it where there is no driver
            "GPULANE_DIRECT_NVML": "1", "FAKE_NVML_STATE": self.path("nvml_state.json"),
            "GPULANE_NVML_LIBRARY": os.path.join(self.build, "fake_nvml/current/libnvidia-ml.so.1"),
            # nothing of the machine's own: its lease directory, its system daemon (whose socket a
            # client would ask first)
            "GPULANE_LEASE_DIR": self.path("leases"), "GPULANE_SYSTEM_DAEMON": "0",
            "GPULANE_SOCKET": self.path("run/gpulane.sock"),
        }

    def session(self):
        box = self

        class Ctx:
            def __enter__(self):
                self.s = Session(box.env(), box.path("work"), box.path("session.log"))
                return self.s

            def __exit__(self, *exc):
                self.s.close()
        return Ctx()

    def _own_processes(self):
        """Processes started in this sandbox (their HOME is its home), found through /proc."""
        marker = f"HOME={self.path('home')}".encode()
        own = []
        for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    if marker in f.read().split(b"\0"):
                        own.append(pid)
            except OSError:
                pass
        return [p for p in own if p != os.getpid()]

    def stop_processes(self):
        """Stops what the page left running (daemons, background jobs); returns those that would not stop."""
        own = self._own_processes()
        signal_all(own, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while own and time.monotonic() < deadline:
            time.sleep(0.1)
            own = [p for p in own if os.path.exists(f"/proc/{p}") and not is_zombie(p)]
        signal_all(own, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while own and time.monotonic() < deadline:
            time.sleep(0.1)
            own = [p for p in own if os.path.exists(f"/proc/{p}") and not is_zombie(p)]
        return own


def is_zombie(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True
