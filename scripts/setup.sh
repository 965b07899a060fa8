#!/usr/bin/env bash
# First run on Debian 12: install the build dependencies, build gpulane, and show the GPUs.
# Run as root (or with sudo). Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential cmake ninja-build pkg-config libcli11-dev nlohmann-json3-dev libfmt-dev libspdlog-dev
          libsqlite3-dev libtomlplusplus-dev libgtest-dev libgmock-dev libbenchmark-dev sqlite3 python3)
missing=()
for p in "${packages[@]}"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p"); done
if ((${#missing[@]})); then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build

# The shared lease directory (and at every boot, through systemd-tmpfiles).
if [ "$(id -u)" -eq 0 ]; then
  install -D -m 0644 packaging/tmpfiles.d/gpulane.conf /usr/lib/tmpfiles.d/gpulane.conf
  install -d -m 0755 /run/gpulane && install -d -m 1777 /run/gpulane/leases
fi

echo "== gpulane status" >&2
if ./build/gpulane status; then exit 0; fi
rc=$?
if [ "$rc" -eq 3 ]; then
  fixture=../shared/fixtures/h200x2-2026-11-30/nvml_snapshot.json
  if [ -f "$fixture" ]; then
    echo "== no NVIDIA driver on this machine: the same command against a recording of 2 x H200 (fake NVML)" >&2
    GPULANE_NVML_LIBRARY=build/fake_nvml/current/libnvidia-ml.so.1 FAKE_NVML_STATE=$fixture ./build/gpulane status
    exit 0
  fi
fi
exit "$rc"
