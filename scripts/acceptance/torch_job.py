#!/usr/bin/env python3
"""A small PyTorch job for the `gpulane run` acceptance sections (scripts/acceptance.d/run.sh).

  torch_job.py [GIB] [--seconds S] [--log FILE]

Prints what it was given and what it sees: CUDA_VISIBLE_DEVICES, torch.cuda.device_count(), the
UUID of its device 0 (as nvidia-smi writes it, "GPU-xxxxxxxx-..."), GPULANE_JOB_ID,
GPULANE_GPU_UUIDS and GPULANE_MEM_BYTES. Then it allocates GIB GiB on that GPU (default 1; the
memory is written, so the driver really backs it), runs bf16 matmuls for S seconds (default
$TORCH_JOB_SECONDS or 3) and exits 0.

Appends two JSON lines to the shared log (--log, else $TORCH_JOB_LOG; O_APPEND, one write() each,
so concurrent jobs never interleave inside a line):
  {"event": "start", "t": <wall clock when this process started>, "job": GPULANE_JOB_ID, "pid", "uuid",
   "cvd", "device_count", "gpulane_uuids", "mem_bytes", "gib", "torch"}   -- once it knows its device
  {"event": "end", "t": <wall clock just before exit>, "job", "pid", "uuid", "matmuls", "tflops"}
The interval [start.t, end.t] covers everything the process did on the GPU.
"""
import argparse
import json
import os
import sys
import time

T_START = time.time()


def log_line(path, record):
    if not path:
        return
    data = (json.dumps(record, sort_keys=True) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def uuid_of(props):
    """torch's device UUID as nvidia-smi prints it: GPU-8-4-4-4-12 hex."""
    u = getattr(props, "uuid", None)
    if u is None:
        return None
    raw = getattr(u, "bytes", None)
    if raw is not None:  # torch >= 2.0: a _CUuuid with .bytes (a list of ints) and __str__ (8-4-4-4-12)
        h = bytes(raw).hex()
        s = f"{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"
    else:
        s = str(u)
    return s if s.startswith("GPU-") else "GPU-" + s


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("gib", nargs="?", type=float, default=1.0, help="GiB to allocate on the GPU (default 1)")
    ap.add_argument("--seconds", type=float, default=float(os.environ.get("TORCH_JOB_SECONDS", "3")))
    ap.add_argument("--log", default=os.environ.get("TORCH_JOB_LOG", ""))
    args = ap.parse_args()

    job = os.environ.get("GPULANE_JOB_ID", "")
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
    print(f"[{job} pid {os.getpid()}] CUDA_VISIBLE_DEVICES={cvd} CUDA_DEVICE_ORDER={os.environ.get('CUDA_DEVICE_ORDER')} "
          f"GPULANE_GPU_UUIDS={os.environ.get('GPULANE_GPU_UUIDS')} GPULANE_MEM_BYTES={os.environ.get('GPULANE_MEM_BYTES')}",
          flush=True)

    import torch

    count = torch.cuda.device_count()
    props = torch.cuda.get_device_properties(0) if count > 0 else None
    uuid = uuid_of(props) if props is not None else None
    print(f"[{job}] torch {getattr(torch, '__version__', '?')}: device_count={count} device0={getattr(props, 'name', None)} "
          f"uuid={uuid}", flush=True)
    log_line(args.log, {"event": "start", "t": T_START, "job": job, "pid": os.getpid(), "uuid": uuid, "cvd": cvd,
                        "device_count": count, "gpulane_uuids": os.environ.get("GPULANE_GPU_UUIDS"),
                        "mem_bytes": os.environ.get("GPULANE_MEM_BYTES"), "gib": args.gib,
                        "torch": getattr(torch, "__version__", "?")})
    if count < 1:
        print(f"[{job}] no CUDA device visible", file=sys.stderr)
        log_line(args.log, {"event": "end", "t": time.time(), "job": job, "pid": os.getpid(), "uuid": None,
                            "matmuls": 0, "tflops": 0, "error": "no device"})
        return 1

    dev = torch.device("cuda", 0)
    block = torch.empty(int(args.gib * (1 << 30)), dtype=torch.uint8, device=dev)
    block.fill_(1)
    n = 4096
    a = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    torch.cuda.synchronize()
    print(f"[{job}] holding {args.gib:g} GiB; matmuls for {args.seconds:g} s", flush=True)
    done = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < args.seconds:
        for _ in range(50):
            c = a @ b
        torch.cuda.synchronize()
        done += 50
    elapsed = time.perf_counter() - t0
    tflops = 2 * n ** 3 * done / elapsed / 1e12 if elapsed > 0 else 0.0
    del c, block
    print(f"[{job}] {done} matmuls {n}x{n} bf16 in {elapsed:.1f} s: {tflops:.0f} TFLOP/s", flush=True)
    log_line(args.log, {"event": "end", "t": time.time(), "job": job, "pid": os.getpid(), "uuid": uuid,
                        "matmuls": done, "tflops": round(tflops, 1)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
