#!/bin/sh
# GPULANE_STATIC_DEPS (the default): the gpulane binary BINARY needs no shared library but glibc's
# (libc, libm, the loader); libstdc++, libgcc_s, fmt, toml++ and SQLite are linked in, since
# loading them was a third of a `gpulane submit` (bench/results/queue-2026-12-01.md).
# Usage: tests/check_static_deps.sh BINARY
dynamic=$(readelf -d "$1") || { echo "cannot read $1" >&2; exit 2; }
needed=$(printf '%s\n' "$dynamic" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p')
[ -n "$needed" ] || { echo "$1 lists no shared library at all (not a dynamic executable?)" >&2; exit 2; }
extra=$(printf '%s\n' "$needed" | grep -v -E '^(libc|libm|libdl|libpthread|ld-linux-x86-64|ld-linux-aarch64)\.so')
[ -z "$extra" ] || { echo "$1 needs shared libraries beyond glibc's: $(echo $extra)" >&2; exit 1; }
echo "$1 needs: $(echo $needed)"
