#!/usr/bin/env bash
# Builds gpulane with its tests and runs the whole test suite (no GPU needed: tests use the fake
# NVML). As root it first installs what the tests need and the machine lacks (GPULANE_TEST_PACKAGES
# in scripts/lib/packages.sh, named before installing, without recommendations, their services
# neither enabled nor started); as another user it says which are missing. Arguments go to ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/packages.sh
ensure_packages "building gpulane" "${GPULANE_BUILD_PACKAGES[@]}"
ensure_packages "the tests" "${GPULANE_TEST_PACKAGES[@]}"
[ -d web/node_modules ] || (cd web && npm ci --no-audit --no-fund --loglevel=error)
cmake -S . -B build -G Ninja -DGPULANE_BUILD_TESTS=ON >/dev/null
cmake --build build
ctest --test-dir build --output-on-failure -j "$(nproc)" "$@"
