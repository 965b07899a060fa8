#!/usr/bin/env bash
# Builds gpulane with its tests and runs the whole test suite (no GPU needed: tests use the fake
# NVML). As root it first installs what the tests need and the machine lacks (GPULANE_TEST_PACKAGES
# in scripts/lib/packages.sh, named before installing, without recommendations, their services
# neither enabled nor started); as another user it says which are missing. Arguments go to ctest.
#
# GPULANE_TEST_SANITIZE=asan runs the same suite once with AddressSanitizer and
# UndefinedBehaviorSanitizer wherever gpulane's code runs (scripts/test-sanitizers.sh asan: the
# in-process tests built with them in build-asan/, the others from build/ against build-asan's
# gpulane), and then the few tests ASan cannot judge against the normal build. That is what CI
# runs (.ci/run): every test once, and no test program compiled twice.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/packages.sh
ensure_packages "building gpulane" "${GPULANE_BUILD_PACKAGES[@]}"
ensure_packages "the tests" "${GPULANE_TEST_PACKAGES[@]}"
[ -d web/node_modules ] || (cd web && npm ci --no-audit --no-fund --loglevel=error)
case "${GPULANE_TEST_SANITIZE:-}" in
  "") ;;
  asan) exec ./scripts/test-sanitizers.sh asan "$@" ;;
  *) echo "test.sh: GPULANE_TEST_SANITIZE='$GPULANE_TEST_SANITIZE' is not a mode: leave it unset, or set it to asan" >&2; exit 2 ;;
esac
cmake -S . -B build -G Ninja -DGPULANE_BUILD_TESTS=ON -DGPULANE_IN_PROCESS_TESTS=ON >/dev/null
cmake --build build
ctest --test-dir build --output-on-failure -j "$(nproc)" "$@"
