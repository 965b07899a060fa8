#!/usr/bin/env python3
"""Storage-fault harness: what gpulane's daemon does when its storage fails, scenario by scenario,
checked against the rules of issue 9 (items 15 and 16: failed writes, damaged databases).

    scripts/storage-faults.py               every scenario
    scripts/storage-faults.py --list        the scenarios and their rules
    scripts/storage-faults.py SCENARIO...   these (CI runs those that pass today: .ci/run)

Each scenario runs a per-user daemon of its own on a fake machine of two idle GPUs (the tests'
fake NVML, build/), with its state folder (jobs.db, job files) and its jobs' log folder where the
scenario puts them, and prints one line per rule: "PASS <scenario>: <rule>" or "FAIL <scenario>:
<rule>: <what happened>" (and "SKIP" where the scenario cannot run: disk-full ones need root to
mount a small tmpfs). The exit status is 1 when any rule failed, 0 otherwise, so a rule that fails
today cannot pass unseen: CI names the scenarios to run, and one is added to that list once its
fix has landed and it passes.

Faults:
  disk full      a tmpfs of a few MiB mounted on the state folder or on the log folder, filled up
                 by a file (removed again to end the fault);
  locked         another process holds BEGIN EXCLUSIVE on jobs.db (longer than the daemon's 5 s
                 SQLite busy time-out);
  damaged        jobs.db overwritten with garbage, cut to half, cut to zero bytes, or bind-mounted
                 read-only, after the daemon stopped with jobs in it.
"""
import argparse
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harnesslib import ROOT, call, gpulane, machine_env, ping  # noqa: E402

TAG_VARIABLE = "GPULANE_STORAGE_FAULTS_TAG"
FINAL = {"completed", "failed", "cancelled", "timeout"}


class Skip(Exception):
    pass


class Case:
    """One scenario's machine, daemon, folders and results."""

    def __init__(self, name, build, state_on_tmpfs=False, logs_on_tmpfs=False, tmpfs_options="size=8m"):
        self.name = name
        self.build = build
        self.binary = os.path.join(ROOT, build, "gpulane")
        self.dir = tempfile.mkdtemp(prefix="gpulane-storage-%s-" % name)
        self.mounts = []
        self.state = os.path.join(self.dir, "state")
        self.work = os.path.join(self.dir, "work")
        os.makedirs(self.state)
        os.makedirs(self.work)
        if state_on_tmpfs:
            self.mount_tmpfs(self.state, tmpfs_options)
        if logs_on_tmpfs:
            self.mount_tmpfs(self.work, tmpfs_options)
        self.tag = "storage-%d-%s" % (os.getpid(), name)
        self.env = machine_env(build, self.dir, self.state, TAG_VARIABLE, self.tag, 2, {
            "GPULANE_DAEMON_REQUEUE_GRACE": "0.5s", "GPULANE_DAEMON_TICK": "0.1s"})
        self.socket = self.env["GPULANE_SOCKET"]
        self.marks = os.path.join(self.dir, "marks.log")
        self.daemons = []
        self.results = []
        self.fillers = []

    # --- faults -------------------------------------------------------------------------------
    def mount_tmpfs(self, path, options):
        if os.geteuid() != 0:
            raise Skip("mounting a tmpfs needs root")
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", options + ",mode=0755", "tmpfs", path], capture_output=True,
                           text=True)
        if r.returncode != 0:
            raise RuntimeError("mount -t tmpfs on %s failed: %s" % (path, r.stderr.strip()))
        self.mounts.append(path)

    def fill(self, path):
        """Fills the file system of `path` until ENOSPC; the filler is removed by free()."""
        filler = os.path.join(path, ".filler-%d" % len(self.fillers))
        self.fillers.append(filler)
        with open(filler, "wb", buffering=0) as f:
            chunk = b"\0" * 65536
            try:
                while True:
                    f.write(chunk)
            except OSError:
                pass
            try:
                while True:
                    f.write(b"\0" * 512)
            except OSError:
                pass

    def free(self):
        for f in self.fillers:
            try:
                os.unlink(f)
            except FileNotFoundError:
                pass
        self.fillers = []

    # --- the daemon ---------------------------------------------------------------------------
    def start_daemon(self, wait=True):
        log = open(os.path.join(self.dir, "daemon.log"), "a")
        p = subprocess.Popen([self.binary, "daemon", "--user"], env=self.env, cwd=self.work, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=log)
        self.daemons.append(p)
        if wait:
            deadline = time.time() + 30
            while time.time() < deadline:
                if p.poll() is not None:
                    raise RuntimeError("the daemon exited with %d: %s" % (p.returncode, self.daemon_log()[-500:]))
                if ping(self.socket) == p.pid:
                    return p
                time.sleep(0.02)
            raise RuntimeError("the daemon did not answer within 30 s")
        return p

    def kill9(self):
        for p in self.daemons:
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
                p.wait()

    def stop(self):
        for p in self.daemons:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(30)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()

    def daemon_log(self):
        try:
            with open(os.path.join(self.dir, "daemon.log"), errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def gpulane(self, args, timeout=60):
        return gpulane(self.binary, self.env, args, self.work, timeout)

    def submit(self, argv, options=(), timeout=60):
        r = self.gpulane(["submit"] + list(options) + ["--"] + argv, timeout)
        out = r.stdout.strip()
        return (int(out) if r.returncode == 0 and out.isdigit() else None), r

    def job(self, jid):
        reply = call(self.socket, {"op": "show", "id": jid}, 10)
        if reply and reply.get("ok"):
            return reply.get("job") or (reply.get("jobs") or [None])[0]
        return None

    def wait_final(self, jid, timeout=30):
        deadline = time.time() + timeout
        job = None
        while time.time() < deadline:
            job = self.job(jid)
            if job and job["state"] in FINAL:
                return job
            time.sleep(0.05)
        return job

    def marked_job(self, gate=None, exit_code=0):
        wait = 'while [ ! -e "%s" ]; do sleep 0.02; done; ' % gate if gate else ""
        return ["/bin/sh", "-c", 'echo "start $GPULANE_JOB_ID" >> "%s"; %s echo "end $GPULANE_JOB_ID" >> "%s"; exit %d' % (
            self.marks, wait, self.marks, exit_code)]

    def starts(self, jid):
        try:
            with open(self.marks) as f:
                return sum(1 for line in f if line.split() == ["start", str(jid)])
        except FileNotFoundError:
            return 0

    def ended(self, jid):
        try:
            with open(self.marks) as f:
                return any(line.split() == ["end", str(jid)] for line in f)
        except FileNotFoundError:
            return False

    def tagged_processes(self):
        marker = ("%s=%s" % (TAG_VARIABLE, self.tag)).encode()
        out = []
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) == os.getpid():
                continue
            try:
                with open("/proc/%s/environ" % name, "rb") as f:
                    if marker not in f.read().split(b"\0"):
                        continue
                with open("/proc/%s/cmdline" % name, "rb") as f:
                    argv = f.read().split(b"\0")
                with open("/proc/%s/stat" % name, "rb") as f:
                    stat = f.read()
            except OSError:
                continue
            if stat[stat.rfind(b")") + 2:].split()[:1] == [b"Z"]:
                continue
            out.append((int(name), argv))
        return out

    def wait_no_job_processes(self, timeout=30):
        """Until no process of this scenario but daemons is left (the job and its supervisor ended)."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            left = [p for p, argv in self.tagged_processes() if len(argv) < 2 or argv[1] != b"daemon"]
            if not left:
                return True
            time.sleep(0.02)
        return False

    # --- results ------------------------------------------------------------------------------
    def rule(self, text, ok, detail=""):
        self.results.append((text, bool(ok), detail))
        print("%s %s: %s%s" % ("PASS" if ok else "FAIL", self.name, text, "" if ok else ": " + detail), flush=True)

    def cleanup(self, keep):
        self.free()
        self.stop()
        for pid, _ in self.tagged_processes():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for m in reversed(self.mounts):
            subprocess.run(["umount", "-l", m], capture_output=True)
        if not keep:
            shutil.rmtree(self.dir, ignore_errors=True)


class Locker:
    """Another process holding BEGIN EXCLUSIVE on a database until release()."""

    CODE = ("import sqlite3, sys\n"
            "c = sqlite3.connect(sys.argv[1], timeout=30, isolation_level=None)\n"
            "c.execute('BEGIN EXCLUSIVE')\n"
            "print('locked', flush=True)\n"
            "sys.stdin.readline()\n"
            "c.execute('COMMIT')\n")

    def __init__(self, db):
        self.p = subprocess.Popen([sys.executable, "-c", self.CODE, db], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True)
        line = self.p.stdout.readline().strip()
        if line != "locked":
            raise RuntimeError("the locker did not get the database: %r" % line)

    def release(self):
        if self.p.poll() is None:
            self.p.stdin.write("\n")
            self.p.stdin.flush()
            self.p.wait(30)


def state_of(job):
    """A job's state, exit code and reason for a FAIL line."""
    if not job:
        return "unknown (no such job, or no answer)"
    return "%s, exit %s, reason %r" % (job["state"], job.get("exit_code"), job.get("reason", ""))


def one_line_error(r):
    err = r.stderr.strip("\n")
    return r.returncode != 0 and err and "\n" not in err


# --- scenarios ---------------------------------------------------------------------------------
def state_disk_full_submit(c):
    c.start_daemon()
    first, _ = c.submit(["true"])
    c.rule("a submission before the fault runs", first and c.wait_final(first)["state"] == "completed")
    c.fill(c.state)
    jid, r = c.submit(["true"])
    c.rule("the daemon answers after a failed write to a full state folder", ping(c.socket) is not None)
    c.rule("a submission the full disk cannot store is refused with one error line (or stored)",
           jid is not None or one_line_error(r), "exit %d, stderr %r" % (r.returncode, r.stderr))
    c.free()
    later, r2 = c.submit(["true"])
    c.rule("once there is room again, a submission is taken and runs",
           later is not None and (c.wait_final(later) or {}).get("state") == "completed",
           "exit %d, stderr %r" % (r2.returncode, r2.stderr))
    c.kill9()
    c.start_daemon()
    for x in [first, jid, later]:
        if x is not None:
            c.rule("acknowledged job %d is still there after a restart" % x, c.job(x) is not None)


def state_disk_full_finish(c):
    c.start_daemon()
    gate = os.path.join(c.dir, "gate")
    jid, r = c.submit(c.marked_job(gate, 0))
    if jid is None:
        raise RuntimeError("submit failed: " + r.stderr)
    deadline = time.time() + 30
    while (c.job(jid) or {}).get("state") != "running" and time.time() < deadline:
        time.sleep(0.02)
    c.fill(c.state)
    open(gate, "w").close()
    ended = c.wait_no_job_processes()
    c.rule("the job ends while the state folder is full", ended and c.ended(jid))
    c.rule("the daemon answers while the state folder is full", ping(c.socket) is not None)
    c.free()
    job = c.wait_final(jid, 15)
    c.rule("once there is room again, the job's end is recorded: completed, exit 0 (issue 9, 15)",
           job and job["state"] == "completed" and job.get("exit_code") == 0,
           "state %s" % state_of(job))
    c.kill9()
    c.start_daemon()
    job = c.wait_final(jid, 15)
    c.wait_no_job_processes()
    c.rule("after a daemon restart the job is completed and ran once (issue 9, 15)",
           job and job["state"] == "completed" and c.starts(jid) == 1,
           "state %s, started %d times" % (state_of(job), c.starts(jid)))


def logs_disk_full(c):
    c.start_daemon()
    c.fill(c.work)
    jid, r = c.submit(["/bin/sh", "-c", "echo output; echo more >&2; exit 3"])
    c.rule("a submission from a full log folder is taken", jid is not None, "exit %d: %r" % (r.returncode, r.stderr))
    if jid is None:
        return
    job = c.wait_final(jid, 30)
    c.rule("the job ends and its end is recorded (failed, exit 3)",
           job and job["state"] == "failed" and job.get("exit_code") == 3,
           "state %s" % state_of(job))
    lr = c.gpulane(["logs", str(jid)], 30)
    c.rule("gpulane logs answers (exit 0, or one error line)", lr.returncode == 0 or one_line_error(lr),
           "exit %d, stderr %r" % (lr.returncode, lr.stderr))
    c.rule("the daemon answers", ping(c.socket) is not None)
    c.free()
    later, _ = c.submit(["true"])
    c.rule("once there is room again, a job runs", later and (c.wait_final(later) or {}).get("state") == "completed")


def logs_no_inodes(c):
    c.start_daemon()
    # No inode left: the log file cannot be created at all.
    i = 0
    try:
        while True:
            open(os.path.join(c.work, ".inode-%d" % i), "w").close()
            i += 1
    except OSError:
        pass
    jid, r = c.submit(["/bin/sh", "-c", "echo output"])
    if jid is None:
        c.rule("a submission whose log cannot be created is refused with one error line (or taken)", one_line_error(r),
               "exit %d: %r" % (r.returncode, r.stderr))
        return
    job = c.wait_final(jid, 30)
    c.rule("the job fails, naming its log file, and nothing is left running",
           job and job["state"] == "failed" and "gpulane-%d" % jid in job.get("reason", "") and c.wait_no_job_processes(),
           "state %s" % state_of(job))
    c.rule("its GPU is free again: a two-GPU job from another folder runs",
           (lambda j: j and (c.wait_final(j) or {}).get("state") == "completed")(
               c.submit(["true"], ["-g", "2", "-o", os.path.join(c.dir, "out-%j")])[0]))


def locked_db_submit(c):
    c.start_daemon()
    first, _ = c.submit(["true"])
    c.wait_final(first)
    locker = Locker(os.path.join(c.state, "jobs.db"))
    p = subprocess.Popen([c.binary, "submit", "--", "true"], env=c.env, cwd=c.work, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    # The daemon has read the submission once a later request on another connection is answered
    # (it reads connections in order); how long that ping takes is what a stalled loop costs others.
    t0 = time.time()
    pinged = ping(c.socket, timeout=30)
    stall = time.time() - t0
    c.rule("the daemon answers others within 1 s while the database is locked", pinged and stall < 1.0,
           "a ping took %.1f s" % stall)
    try:
        out, err = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
    jid = int(out.strip()) if p.returncode == 0 and out.strip().isdigit() else None
    locker.release()
    c.rule("a submission while the database is locked is refused with one error line, or stored",
           jid is not None or (p.returncode != 0 and err.strip() and "\n" not in err.strip()),
           "exit %s, stderr %r" % (p.returncode, err))
    later, _ = c.submit(["true"])
    c.rule("after the lock, a submission is taken and runs", later and (c.wait_final(later) or {}).get("state") == "completed")
    c.kill9()
    c.start_daemon()
    for x in [first, jid, later]:
        if x is not None:
            c.rule("acknowledged job %d is still there after a restart" % x, c.job(x) is not None)


def locked_db_finish(c):
    c.start_daemon()
    gate = os.path.join(c.dir, "gate")
    jid, r = c.submit(c.marked_job(gate, 0))
    if jid is None:
        raise RuntimeError("submit failed: " + r.stderr)
    deadline = time.time() + 30
    while (c.job(jid) or {}).get("state") != "running" and time.time() < deadline:
        time.sleep(0.02)
    locker = Locker(os.path.join(c.state, "jobs.db"))
    open(gate, "w").close()
    c.rule("the job ends while the database is locked", c.wait_no_job_processes() and c.ended(jid))
    # The fault lasts 7 s after the job's end: longer than the daemon's 5 s busy time-out.
    time.sleep(7)
    locker.release()
    job = c.wait_final(jid, 15)
    c.rule("after the lock, the job's end is recorded: completed, exit 0 (issue 9, 15)",
           job and job["state"] == "completed" and job.get("exit_code") == 0,
           "state %s" % state_of(job))
    c.kill9()
    c.start_daemon()
    job = c.wait_final(jid, 15)
    c.wait_no_job_processes()
    c.rule("after a daemon restart the job is completed and ran once (issue 9, 15)",
           job and job["state"] == "completed" and c.starts(jid) == 1,
           "state %s, started %d times" % (state_of(job), c.starts(jid)))


def with_jobs_then_stopped(c):
    """Three jobs in the store (two ended, one held), the daemon stopped cleanly."""
    c.start_daemon()
    ids = []
    for argv, opts in [(["true"], []), (["false"], []), (["true"], ["--hold"])]:
        jid, r = c.submit(argv, opts)
        if jid is None:
            raise RuntimeError("submit failed: " + r.stderr)
        ids.append(jid)
    c.wait_final(ids[0])
    c.wait_final(ids[1])
    c.stop()
    for suffix in ("-wal", "-shm"):
        try:
            os.unlink(os.path.join(c.state, "jobs.db" + suffix))
        except FileNotFoundError:
            pass
    return ids


def check_damaged_start(c, ids, what):
    p = c.start_daemon(wait=False)
    deadline = time.time() + 20
    pid = None
    while time.time() < deadline and p.poll() is None:
        pid = ping(c.socket)
        if pid == p.pid:
            break
        time.sleep(0.02)
    log = c.daemon_log()
    if p.poll() is not None:
        c.rule("a %s jobs.db stops the daemon with a message naming it" % what,
               p.returncode != 0 and "jobs.db" in log, "exit %d, log %r" % (p.returncode, log[-400:]))
        return None
    known = [x for x in ids if c.job(x) is not None]
    c.rule("a %s jobs.db is refused, or every job in it is kept: never a silently emptier store (issue 9, 16)" % what,
           len(known) == len(ids), "the daemon started and knows %d of %d jobs; log %r" % (len(known), len(ids), log[-300:]))
    return p


def db_garbage(c):
    ids = with_jobs_then_stopped(c)
    db = os.path.join(c.state, "jobs.db")
    size = os.path.getsize(db)
    with open(db, "wb") as f:
        f.write(random.Random(9).randbytes(size))
    check_damaged_start(c, ids, "garbage")


def db_truncated(c):
    ids = with_jobs_then_stopped(c)
    db = os.path.join(c.state, "jobs.db")
    os.truncate(db, os.path.getsize(db) // 2)
    check_damaged_start(c, ids, "truncated")


def db_zero_length(c):
    ids = with_jobs_then_stopped(c)
    os.truncate(os.path.join(c.state, "jobs.db"), 0)
    check_damaged_start(c, ids, "zero-length")


def db_read_only(c):
    if os.geteuid() != 0:
        raise Skip("a read-only bind mount needs root (root writes files whatever their mode)")
    ids = with_jobs_then_stopped(c)
    db = os.path.join(c.state, "jobs.db")
    for args in (["--bind", db, db], ["-o", "remount,ro,bind", db]):
        r = subprocess.run(["mount"] + args, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError("mount %s failed: %s" % (" ".join(args), r.stderr.strip()))
    c.mounts.append(db)
    p = check_damaged_start(c, ids, "read-only")
    if p is None:
        return
    jid, r = c.submit(["true"])
    c.rule("with a read-only jobs.db the daemon refuses to start, naming it (issue 9, 16)", False,
           "it started; a submission then gave exit %d, id %s, stderr %r" % (r.returncode, jid, r.stderr.strip()))


SCENARIOS = {
    "state-disk-full-submit": (state_disk_full_submit, {"state_on_tmpfs": True}),
    "state-disk-full-finish": (state_disk_full_finish, {"state_on_tmpfs": True}),
    "logs-disk-full": (logs_disk_full, {"logs_on_tmpfs": True}),
    "logs-no-inodes": (logs_no_inodes, {"logs_on_tmpfs": True, "tmpfs_options": "size=8m,nr_inodes=64"}),
    "locked-db-submit": (locked_db_submit, {}),
    "locked-db-finish": (locked_db_finish, {}),
    "db-garbage": (db_garbage, {}),
    "db-truncated": (db_truncated, {}),
    "db-zero-length": (db_zero_length, {}),
    "db-read-only": (db_read_only, {}),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("scenarios", nargs="*", help="default: all")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--build", default="build")
    ap.add_argument("--keep", action="store_true", help="keep each scenario's folder (daemon.log)")
    args = ap.parse_args()
    if args.list:
        for name, (fn, _) in SCENARIOS.items():
            print(name)
        return 0
    names = args.scenarios or list(SCENARIOS)
    for n in names:
        if n not in SCENARIOS:
            print("storage-faults: no scenario %r (--list)" % n, file=sys.stderr)
            return 2
    failed, passed, skipped = [], 0, []
    started = time.time()
    for n in names:
        fn, opts = SCENARIOS[n]
        t0 = time.time()
        c = None
        try:
            c = Case(n, args.build, **opts)
            fn(c)
        except Skip as e:
            print("SKIP %s: %s" % (n, e), flush=True)
            skipped.append(n)
        except Exception as e:
            print("FAIL %s: the scenario could not run: %s" % (n, e), flush=True)
            failed.append(n)
        finally:
            if c:
                c.cleanup(args.keep)
        if c and any(not ok for _, ok, _ in c.results):
            failed.append(n)
        elif c and n not in skipped and n not in failed:
            passed += 1
        print("   %s: %.1f s" % (n, time.time() - t0), flush=True)
    print("storage faults: %d scenarios passed, %d failed%s, %.0f s" % (
        passed, len(failed), ", %d skipped" % len(skipped) if skipped else "", time.time() - started))
    if failed:
        print("FAIL: " + " ".join(dict.fromkeys(failed)))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
