#!/usr/bin/env bash
# What device isolation ([run] isolate = "devices", docs/security.md "Device isolation") adds to
# the start of a job: `gpulane run -- true` with isolation and with `isolate = "off"`, as fresh
# processes, interleaved round by round so that drift hits both alike; medians, p90 and the
# difference of the medians in milliseconds, as a Markdown table on stdout.
#
#   bench/isolate_cost.sh [-n ROUNDS] [--fake]        (as root: isolation needs it)
#
# Rows: `run -g 0 -- true` (no NVML: the smallest start, so the cost shows most) and
# `run -g 1 -- true` (NVML read by the command itself, GPULANE_DIRECT_NVML=1). --fake (implied
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
import os, statistics, subprocess, sys, time
rounds, work, fake = int(sys.argv[1]), sys.argv[2], sys.argv[3] == "1"
rows = [(f"run -g {g} -- true", g, mode) for g in (0, 1) for mode in ("off", "on")]
def once(g, mode):
    env = dict(os.environ, GPULANE_CONFIG=f"{work}/{mode}.toml")
    a = time.perf_counter()
    r = subprocess.run(["gpulane", "run", "-g", str(g), "--", "true"], env=env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE)
    ms = (time.perf_counter() - a) * 1000
    if r.returncode != 0 or r.stderr:
        sys.exit(f"gpulane run -g {g} -- true ({mode}) failed: exit {r.returncode}: {r.stderr.decode().strip()}")
    return ms
samples = {(g, mode): [] for _, g, mode in rows}
for _ in range(3):
    for _, g, mode in rows: once(g, mode)  # warm-up
for _ in range(rounds):
    for _, g, mode in rows: samples[(g, mode)].append(once(g, mode))
def p90(xs): return sorted(xs)[max(0, -(-len(xs) * 9 // 10) - 1)]
print(f"**{'a dry run on the fake NVML, not GPU numbers' if fake else 'real GPUs'}**; {rounds} interleaved rounds, "
      f"kernel {os.uname().release}, {os.cpu_count()} CPUs, {len(open('/proc/self/mountinfo').readlines())} mounts\n")
print("| command | isolate = \"off\" median (p90) ms | isolate = \"devices\" median (p90) ms | added (median) ms |")
print("|---|---|---|---|")
for g in (0, 1):
    off, on = samples[(g, "off")], samples[(g, "on")]
    print(f"| `gpulane run -g {g} -- true` | {statistics.median(off):.2f} ({p90(off):.2f}) | "
          f"{statistics.median(on):.2f} ({p90(on):.2f}) | {statistics.median(on) - statistics.median(off):+.2f} |")
PY
