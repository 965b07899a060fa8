#!/usr/bin/env python3
"""The usual hand-written way to choose a GPU: pynvml, least used memory, print its index.

What bench/status_latency.sh compares `gpulane pick` with. Like gpulane it does not call
nvmlShutdown (about 15 ms). Its index is NVML's (nvidia-smi's) numbering, not PCI order.
"""
import pynvml

pynvml.nvmlInit()
best = None
for i in range(pynvml.nvmlDeviceGetCount()):
    used = pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(i)).used
    if best is None or used < best[0]:
        best = (used, i)
if best is None:
    raise SystemExit("no GPU")
print(best[1])
