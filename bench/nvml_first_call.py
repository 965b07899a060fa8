#!/usr/bin/env python3
"""Which NVML call pays the per-process attach cost? For each call gpulane makes, a fresh process
runs nvmlInit_v2 and then times that call alone, first thing after init (and a second time).

  python3 bench/nvml_first_call.py
"""
import subprocess
import sys

CALLS = {
    "HandleByIndex": "lib.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(d))",
    "UUID": "lib.nvmlDeviceGetUUID(d, buf, 96)",
    "PciInfo_v3": "lib.nvmlDeviceGetPciInfo_v3(d, pci)",
    "MemoryInfo_v2": "lib.nvmlDeviceGetMemoryInfo_v2(d, mem2)",
    "UtilizationRates": "lib.nvmlDeviceGetUtilizationRates(d, util)",
    "Temperature": "lib.nvmlDeviceGetTemperature(d, 0, ctypes.byref(u))",
    "PowerUsage": "lib.nvmlDeviceGetPowerUsage(d, ctypes.byref(u))",
    "PersistenceMode": "lib.nvmlDeviceGetPersistenceMode(d, ctypes.byref(i))",
    "MigMode": "lib.nvmlDeviceGetMigMode(d, ctypes.byref(u), ctypes.byref(u))",
    "ComputeRunningProcesses_v3": "lib.nvmlDeviceGetComputeRunningProcesses_v3(d, ctypes.byref(n), procs)",
    "NvLinkState": "lib.nvmlDeviceGetNvLinkState(d, 0, ctypes.byref(i))",
}
PROLOGUE = """
import ctypes, time
lib = ctypes.CDLL("libnvidia-ml.so.1"); lib.nvmlInit_v2()
d = ctypes.c_void_p(); u = ctypes.c_uint(); i = ctypes.c_int(); n = ctypes.c_uint(64)
buf = ctypes.create_string_buffer(96); pci = (ctypes.c_ubyte * 68)(); util = (ctypes.c_uint * 2)()
procs = (ctypes.c_ubyte * (24 * 64))(); mem2 = (ctypes.c_ubyte * 40)(); ctypes.c_uint.from_buffer(mem2).value = 40 | (2 << 24)
{handle}
a = time.perf_counter(); rc = {call}; b = time.perf_counter(); {call}; c = time.perf_counter()
print(f"{{(b - a) * 1e3:.3f}} {{(c - b) * 1e3:.3f}} {{rc}}")
"""
print("| call (first after init) | first ms | second ms | rc |\n|---|---:|---:|---:|")
for name, call in CALLS.items():
    handle = "" if name == "HandleByIndex" else "lib.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(d))"
    out = subprocess.run([sys.executable, "-c", PROLOGUE.format(handle=handle, call=call)], capture_output=True, text=True)
    first, second, rc = (out.stdout.split() + ["?", "?", "?"])[:3]
    print(f"| {name} | {first} | {second} | {rc} |")
