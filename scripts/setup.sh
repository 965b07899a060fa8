#!/usr/bin/env bash
# First run on Debian 12: install the build dependencies, build gpulane, and show the GPUs.
# Run as root (or with sudo). Safe to run again. Exits with `gpulane status`'s exit code (see the
# README's table): 0 when it showed GPUs, the recorded ones on a machine without an NVIDIA driver.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential cmake ninja-build pkg-config libcli11-dev nlohmann-json3-dev libfmt-dev libspdlog-dev
          libsqlite3-dev libtomlplusplus-dev libgtest-dev libgmock-dev libbenchmark-dev sqlite3 python3 curl
          tmux libcpp-httplib-dev python3-prometheus-client chromium
          help2man lintian zsh fish python3-pytest python3-pip python3-setuptools
          python3-venv
          slurmctld slurmd slurm-client munge)  # the last four: the Slurm tests start their own cluster (tests/slurm)
# The dashboard's bundler and browser test run on Node.js and npm: Debian's, unless the machine has its own.
command -v node >/dev/null 2>&1 || packages+=(nodejs)
command -v npm >/dev/null 2>&1 || packages+=(npm)
missing=()
for p in "${packages[@]}"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p"); done
if ((${#missing[@]})); then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi

# Build as the clone's owner, also under sudo: a root-owned build/ would stop that user's own
# ./scripts/test.sh later.
owner=$(stat -c %U .)
as_owner=()
if [ "$(id -u)" -eq 0 ] && [ "$owner" != root ]; then as_owner=(runuser -u "$owner" --); fi
# The dashboard's npm packages (uPlot, esbuild, playwright-core: web/package-lock.json), from the
# npm registry; the build itself then bundles offline from web/node_modules.
(cd web && "${as_owner[@]}" npm ci --no-audit --no-fund --loglevel=error)
"${as_owner[@]}" cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
"${as_owner[@]}" cmake --build build

# The shared lease directory (and at every boot, through systemd-tmpfiles).
if [ "$(id -u)" -eq 0 ]; then
  install -D -m 0644 packaging/tmpfiles.d/gpulane.conf /usr/lib/tmpfiles.d/gpulane.conf
  install -d -m 0755 /run/gpulane && install -d -m 1777 /run/gpulane/leases
fi

echo "== gpulane status" >&2
rc=0
./build/gpulane status || rc=$?
if [ "$rc" -eq 3 ]; then
  # No NVIDIA driver (exit code 3): the same command against a recording of two real H200s, through
  # the fake NVML the tests use. The recorded PyTorch process gets a pid no process here has, so it
  # shows as a process of another container instead of whatever runs here under its old pid.
  state=$(mktemp --suffix=.json)
  trap 'rm -f "$state"' EXIT
  sed 's/"pid": 673,/"pid": 4194303,/' tests/fixtures/h200x2-2026-11-30/nvml_snapshot.json >"$state"
  echo "== no NVIDIA driver on this machine: the same command against a recording of 2 x H200 (fake NVML;" \
       "tests/fixtures/h200x2-2026-11-30)" >&2
  rc=0
  GPULANE_DIRECT_NVML=1 GPULANE_NVML_LIBRARY=build/fake_nvml/current/libnvidia-ml.so.1 FAKE_NVML_STATE=$state \
    ./build/gpulane status || rc=$?
fi
exit "$rc"
