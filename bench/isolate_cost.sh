#!/usr/bin/env bash
# What device isolation ([run] isolate = "devices", docs/security.md "Device isolation") adds to
# the start of a job: `gpulane run -- true` with isolation and with `isolate = "off"`, as fresh
# processes, interleaved round by round so that drift hits both alike; medians, p90 and the
# difference of the medians in milliseconds, as a Markdown table on stdout.
#
#   bench/isolate_cost.sh [-n ROUNDS] [--fake]        (as root: isolation needs it)
#
# Rows: `run -g 0 -- true` (no NVML: the smallest start, so the cost shows most) and
# `run -g 1 -- true` (NVML read by the command itself, GPULANE_DIRECT_NVML=1); columns: isolation
# off, on, and on without the namespace holder (GPULANE_ISOLATE_HOLDER=0: the job's exit frees its
# namespace, as before the holder). Then the split of the isolated start into its steps
# (GPULANE_ISOLATE_TIMING=1: one line of per-step microseconds on stderr, and the holder's line
# timing the namespace's teardown after the job). --fake (implied
# without nvidia-smi): the fake NVML of build/fake_nvml and the recorded 2 x H200, with a device
# tree of its own (GPULANE_DEV_ROOT, GPULANE_PROC_DRIVER_ROOT) shaped like the real one: a dry
# run, not GPU numbers. Leases go to a fresh directory on /dev/shm. gpulane: .carry/bin first on
# PATH (the device machine), else build/.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export PATH=$ROOT/.carry/bin:$ROOT/build:$PATH
[ -d "$ROOT/.carry/lib" ] && export LD_LIBRARY_PATH=$ROOT/.carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
rounds=100
fake=0
while (($#)); do
  case "$1" in
    -n) rounds=$2; shift 2 ;;
    --fake) fake=1; shift ;;
    *) echo "usage: bench/isolate_cost.sh [-n ROUNDS] [--fake]" >&2; exit 2 ;;
  esac
done
command -v nvidia-smi >/dev/null 2>&1 || fake=1
if [ "$(id -u)" -ne 0 ]; then
  echo "bench/isolate_cost.sh: isolation needs root (jobs of other users are advice-only); run it as root" >&2
  exit 2
fi
work=$(mktemp -d /dev/shm/gpulane-isolate-cost.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -m 1777 "$work/leases"
export GPULANE_LEASE_DIR=$work/leases GPULANE_DIRECT_NVML=1
printf '[run]\nisolate = "devices"\n' >"$work/on.toml"
printf '[run]\nisolate = "off"\n' >"$work/off.toml"
if [ "$fake" -eq 1 ]; then
  export GPULANE_NVML_LIBRARY=$ROOT/build/fake_nvml/current/libnvidia-ml.so.1
  export FAKE_NVML_STATE=$work/state.json
  python3 - "$ROOT/tests/fixtures/h200x2-2026-11-30/nvml_snapshot.json" "$FAKE_NVML_STATE" "$work" <<'PY'
import json, os, sys
d = json.load(open(sys.argv[1]))
root = sys.argv[3]
os.makedirs(f"{root}/dev/nvidia-caps"); os.makedirs(f"{root}/proc/nvidia/gpus")
for name in ["nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset"]:
    open(f"{root}/dev/{name}", "w").write(name)
for dev in d["devices"]:
    dev["processes"] = []
    open(f"{root}/dev/nvidia{dev['minor']}", "w").write("gpu")
    bus = dev["pci_bus_id"][4:].lower()
    os.makedirs(f"{root}/proc/nvidia/gpus/{bus}")
    open(f"{root}/proc/nvidia/gpus/{bus}/information", "w").write(f"Device Minor: {dev['minor']}\n")
for name, text in [("params", "ModifyDeviceFiles: 1\n"), ("version", "NVRM version: fake\n"), ("registry", "")]:
    open(f"{root}/proc/nvidia/{name}", "w").write(text)
json.dump(d, open(sys.argv[2], "w"))
PY
  export GPULANE_DEV_ROOT=$work/dev GPULANE_PROC_DRIVER_ROOT=$work/proc
fi
python3 - "$rounds" "$work" "$fake" <<'PY'
import os, re, statistics, subprocess, sys, time
rounds, work, fake = int(sys.argv[1]), sys.argv[2], sys.argv[3] == "1"
# "holder0": isolation without the namespace holder (GPULANE_ISOLATE_HOLDER=0): the job's exit frees
# its namespace and the spawner waits for the kernel's RCU grace period there, as before the holder.
modes = ("off", "on", "holder0")
def once(g, mode, timing=False):
    env = dict(os.environ, GPULANE_CONFIG=f"{work}/{'off' if mode == 'off' else 'on'}.toml")
    if mode == "holder0": env["GPULANE_ISOLATE_HOLDER"] = "0"
    if timing: env["GPULANE_ISOLATE_TIMING"] = "1"
    a = time.perf_counter()
    r = subprocess.run(["gpulane", "run", "-g", str(g), "--", "true"], env=env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE)
    ms = (time.perf_counter() - a) * 1000
    err = r.stderr.decode()
    if r.returncode != 0 or (err and not timing):
        sys.exit(f"gpulane run -g {g} -- true ({mode}) failed: exit {r.returncode}: {err.strip()}")
    return err if timing else ms
samples = {(g, mode): [] for g in (0, 1) for mode in modes}
for _ in range(3):
    for g in (0, 1):
        for mode in modes: once(g, mode)  # warm-up
for _ in range(rounds):
    for g in (0, 1):
        for mode in modes: samples[(g, mode)].append(once(g, mode))
def p90(xs): return sorted(xs)[max(0, -(-len(xs) * 9 // 10) - 1)]
def cell(xs): return f"{statistics.median(xs):.2f} ({p90(xs):.2f})"
print(f"**{'a dry run on the fake NVML, not GPU numbers' if fake else 'real GPUs'}**; {rounds} interleaved rounds, "
      f"kernel {os.uname().release}, {os.cpu_count()} CPUs, {len(open('/proc/self/mountinfo').readlines())} mounts, "
      f"load average {os.getloadavg()[0]:.1f}\n")
print("| command | isolate = \"off\" median (p90) ms | isolate = \"devices\" median (p90) ms | added (median) ms "
      "| devices without the holder, median (p90) ms | added without the holder (median) ms |")
print("|---|---|---|---|---|---|")
for g in (0, 1):
    off, on, old = (samples[(g, m)] for m in modes)
    print(f"| `gpulane run -g {g} -- true` | {cell(off)} | {cell(on)} | {statistics.median(on) - statistics.median(off):+.2f} "
          f"| {cell(old)} | {statistics.median(old) - statistics.median(off):+.2f} |")
# The split: GPULANE_ISOLATE_TIMING=1's lines (exec/job_runner.cc), medians of each step over the runs.
steps = {}
for _ in range(min(rounds, 30)):
    for g in (0, 1):
        err = once(g, "on", timing=True)
        for name, pattern in (("plan (spawner)", r"plan (\d+) us"), ("unshare(CLONE_NEWNS)", r"unshare (\d+) us"),
                              ("/ made a slave (MS_REC, MS_SLAVE)", r"/ rslave (\d+) us"), ("device masks", r"device mask\(s\) (\d+) us"),
                              ("/proc/driver/nvidia (tmpfs, binds back, read-only)", r"/proc/driver/nvidia \(.*?\) (\d+) us"),
                              ("holder started", r"holder (\d+) us"), ("in the child, in all", r"(\d+) us in all"),
                              ("namespace freed after the job (in the holder, off the path)", r"namespace freed in (\d+) us")):
            m = re.search(pattern, err)
            if m: steps.setdefault((g, name), []).append(int(m.group(1)))
        shape = re.search(r"(\d+) device mask\(s\) \d+ us, /proc/driver/nvidia \((.*?)\) \d+ us", err)
        if shape: steps[(g, "shape")] = [f"{shape.group(1)} device masks, /proc/driver/nvidia: {shape.group(2)}"]
print("\nThe split (`GPULANE_ISOLATE_TIMING=1 gpulane run -g G -- true`, median microseconds of "
      f"{min(rounds, 30)} runs each):\n")
names = [n for (g, n) in steps if g == 0 and n != "shape"]
print("| step | -g 0 us | -g 1 us |")
print("|---|---|---|")
for n in names:
    vals = [statistics.median(steps[(g, n)]) if (g, n) in steps else float("nan") for g in (0, 1)]
    print(f"| {n} | {vals[0]:.0f} | {vals[1]:.0f} |")
for g in (0, 1):
    if (g, "shape") in steps: print(f"\n-g {g}: {steps[(g, 'shape')][0]}")
PY
