#!/usr/bin/env bash
# Builds gpulane (Release) on this Debian 12 machine and fills .carry/ with what the GPU machine
# (Ubuntu 24.04, no package install) needs to run it:
#   .carry/bin/gpulane       the stripped binary
#   .carry/bin/gpulane_nvml_floor  the sampler's floor for bench/sampler_floor.py --real (stripped,
#                            about 1 MB: the NVML loader and fmt alone)
#   .carry/lib/*.so*         the Debian builds of its non-glibc shared libraries, if any (none with
#                            GPULANE_STATIC_DEPS, the default: fmt, toml++, SQLite, libstdc++ are linked in)
#   .carry/BUILD_INFO        commit, build type, compiler, library list with sha256
# glibc, libstdc++, libgcc_s, libm and the dynamic loader are NOT carried: the GPU machine's own
# (newer: glibc 2.39, g++ 13) run a binary built here. Nor are libssl/libcrypto/libz/brotli, which
# are installed there (docs: ../shared/notes/gpu-machine.md).
# scripts/gpu-acceptance.sh sets LD_LIBRARY_PATH=.carry/lib and runs .carry/bin/gpulane.
#
# Usage: scripts/make-carry.sh [BUILD_DIR]   (default build-carry; the usual build/ is left alone)
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir=${1:-build-carry}
carry=.carry
max_bytes=$((20 << 20))

# Never shipped: the GPU machine's own system libraries must be used.
is_system_lib() {
  case "$1" in
    linux-vdso.so.* | linux-gate.so.* | ld-linux*.so.* | libc.so.* | libm.so.* | libstdc++.so.* | libgcc_s.so.* | \
      libpthread.so.* | libdl.so.* | librt.so.* | libutil.so.* | libresolv.so.* | libanl.so.* | \
      libssl.so.* | libcrypto.so.* | libz.so.* | libbrotli*.so.*)
      return 0 ;;
  esac
  return 1
}

echo "== configure + build (Release) in $build_dir" >&2
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGPULANE_BUILD_TESTS=OFF -DGPULANE_BUILD_BENCH=ON >/dev/null
cmake --build "$build_dir" --target gpulane gpulane_nvml_floor

rm -rf "$carry"
mkdir -p "$carry/bin" "$carry/lib"
cp "$build_dir/gpulane" "$carry/bin/gpulane"
strip --strip-unneeded "$carry/bin/gpulane"
cp "$build_dir/gpulane_nvml_floor" "$carry/bin/gpulane_nvml_floor"
strip --strip-unneeded "$carry/bin/gpulane_nvml_floor"

# ldd lists the whole closure (also libraries needed by libraries). Lines: "name => /path (addr)".
missing=0
carried=()
while read -r name arrow path _; do
  [ "$arrow" = "=>" ] || continue
  if [ "$path" = "not" ]; then
    echo "error: $name not found by ldd" >&2
    missing=1
    continue
  fi
  is_system_lib "$name" && continue
  cp -L "$path" "$carry/lib/$name"
  carried+=("$name")
done < <(ldd "$build_dir/gpulane")
[ "$missing" -eq 0 ] || exit 1

# The carried binary must resolve every library from .carry/lib or the system set above.
if LD_LIBRARY_PATH="$carry/lib" ldd "$carry/bin/gpulane" | grep -q "not found"; then
  echo "error: .carry/bin/gpulane has unresolved libraries:" >&2
  LD_LIBRARY_PATH="$carry/lib" ldd "$carry/bin/gpulane" >&2
  exit 1
fi
LD_LIBRARY_PATH="$carry/lib" "$carry/bin/gpulane" --help >/dev/null
if ldd "$carry/bin/gpulane_nvml_floor" | grep -q "not found"; then
  echo "error: .carry/bin/gpulane_nvml_floor has unresolved libraries" >&2
  exit 1
fi

{
  echo "commit: $(git rev-parse HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- src CMakeLists.txt 2>/dev/null || echo ' (+ uncommitted changes in src/)')"
  echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(. /etc/os-release && echo "$PRETTY_NAME"), $(c++ --version | head -1)"
  echo "build type: Release (stripped)"
  echo "glibc needed: $(objdump -T "$carry/bin/gpulane" "$carry"/lib/* 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)"
  echo "glibcxx needed: $(objdump -T "$carry/bin/gpulane" "$carry"/lib/* 2>/dev/null | grep -o 'GLIBCXX_[0-9.]*' | sort -uV | tail -1)"
  echo "files:"
  (cd "$carry" && shopt -s nullglob && sha256sum bin/* lib/* | sed 's/^/  /')
} >"$carry/BUILD_INFO"

bytes=$(du -sb "$carry" | cut -f1)
if [ "$bytes" -gt "$max_bytes" ]; then
  echo "error: $carry is $((bytes >> 20)) MiB, over the 20 MiB budget" >&2
  exit 1
fi
cat "$carry/BUILD_INFO"
echo "carried libraries: ${carried[*]:-(none)}"
echo "$carry: $((bytes / 1024)) KiB"
