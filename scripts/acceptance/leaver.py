#!/usr/bin/env python3
"""A job that leaves a GPU process behind, for the `gpulane run` clean-up check.

  leaver.py --pid-file FILE [--smi-before FILE] [--gib 1]

Starts a child python in a new session (start_new_session=True) that ignores SIGTERM, allocates
GIB GiB on its GPU and sleeps for 10 minutes. Once the child holds the memory, the parent writes
"<parent pid> <child pid>" to --pid-file, records what `nvidia-smi --query-compute-apps=pid
--format=csv,noheader` lists at that moment to --smi-before (polling up to 10 s until the child is
listed; so the check after clean-up is not vacuous), and exits 0 at once, leaving the child to
gpulane's clean-up (SIGTERM, ignored; SIGKILL after --kill-grace).
"""
import argparse
import os
import select
import subprocess
import sys
import time

CHILD = r"""
import os, signal, sys, time
import torch
signal.signal(signal.SIGTERM, signal.SIG_IGN)  # after importing torch: nothing may re-install a handler
x = torch.empty(int(float(sys.argv[1]) * (1 << 30)), dtype=torch.uint8, device="cuda")
x.fill_(1)
torch.cuda.synchronize()
os.write(int(sys.argv[2]), b"ready\n")
print("[leaver child pid %d] holding %s GiB, ignoring SIGTERM" % (os.getpid(), sys.argv[1]), flush=True)
time.sleep(600)
"""


def smi_pids():
    try:
        out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"(nvidia-smi failed: {e})\n", set()
    pids = {int(w) for w in out.replace(",", " ").split() if w.isdigit()}
    return out, pids


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pid-file", required=True)
    ap.add_argument("--smi-before", default="")
    ap.add_argument("--gib", default="1")
    args = ap.parse_args()

    r, w = os.pipe()
    child = subprocess.Popen([sys.executable, "-c", CHILD, args.gib, str(w)], pass_fds=(w,), start_new_session=True)
    os.close(w)
    ready, _, _ = select.select([r], [], [], 180)
    line = os.read(r, 64) if ready else b""
    if not line.startswith(b"ready"):
        print(f"[leaver] the child (pid {child.pid}) did not get ready: {'exited ' + str(child.poll()) if child.poll() is not None else 'timeout'}",
              file=sys.stderr)
        with open(args.pid_file, "w") as f:
            f.write(f"{os.getpid()} {child.pid}\n")
        return 1
    with open(args.pid_file, "w") as f:
        f.write(f"{os.getpid()} {child.pid}\n")
    if args.smi_before:
        deadline = time.time() + 10
        while True:
            out, pids = smi_pids()
            if child.pid in pids or time.time() > deadline:
                break
            time.sleep(0.3)
        with open(args.smi_before, "w") as f:
            f.write(out)
    print(f"[leaver pid {os.getpid()}] exiting now, leaving child {child.pid} behind", flush=True)
    os._exit(0)  # no clean-up of the child, on purpose


if __name__ == "__main__":
    sys.exit(main())
