#!/usr/bin/env python3
"""Check gpulane.lease() with real PyTorch on a real GPU machine (not run in CI).

    python3 python/tests/gpu_check.py          # gpulane on PATH, or GPULANE_BIN=build/gpulane

Needs torch with CUDA, the gpulane binary and at least one free GPU. Prints one PASS or FAIL line
per check and exits 1 if any failed. Checks, each in a fresh interpreter (CUDA starts once a process):
  1. import torch (no CUDA call) then lease(): torch sees exactly the leased GPU, and
     torch.cuda.get_device_properties(0).uuid is the leased UUID (torch prints it without "GPU-").
  2. lease(n=2) when two GPUs are free: both, in order.
  3. torch.cuda.is_available() before lease() (CUDA initialised): CudaAlreadyInitializedError.
  4. torch.cuda.is_available() alone (cuInit, torch.cuda.is_initialized() still False) before
     lease(): CudaAlreadyInitializedError.
  5. worker_pool(2): each worker's cuda:0 is its own leased GPU (when two GPUs are free).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(HERE.parent), os.environ.get("PYTHONPATH")])))

CHECKS = {
    "one GPU: torch sees the leased GPU's UUID": r"""
import torch, gpulane
with gpulane.lease(n=1) as gpus:
    assert torch.cuda.device_count() == 1, f"torch sees {torch.cuda.device_count()} GPUs"
    seen = str(torch.cuda.get_device_properties(0).uuid)
    leased = gpus[0].uuid
    want = leased[len("GPU-"):] if leased.startswith("GPU-") else leased
    assert seen == want, f"torch's cuda:0 is {seen}, the lease is {leased}"
    torch.ones(1, device="cuda")  # a context on it
    print(f"GPU {gpus[0].index} {leased}")
""",
    "two GPUs: torch sees both leased GPUs in order": r"""
import torch, gpulane
if len(gpulane.status()) < 2:
    print("SKIP: this machine has fewer than two GPUs"); raise SystemExit(0)
with gpulane.lease(n=2, no_wait=True) as gpus:
    assert torch.cuda.device_count() == 2, f"torch sees {torch.cuda.device_count()} GPUs"
    for i, g in enumerate(gpus):
        seen = str(torch.cuda.get_device_properties(i).uuid)
        assert "GPU-" + seen == g.uuid, f"cuda:{i} is GPU-{seen}, the lease's is {g.uuid}"
    print(" ".join(gpus.uuids))
""",
    "CUDA initialised before lease(): CudaAlreadyInitializedError": r"""
import torch, gpulane
torch.cuda.is_available()  # initialises the driver (torch.cuda.is_initialized() stays False)
torch.zeros(1, device="cuda")
try:
    with gpulane.lease(n=1):
        raise SystemExit("lease() did not refuse")
except gpulane.CudaAlreadyInitializedError as e:
    print(str(e)[:100])
""",
    "torch.cuda.is_available() alone before lease(): refused (the driver is initialised)": r"""
import torch, gpulane
assert torch.cuda.is_available() and not torch.cuda.is_initialized()
try:
    with gpulane.lease(n=1):
        raise SystemExit("lease() did not refuse")
except gpulane.CudaAlreadyInitializedError as e:
    print(str(e)[:100])
""",
    "worker_pool(2): each worker's cuda:0 is its leased GPU": r"""
import gpulane
def whoami(_):
    import os, torch, gpulane, time
    g = gpulane.worker_gpus()
    seen = "GPU-" + str(torch.cuda.get_device_properties(0).uuid)
    return os.getpid(), torch.cuda.device_count(), seen, g.uuids[0]
if __name__ == "__main__":
    if len(gpulane.status()) < 2:
        print("SKIP: this machine has fewer than two GPUs"); raise SystemExit(0)
    with gpulane.worker_pool(processes=2) as pool:
        rows = pool.map(whoami, range(8), chunksize=1)
    for pid, count, seen, leased in rows:
        assert count == 1 and seen == leased, (pid, count, seen, leased)
    print(sorted({r[3] for r in rows}))
""",
}


def main() -> int:
    failed = 0
    for name, code in CHECKS.items():
        script = HERE / ".gpu_check_tmp.py"
        script.write_text(code)
        try:
            proc = subprocess.run([sys.executable, str(script)], env=ENV, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, timeout=900)
        finally:
            script.unlink()
        detail = (proc.stdout.strip().splitlines() or [""])[-1]
        if proc.returncode == 0:
            print(f"{'SKIP' if detail.startswith('SKIP') else 'PASS'}: {name}: {detail}")
        else:
            failed += 1
            err = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
            print(f"FAIL: {name}: exit {proc.returncode}: {err}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
