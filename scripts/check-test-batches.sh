#!/usr/bin/env bash
# The test programs are compiled in batches (tests/CMakeLists.txt, GPULANE_UNITY_TESTS): CMake
# includes a batch's files into one translation unit, where two files' file-local helpers of the
# same name collide. Which files share a batch changes when a test file is added, so this checks
# every pair at once: all of a program's test files as ONE translation unit, -fsyntax-only (about
# a minute a program on two cores). A name defined in two files is reported as a redefinition or
# an ambiguous call; the fix is a name of the file's own or one definition in tests/support/.
#
#   scripts/check-test-batches.sh [BUILD_DIR]     (default build/, configured with the tests)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
rc=0
for prog in unit_tests integration_tests; do
  dir=$build/tests/CMakeFiles/$prog.dir/Unity
  first=$(ls "$dir"/unity_*_cxx.cxx 2>/dev/null | head -n 1) || true
  if [ -z "$first" ]; then
    echo "check-test-batches: $build has no batches of $prog: configure it with -DGPULANE_BUILD_TESTS=ON (GPULANE_UNITY_TESTS on)" >&2
    exit 2
  fi
  all=$(mktemp --suffix=.cxx)
  cat "$dir"/unity_*_cxx.cxx | grep '^#include' > "$all"
  obj=${first#"$build"/}.o
  cmd=$(cd "$build" && ninja -t commands "$obj" | tail -n 1)
  cmd=$(echo "$cmd" | sed "s| -o [^ ]*| -fsyntax-only|; s| -MD -MT [^ ]* -MF [^ ]*||; s| -c [^ ]*| -c $all|")
  if (cd "$build" && bash -c "$cmd") 2> >(grep -E 'error:' | sed "s|$PWD/||" | sort -u >&2); then
    echo "check-test-batches: $prog: $(wc -l < "$all") files compile as one unit" >&2
  else
    rc=1
  fi
  rm -f "$all"
done
exit "$rc"
