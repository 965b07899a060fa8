#!/usr/bin/env python3
"""An NCCL all-reduce across every GPU the job was given (issue 5's check for multi-GPU jobs):
one process per visible GPU, each contributes rank + 1; prints the GPUs' UUIDs and whether the sum
is right. Run it under `gpulane run -g N`. NVLink multicast stays off (the machine's rules)."""
import os

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
os.environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(rank, world):
    dist.init_process_group("nccl", init_method="tcp://127.0.0.1:29512", rank=rank, world_size=world)
    torch.cuda.set_device(rank)
    x = torch.full((1 << 20,), float(rank + 1), device="cuda")
    dist.all_reduce(x)
    want = world * (world + 1) / 2
    ok = bool(torch.all(x == want).item())
    print(f"rank {rank} on {torch.cuda.get_device_properties(rank).uuid}: sum {x[0].item():g} (want {want:g}) "
          f"{'OK' if ok else 'WRONG'}", flush=True)
    dist.destroy_process_group()
    if not ok:
        raise SystemExit(1)


if __name__ == "__main__":
    n = torch.cuda.device_count()
    print(f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')} devices={n}", flush=True)
    mp.spawn(worker, args=(n,), nprocs=n, join=True)
