#!/usr/bin/env bash
# bench/isolation_plan_cost.sh: the isolation plan's time (GPULANE_ISOLATE_TIMING=1 "plan N us (spawner)") of two gpulane
# binaries, interleaved, on a fake device tree: the fake NVML's 2 nvidia nodes and the driver's
# shared ones, plus EXTRA other nodes (a /dev as large as a GPU host's). Usage (root: isolation needs it): bench/isolation_plan_cost.sh OLD NEW EXTRA RUNS
set -euo pipefail
old=$1 new=$2 extra=$3 runs=$4
ROOT=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /dev/shm/plan-cost.XXXXXX); trap 'rm -rf "$work"' EXIT
mkdir -m 1777 "$work/leases"; export GPULANE_LEASE_DIR=$work/leases GPULANE_DIRECT_NVML=1
printf '[run]\nisolate = "devices"\n' >"$work/on.toml"; export GPULANE_CONFIG=$work/on.toml
export GPULANE_NVML_LIBRARY=$ROOT/build/fake_nvml/current/libnvidia-ml.so.1 FAKE_NVML_STATE=$work/state.json
python3 - "$ROOT/tests/fixtures/h200x2-2026-11-30/nvml_snapshot.json" "$FAKE_NVML_STATE" "$work" "$extra" <<'PY'
import json, os, sys
d = json.load(open(sys.argv[1])); root = sys.argv[3]
os.makedirs(f"{root}/dev/nvidia-caps"); os.makedirs(f"{root}/proc/nvidia/gpus")
for name in ["nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset"] + [f"node{i}" for i in range(int(sys.argv[4]))]:
    open(f"{root}/dev/{name}", "w").write(name)
for dev in d["devices"]:
    dev["processes"] = []
    open(f"{root}/dev/nvidia{dev['minor']}", "w").write("gpu")
    bus = dev["pci_bus_id"][4:].lower(); os.makedirs(f"{root}/proc/nvidia/gpus/{bus}")
for name, text in [("params", "ModifyDeviceFiles: 1\n"), ("version", "NVRM version: fake\n")]:
    open(f"{root}/proc/nvidia/{name}", "w").write(text)
json.dump(d, open(sys.argv[2], "w"))
PY
export GPULANE_DEV_ROOT=$work/dev GPULANE_PROC_DRIVER_ROOT=$work/proc
for _ in $(seq "$runs"); do
  for b in old new; do
    bin=$old; [ $b = new ] && bin=$new
    GPULANE_ISOLATE_TIMING=1 "$bin" run -g 1 -- true 2>&1 >/dev/null | sed -n "s/.*plan \([0-9]*\) us (spawner).*/$b \1/p"
  done
done | python3 -c '
import sys, statistics
v = {}
for line in sys.stdin:
    b, us = line.split(); v.setdefault(b, []).append(int(us))
for b, x in v.items(): print(f"{b}: plan median {statistics.median(x):.0f} us, p90 {sorted(x)[int(0.9*len(x))]} us ({len(x)} runs)")'
