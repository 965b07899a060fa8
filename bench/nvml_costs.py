#!/usr/bin/env python3
"""Times the NVML calls gpulane makes, one by one, through ctypes (no pynvml needed):
dlopen, nvmlInit_v2, every per-GPU query of `gpulane status`, and nvmlShutdown. Prints a table of
median microseconds over N repeats (init/shutdown once each: they are one-shot costs).

  python3 bench/nvml_costs.py [N]
"""
import ctypes
import statistics
import sys
import time

N = int(sys.argv[1]) if len(sys.argv) > 1 else 200
t0 = time.perf_counter()
lib = ctypes.CDLL("libnvidia-ml.so.1")
t1 = time.perf_counter()
rc = lib.nvmlInit_v2()
t2 = time.perf_counter()
rows = [("dlopen libnvidia-ml.so.1", (t1 - t0) * 1e6, 1), ("nvmlInit_v2 (rc=%d)" % rc, (t2 - t1) * 1e6, 1)]

count = ctypes.c_uint()
lib.nvmlDeviceGetCount_v2(ctypes.byref(count))
dev = ctypes.c_void_p()
lib.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(dev))
u = ctypes.c_uint()
i = ctypes.c_int()
buf = ctypes.create_string_buffer(96)
mem2 = (ctypes.c_ubyte * 40)()
ctypes.c_uint.from_buffer(mem2).value = 40 | (2 << 24)
util = (ctypes.c_uint * 2)()
pci = (ctypes.c_ubyte * 68)()
procs = (ctypes.c_ubyte * (24 * 64))()


def timed(name, fn):
    samples = []
    rc = None
    for _ in range(N):
        a = time.perf_counter()
        rc = fn()
        samples.append((time.perf_counter() - a) * 1e6)
    rows.append((f"{name} (rc={rc})", statistics.median(samples), N))


def procs_call():
    n = ctypes.c_uint(64)
    return lib.nvmlDeviceGetComputeRunningProcesses_v3(dev, ctypes.byref(n), procs)


def nvlink_all():
    rcs = set()
    for link in range(18):
        rcs.add(lib.nvmlDeviceGetNvLinkState(dev, link, ctypes.byref(i)))
    return sorted(rcs)


timed("nvmlDeviceGetHandleByIndex_v2", lambda: lib.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(dev)))
timed("nvmlDeviceGetUUID", lambda: lib.nvmlDeviceGetUUID(dev, buf, 96))
timed("nvmlDeviceGetName", lambda: lib.nvmlDeviceGetName(dev, buf, 96))
timed("nvmlDeviceGetMinorNumber", lambda: lib.nvmlDeviceGetMinorNumber(dev, ctypes.byref(u)))
timed("nvmlDeviceGetPciInfo_v3", lambda: lib.nvmlDeviceGetPciInfo_v3(dev, pci))
timed("nvmlDeviceGetMemoryInfo_v2", lambda: lib.nvmlDeviceGetMemoryInfo_v2(dev, mem2))
timed("nvmlDeviceGetUtilizationRates", lambda: lib.nvmlDeviceGetUtilizationRates(dev, util))
timed("nvmlDeviceGetTemperature", lambda: lib.nvmlDeviceGetTemperature(dev, 0, ctypes.byref(u)))
timed("nvmlDeviceGetPowerUsage", lambda: lib.nvmlDeviceGetPowerUsage(dev, ctypes.byref(u)))
timed("nvmlDeviceGetEnforcedPowerLimit", lambda: lib.nvmlDeviceGetEnforcedPowerLimit(dev, ctypes.byref(u)))
timed("nvmlDeviceGetPerformanceState", lambda: lib.nvmlDeviceGetPerformanceState(dev, ctypes.byref(i)))
timed("nvmlDeviceGetComputeMode", lambda: lib.nvmlDeviceGetComputeMode(dev, ctypes.byref(i)))
timed("nvmlDeviceGetPersistenceMode", lambda: lib.nvmlDeviceGetPersistenceMode(dev, ctypes.byref(i)))
timed("nvmlDeviceGetMigMode", lambda: lib.nvmlDeviceGetMigMode(dev, ctypes.byref(u), ctypes.byref(u)))
timed("nvmlDeviceGetComputeRunningProcesses_v3", procs_call)
timed("nvmlDeviceGetNvLinkState x 18 links", nvlink_all)
a = time.perf_counter()
rc = lib.nvmlShutdown()
rows.append(("nvmlShutdown (rc=%d)" % rc, (time.perf_counter() - a) * 1e6, 1))

print(f"## NVML call costs ({count.value} GPU(s); median of {N} calls, microseconds)\n")
print("| call | µs | calls |\n|---|---:|---:|")
for name, us, n in rows:
    print(f"| {name} | {us:.1f} | {n} |")
