#!/usr/bin/env bash
# Packaging.ShellCompletions: the generated bash completion completes subcommands, options, an
# option's listed choices and GPUs from `gpulane _complete gpus` (on the fake NVML's recorded
# H200s); the zsh and fish scripts parse (zsh -n, fish -n).
# usage: check_completions.sh BUILD_DIR FIXTURE_STATE_JSON
set -euo pipefail
build=$(cd "$1" && pwd)
state=$2
dir=$build/packaging/completions
fail() { echo "FAIL: $*" >&2; exit 1; }
export PATH="$build:$PATH" GPULANE_DIRECT_NVML=1 GPULANE_NVML_LIBRARY="$build/fake_nvml/current/libnvidia-ml.so.1" \
  FAKE_NVML_STATE="$state" GPULANE_SOCKET=/nonexistent/gpulane.sock GPULANE_SYSTEM_DAEMON=0
# shellcheck disable=SC1090
source "$dir/gpulane.bash"
complete_line() {  # the words bash would offer for the words given, the last one being completed
  COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMPREPLY=(); _gpulane; echo "${COMPREPLY[*]}"
}
[ "$(complete_line gpulane sta)" = status ] || fail "gpulane sta<TAB> gave '$(complete_line gpulane sta)'"
[ "$(complete_line gpulane run --ord)" = --order ] || fail "run --ord<TAB>"
[ "$(complete_line gpulane run --order "")" = "memory util pci bestfit" ] || fail "run --order <TAB>: '$(complete_line gpulane run --order "")'"
gpus=$(complete_line gpulane run --gpus "")
uuid0=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["devices"][0]["uuid"])' "$state")
[[ " $gpus " == *" 0 "* && " $gpus " == *" $uuid0 "* ]] || fail "run --gpus <TAB> gave '$gpus', not GPU 0 and $uuid0"
[ -z "$(complete_line gpulane show "")" ] || fail "show <TAB> without a daemon should offer nothing"
command -v zsh >/dev/null || fail "zsh is not installed (scripts/test.sh installs it)"
zsh -n "$dir/_gpulane" || fail "zsh -n _gpulane"
command -v fish >/dev/null || fail "fish is not installed (scripts/test.sh installs it)"
fish -n "$dir/gpulane.fish" || fail "fish -n gpulane.fish"
echo ok
