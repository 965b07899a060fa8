#!/usr/bin/env bash
# First run on Debian 12: install what building and running gpulane needs, build gpulane, gpulane-web
# and the dashboard (not the tests: ./scripts/test.sh builds those), and show the GPUs.
# Run as root (or with sudo). Safe to run again. Installs only the packages scripts/lib/packages.sh
# lists under GPULANE_BUILD_PACKAGES, without their recommendations, naming them first; enables and
# starts no service. Exits with `gpulane status`'s exit code (see the README's table): 0 when it
# showed GPUs, the recorded ones on a machine without an NVIDIA driver.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/packages.sh
ensure_packages "building gpulane" "${GPULANE_BUILD_PACKAGES[@]}"
echo "== setup: packages ready after ${SECONDS} s" >&2

# Build as the clone's owner, also under sudo: a root-owned build/ would stop that user's own
# ./scripts/test.sh later.
owner=$(stat -c %U .)
as_owner=()
if [ "$(id -u)" -eq 0 ] && [ "$owner" != root ]; then as_owner=(runuser -u "$owner" --); fi
# The dashboard's npm packages (uPlot, esbuild, playwright-core: web/package-lock.json), from the
# npm registry; the build itself then bundles offline from web/node_modules.
(cd web && "${as_owner[@]}" npm ci --no-audit --no-fund --loglevel=error)
echo "== setup: the dashboard's npm packages ready after ${SECONDS} s" >&2
# GPULANE_BUILD_TESTS stays as the build folder has it: OFF on a first run, ON once test.sh ran.
tests_flag=()
grep -q '^GPULANE_BUILD_TESTS:BOOL=ON' build/CMakeCache.txt 2>/dev/null || tests_flag=(-DGPULANE_BUILD_TESTS=OFF)
"${as_owner[@]}" cmake -S . -B build -G Ninja "${tests_flag[@]}" >/dev/null
"${as_owner[@]}" cmake --build build --target gpulane gpulane-web gpulane_dashboard
echo "== setup: gpulane, gpulane-web and the dashboard built after ${SECONDS} s" >&2

# The shared lease directory (and at every boot, through systemd-tmpfiles).
if [ "$(id -u)" -eq 0 ]; then
  install -D -m 0644 packaging/tmpfiles.d/gpulane.conf /usr/lib/tmpfiles.d/gpulane.conf
  install -d -m 0755 /run/gpulane && install -d -m 1777 /run/gpulane/leases
  echo "== setup: the shared lease directory /run/gpulane/leases (made again at boot: /usr/lib/tmpfiles.d/gpulane.conf)" >&2
fi

echo "== gpulane status" >&2
rc=0
# Its error line is kept back until the exit code is known: without a driver (3) it is not an
# error of the set-up, and is said as the reason for the recording below (a new user read
# "gpulane: error: NVIDIA driver not found" and took the set-up for failed).
status_err=$(mktemp)
./build/gpulane status 2>"$status_err" || rc=$?
if [ "$rc" -ne 3 ]; then cat "$status_err" >&2; fi
why=$(sed -n '1{s/^gpulane: error: //;s/: .*//;p}' "$status_err")
rm -f "$status_err"
if [ "$rc" -eq 3 ]; then
  # No NVIDIA driver (exit code 3): the same command against a recording of two real H200s, through
  # the fake NVML the tests use (built here for this alone). The recorded PyTorch process gets a pid
  # no process here has, so it shows as a process of another container instead of whatever runs
  # here under its old pid.
  "${as_owner[@]}" cmake --build build --target fake_nvml >/dev/null
  state=$(mktemp --suffix=.json)
  trap 'rm -f "$state"' EXIT
  sed 's/"pid": 673,/"pid": 4194303,/' tests/fixtures/h200x2-2026-11-30/nvml_snapshot.json >"$state"
  echo "== no NVIDIA driver on this machine (${why:-exit code 3}): the same command against a recording of" \
       "2 x H200 (fake NVML; tests/fixtures/h200x2-2026-11-30; its PyTorch process, pid 673 there, is shown" \
       "as pid 4194303, which no process here has)" >&2
  rc=0
  GPULANE_DIRECT_NVML=1 GPULANE_NVML_LIBRARY=build/fake_nvml/current/libnvidia-ml.so.1 FAKE_NVML_STATE=$state \
    ./build/gpulane status || rc=$?
fi
exit "$rc"
