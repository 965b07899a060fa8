#!/usr/bin/env bash
# Fuzzes gpulane's parsers with libFuzzer (tests/fuzz/fuzz_*.cc): builds the targets with clang
# (ASan + UBSan, coverage-guided) into build-fuzz/ and runs each for a given time, one after another.
#
#   scripts/fuzz.sh                       every target for an hour each (a person's long run)
#   scripts/fuzz.sh 20                    20 s each (what CI runs: scripts/gates.sh); also --time 20
#   scripts/fuzz.sh 600 units             one target
#
# Targets: frame_reader request config units visible_devices records job_id. Each starts from its
# committed seeds (tests/fuzz/corpus/<target>) and the corpus it grew before (build-fuzz/corpus/<target>,
# kept between runs, never committed by this script). A crash, a failed property (FUZZ_CHECK) or a
# leak is saved as build-fuzz/crashes/<target>/crash-<sha1>; the script goes on with the other
# targets and exits 1. To keep one as a regression test, copy it into tests/fuzz/corpus/<target>/
# (ctest's FuzzCorpus.<target> replays every file there) and add a unit test for the fix.
# Each target's figures (runs, executions per second, coverage "cov", features "ft", corpus size)
# are printed at the end and written to build-fuzz/fuzz-summary.txt.
#
# A target named NAME:N runs N libFuzzer workers side by side (-fork=N; the time is wall time, so
# N workers fuzz N times as long). --parallel runs the targets side by side instead of one after
# another (for a machine with many cores: `--parallel 3600 request:4 records:4 frame_reader:4`).
# FUZZ_PREBUILT=DIR takes the fuzz_* binaries from DIR and neither probes nor builds (a machine
# without clang: the binaries built here, with their libfmt/libtomlplusplus beside them in DIR).
#
# FUZZ_TIMEOUT_S (default 10): an input that runs longer counts as a hang. libFuzzer measures wall
# time, so a long run niced beside builds needs more (an hour's runs beside two builds reported
# inputs of under 10 ms as 10 s timeouts: the process did not get the CPU).
#
# Needs clang and its libFuzzer runtime (Debian 12: clang, libclang-rt-14-dev); run as root it
# installs them when missing (as CI does), otherwise it says what to install and exits 1.
set -euo pipefail
cd "$(dirname "$0")/.."

time_s=3600
targets=()
parallel=0
while (($#)); do
  case "$1" in
    --parallel) parallel=1; shift ;;
    --time) time_s="$2"; shift 2 ;;
    --time=*) time_s="${1#*=}"; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
    [0-9]*) time_s="$1"; shift ;;
    *) targets+=("$1"); shift ;;
  esac
done
all=(frame_reader request config units visible_devices records job_id)
((${#targets[@]})) || targets=("${all[@]}")
declare -A workers=()
for i in "${!targets[@]}"; do
  t=${targets[$i]%%:*}
  n=1
  [[ "${targets[$i]}" == *:* ]] && n=${targets[$i]#*:}
  [[ " ${all[*]} " == *" $t "* ]] || { echo "fuzz.sh: no target '$t' (targets: ${all[*]})" >&2; exit 2; }
  [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "fuzz.sh: '$t:$n': the workers after ':' are a whole number >= 1" >&2; exit 2; }
  targets[$i]=$t
  workers[$t]=$n
done
[[ "$time_s" =~ ^[0-9]+$ ]] && ((time_s > 0)) || { echo "fuzz.sh: --time takes whole seconds > 0" >&2; exit 2; }

# clang with libFuzzer: a fuzz target that links is the test.
probe_fuzzer() {
  local d; d=$(mktemp -d)
  echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' >"$d/t.cc"
  clang++ -fsanitize=fuzzer,address,undefined "$d/t.cc" -o "$d/t" >/dev/null 2>&1
  local rc=$?
  rm -rf "$d"
  return $rc
}
bin_dir=build-fuzz/fuzz
if [ -n "${FUZZ_PREBUILT:-}" ]; then
  bin_dir=$FUZZ_PREBUILT
  export LD_LIBRARY_PATH="$bin_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
elif ! command -v clang++ >/dev/null || ! probe_fuzzer; then
  packages=(clang libclang-rt-14-dev)
  if [ "$(id -u)" -ne 0 ]; then
    echo "fuzz.sh: needs clang with libFuzzer: sudo apt-get install ${packages[*]}" >&2
    exit 1
  fi
  echo "== installing ${packages[*]} (clang with libFuzzer)" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${packages[@]}" >/dev/null
  probe_fuzzer || { echo "fuzz.sh: clang++ still cannot link a libFuzzer target" >&2; exit 1; }
fi

if [ -z "${FUZZ_PREBUILT:-}" ]; then
  owner=$(stat -c %U .)
  as_owner=()
  if [ "$(id -u)" -eq 0 ] && [ "$owner" != root ]; then as_owner=(runuser -u "$owner" --); fi
  "${as_owner[@]}" cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
    -DGPULANE_FUZZ=ON -DGPULANE_BUILD_TESTS=OFF >/dev/null
  "${as_owner[@]}" cmake --build build-fuzz --parallel "${GPULANE_BUILD_JOBS:-$(nproc)}" --target fuzzers
fi

dict_of() {
  case "$1" in
    request|records|frame_reader) echo tests/fuzz/dict/json.dict ;;
    *) echo "tests/fuzz/dict/$1.dict" ;;
  esac
}

summary=build-fuzz/fuzz-summary.txt
: >"$summary"
failed=()
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
# Runs target $1 for time_s seconds with its workers; its exit status is libFuzzer's.
fuzz_one() {
  local t=$1 corpus=build-fuzz/corpus/$1 crashes=build-fuzz/crashes/$1 log=build-fuzz/fuzz-$1.log
  local fork=()
  ((${workers[$t]} > 1)) && fork=(-fork="${workers[$t]}" -ignore_crashes=0 -ignore_timeouts=0 -ignore_ooms=0)
  mkdir -p "$corpus" "$crashes"
  echo "== fuzz_$t for ${time_s} s, ${workers[$t]} worker(s)" >&2
  "$bin_dir"/fuzz_"$t" -max_total_time="$time_s" -print_final_stats=1 -timeout="${FUZZ_TIMEOUT_S:-10}" -rss_limit_mb=2048 \
    -max_len=16384 -dict="$(dict_of "$t")" -artifact_prefix="$crashes/" "${fork[@]}" "$corpus" "tests/fuzz/corpus/$t" \
    >"$log" 2>&1
}

# The summary line of target $1 from its log: runs, speed, coverage, corpus (one worker's final
# stats; with -fork, its last status line "#N: cov: C ft: F corp: K exec/s S ... time: Ts", whose
# cov counts differently from a single worker's: compare runs of the same kind only).
summarize() {
  local t=$1 rc=$2 took=$3 log=build-fuzz/fuzz-$1.log crashes=build-fuzz/crashes/$1 last runs speed cov ft corp line
  last=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  [ -n "$runs" ] || runs=$(sed -n 's/^#\([0-9]*\):.*/\1/p' <<<"$last")
  [ -n "$speed" ] || speed=$(( ${runs:-0} / (took > 0 ? took : 1) ))  # -fork: its status line has the last job's only
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  corp=$(sed -n 's/.* corp: \([0-9]*\(\/[0-9a-zA-Z]*\)\{0,1\}\).*/\1/p' <<<"$last")
  line="$t: ${runs:-?} runs in ${took} s (${speed:-?}/s), ${workers[$t]} worker(s), cov ${cov:-?}, ft ${ft:-?}, corpus ${corp:-?}"
  if ((rc != 0)); then
    line="$line: FAILED (exit $rc), $(ls "$crashes" | wc -l) input(s) in $crashes, log $log"
    failed+=("$t")
    grep -E 'ERROR: |FUZZ_CHECK|runtime error|SUMMARY' "$log" | head -5 >&2 || true
  fi
  echo "$line" | tee -a "$summary" >&2
}

if ((parallel)); then
  declare -A pid_of=()
  t0=$SECONDS
  for t in "${targets[@]}"; do fuzz_one "$t" & pid_of[$t]=$!; done
  for t in "${targets[@]}"; do
    rc=0
    wait "${pid_of[$t]}" || rc=$?
    summarize "$t" "$rc" $((SECONDS - t0))
  done
else
  for t in "${targets[@]}"; do
    rc=0
    t0=$SECONDS
    fuzz_one "$t" || rc=$?
    summarize "$t" "$rc" $((SECONDS - t0))
  done
fi
if ((${#failed[@]})); then
  echo "fuzz.sh: ${#failed[@]} target(s) failed: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz.sh: ${#targets[@]} targets, no crash in ${time_s} s each" >&2
