#!/usr/bin/env python3
"""A job for scripts/acceptance.d/memguard.sh: holds HOLD GiB on its GPU, grows to GROW GiB after
AFTER s (printing "grown to GROW GiB at <wall time>"), then runs SECONDS more and prints "done".

Real GPU: PyTorch tensors on cuda:0; a growth PyTorch refuses (the --courtesy case, where
gpulane.auto has set torch's memory fraction to the job's --mem) prints "PyTorch refused the
growth" and exits 3. With --fake STATE (a dry run): it reports its memory in the fake NVML's state
instead (its own pid on the job's GPU, under a lock, replaced atomically), and takes it off again
at its end or at SIGTERM, as the driver does when a process exits.
"""

import argparse
import fcntl
import json
import os
import signal
import sys
import time

p = argparse.ArgumentParser()
p.add_argument("--hold", type=int, required=True)
p.add_argument("--grow", type=int, default=0)
p.add_argument("--after", type=float, default=3)
p.add_argument("--seconds", type=float, default=20)
p.add_argument("--fake", default="")
p.add_argument("--courtesy", action="store_true", help="import gpulane.auto first (torch keeps to --mem)")
a = p.parse_args()


def fake_put(gib: int) -> None:
    index = int((os.environ.get("GPULANE_GPU_INDICES") or "0").split(",")[0])
    with open(a.fake + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        state = json.load(open(a.fake))
        dev = state["devices"][index]
        procs = [q for q in dev.get("processes", []) if q["pid"] != os.getpid()]
        if gib:
            procs.append({"pid": os.getpid(), "used_memory": gib << 30})
        dev["processes"] = procs
        tmp = f"{a.fake}.{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump(state, f)
        os.rename(tmp, a.fake)


if a.fake:
    def leave(*_):
        fake_put(0)
        sys.exit(143)
    signal.signal(signal.SIGTERM, leave)
    hold = lambda gib, have: fake_put(gib)  # noqa: E731
    blocks = None
else:
    if a.courtesy:
        import gpulane.auto  # noqa: F401  (inside a --mem job: torch keeps to the declaration)
    import torch

    blocks = []

    def hold(gib, have):
        for _ in range(gib - have):
            blocks.append(torch.empty(1 << 30, dtype=torch.uint8, device="cuda"))
        torch.cuda.synchronize()

hold(a.hold, 0)
print(f"holding {a.hold} GiB", flush=True)
if a.grow > a.hold:
    time.sleep(a.after)
    try:
        hold(a.grow, a.hold)
    except Exception as e:  # torch.cuda.OutOfMemoryError
        print("PyTorch refused the growth: " + str(e).splitlines()[0], flush=True)
        sys.exit(3)
    print(f"grown to {a.grow} GiB at {time.time():.3f}", flush=True)
time.sleep(a.seconds)
if a.fake:
    fake_put(0)
print("done", flush=True)
