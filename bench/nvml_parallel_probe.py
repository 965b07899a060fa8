#!/usr/bin/env python3
"""Do NVML's first-call costs overlap when the calls run in parallel threads? A fresh process per
variant: nvmlInit_v2, device handle, then utilisation + power + temperature + memory + processes,
either one after another or each in its own thread. Prints wall milliseconds of that part.

  python3 bench/nvml_parallel_probe.py
"""
import subprocess
import sys

CODE = """
import ctypes, threading, time
lib = ctypes.CDLL("libnvidia-ml.so.1"); lib.nvmlInit_v2()
d = ctypes.c_void_p()
a0 = time.perf_counter()
lib.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(d))
a = time.perf_counter()
def util(): lib.nvmlDeviceGetUtilizationRates(d, (ctypes.c_uint * 2)())
def power(): lib.nvmlDeviceGetPowerUsage(d, ctypes.byref(ctypes.c_uint()))
def temp(): lib.nvmlDeviceGetTemperature(d, 0, ctypes.byref(ctypes.c_uint()))
def mem():
    m = (ctypes.c_ubyte * 40)(); ctypes.c_uint.from_buffer(m).value = 40 | (2 << 24); lib.nvmlDeviceGetMemoryInfo_v2(d, m)
def procs():
    n = ctypes.c_uint(64); lib.nvmlDeviceGetComputeRunningProcesses_v3(d, ctypes.byref(n), (ctypes.c_ubyte * 1536)())
fns = [util, power, temp, mem, procs]
if {parallel}:
    ts = [threading.Thread(target=f) for f in fns]
    [t.start() for t in ts]; [t.join() for t in ts]
else:
    [f() for f in fns]
b = time.perf_counter()
print(f"{{(a - a0) * 1e3:.2f}} {{(b - a) * 1e3:.2f}}")
"""
for parallel in (False, True, False, True):
    out = subprocess.run([sys.executable, "-c", CODE.format(parallel=parallel)], capture_output=True, text=True).stdout.split()
    print(f"{'parallel' if parallel else 'sequential':10s}: handle {out[0]} ms, five queries {out[1]} ms")
