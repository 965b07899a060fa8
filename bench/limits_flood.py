#!/usr/bin/env python3
"""Issue 10, item 4: a flood of submissions by one user is refused once over limits.max_queued, and
never slows other users. Needs root (a system-mode daemon and two users, as DaemonLimits' tests:
gpulane-test-a and gpulane-test-b, created with useradd when missing) and setpriv.

  sudo bench/limits_flood.py [--gpulane build/gpulane] [--clients 4] [--seconds 10] [-n 30] [--max-queued 50]

Starts its own system-mode `gpulane daemon` (fake NVML: the recorded 2 x H200 fixture) with
`[limits] max_queued = --max-queued` in a fresh folder, then:
  baseline  user b runs `gpulane submit --hold -- true` n times, one after another (a fresh
            process each, as a user feels it): fork-to-exit time of each;
  flood     user a's --clients processes submit held jobs over the socket as fast as the daemon
            answers, for --seconds, while user b repeats the baseline's n submissions.
Prints a markdown table on stdout: user a's submissions accepted and refused (with the refusal's
text), user b's median and p90 in both phases and the ratio flood/baseline. Progress on stderr.
"""
import argparse
import json
import multiprocessing as mp
import os
import pwd
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from queue_client import connect, frame, read_reply, submit_spec  # noqa: E402

USERS = ("gpulane-test-a", "gpulane-test-b")


def ensure_user(name):
    try:
        return pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "-M", "-N", "-r", "-s", "/usr/sbin/nologin", "-c", "gpulane tests", name], check=True)
        return pwd.getpwnam(name)


def as_user(user, argv):
    return ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups", "--"] + argv


def timed_submits(env, user, gpulane, n):
    """n sequential `gpulane submit --hold -- true` as `user`; fork-to-exit ms of each."""
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        r = subprocess.run(as_user(user, [gpulane, "submit", "--hold", "--", "true"]), env=env, capture_output=True, text=True)
        out.append((time.perf_counter() - t0) * 1000)
        if r.returncode != 0:
            sys.exit(f"limits_flood: user {user.pw_name}'s submit failed (exit {r.returncode}): {r.stderr.strip()}")
    return out


def flood_client(path, request, uid, gid, deadline, results):
    os.setgid(gid)
    os.setuid(uid)
    accepted, refused, first_error = 0, 0, ""
    s = connect(path)
    s.settimeout(60)
    while time.time() < deadline:
        s.sendall(request)
        reply = read_reply(s)
        if reply.get("ok"):
            accepted += 1
        else:
            refused += 1
            first_error = first_error or reply.get("error", "?")
    s.close()
    results.put({"accepted": accepted, "refused": refused, "error": first_error})


def p90(xs):
    xs = sorted(xs)
    return xs[max(0, int(0.9 * len(xs) + 0.999999) - 1)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpulane", default=os.path.join(ROOT, "build", "gpulane"))
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("-n", type=int, default=30)
    ap.add_argument("--max-queued", type=int, default=50)
    a = ap.parse_args()
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        sys.exit("limits_flood: needs root and setpriv (util-linux): run it with sudo")
    gpulane = os.path.abspath(a.gpulane)
    alice, bob = (ensure_user(u) for u in USERS)
    work = tempfile.mkdtemp(prefix="gpulane-flood.")
    os.chmod(work, 0o755)
    daemon = None
    try:
        state = os.path.join(work, "nvml.json")
        shutil.copy(os.path.join(ROOT, "tests/fixtures/h200x2-2026-11-30/nvml_snapshot.json"), state)
        os.chmod(state, 0o644)
        config = os.path.join(work, "config.toml")
        with open(config, "w") as f:
            f.write(f"[limits]\nmax_queued = {a.max_queued}\n[limits.users.{bob.pw_name}]\nmax_queued = 100000\n"
                    "[telemetry]\nenabled = false\n[web]\nlisten = \"off\"\n")
        os.chmod(config, 0o644)
        sock = os.path.join(work, "gpulane.sock")
        env = dict(os.environ, GPULANE_SOCKET=sock, GPULANE_STATE_DIR=os.path.join(work, "state"), GPULANE_CONFIG=config,
                   GPULANE_SYSTEM_DAEMON="1", FAKE_NVML_STATE=state,
                   GPULANE_NVML_LIBRARY=os.path.join(ROOT, "build/fake_nvml/current/libnvidia-ml.so.1"))
        daemon = subprocess.Popen([gpulane, "daemon"], env=env, stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "daemon.log"), "w"))
        deadline = time.time() + 30
        while not os.path.exists(sock):
            if time.time() > deadline or daemon.poll() is not None:
                sys.exit("limits_flood: the daemon did not start; see " + os.path.join(work, "daemon.log"))
            time.sleep(0.05)
        os.chdir(work)
        users_env = {k: v for k, v in env.items() if k != "GPULANE_CONFIG"}  # users read no config: the daemon enforces
        print("baseline: user b alone", file=sys.stderr)
        timed_submits(users_env, bob, gpulane, 3)  # warm-up
        baseline = timed_submits(users_env, bob, gpulane, a.n)
        print(f"flood: {a.clients} clients of user a for {a.seconds} s, user b submitting meanwhile", file=sys.stderr)
        request = frame({"v": 2, "op": "submit", "spec": submit_spec(work), "hold": True})
        ctx = mp.get_context("fork")
        results = ctx.Queue()
        end = time.time() + a.seconds
        procs = [ctx.Process(target=flood_client, args=(sock, request, alice.pw_uid, alice.pw_gid, end, results))
                 for _ in range(a.clients)]
        for p in procs:
            p.start()
        during = timed_submits(users_env, bob, gpulane, a.n)
        if time.time() > end:
            sys.exit("limits_flood: user b's submissions outlasted the flood; give a longer --seconds or a smaller -n")
        got = [results.get(timeout=a.seconds + 120) for _ in procs]
        for p in procs:
            p.join()
        accepted = sum(g["accepted"] for g in got)
        refused = sum(g["refused"] for g in got)
        error = next((g["error"] for g in got if g["error"]), "")
        cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"], capture_output=True, text=True)
        print(f"# A flood of one user's submissions against limits.max_queued ({time.strftime('%Y-%m-%d')})\n")
        print(f"Command: `{' '.join(['bench/limits_flood.py'] + sys.argv[1:])}`; {socket.gethostname()}, {os.cpu_count()} cores "
              f"({cpu.stdout.strip()}); load average at the end {' '.join(f'{x:.2f}' for x in os.getloadavg())}; system-mode daemon, "
              f"fake NVML; `[limits] max_queued = {a.max_queued}` for user a.\n")
        print(f"User a: {a.clients} socket clients, {a.seconds:g} s: {accepted} submissions accepted, {refused} refused "
              f"({refused / a.seconds:.0f}/s), e.g. \"{error}\".\n")
        print("| user b: `gpulane submit --hold -- true`, fork to exit | n | median ms | p90 ms | ratio to baseline (median) |")
        print("|---|---:|---:|---:|---:|")
        mb = statistics.median(baseline)
        print(f"| baseline: alone | {len(baseline)} | {mb:.2f} | {p90(baseline):.2f} | 1.00 |")
        md = statistics.median(during)
        print(f"| during user a's flood | {len(during)} | {md:.2f} | {p90(during):.2f} | {md / mb:.2f} |")
        return 0 if accepted == a.max_queued and refused > 0 else 1
    finally:
        if daemon:
            daemon.terminate()
            daemon.wait(30)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
