#!/usr/bin/env bash
# Packaging.DebianPackages: builds the Debian packages from the build folder (cpack -G DEB), checks
# their control data and contents (dpkg-deb --info/--contents), unpacks them into a clean tree
# (dpkg -x) and runs the unpacked gpulane --version and the Python package from there, then
# lintian (every tag is a failure: the packages are kept lintian-clean).
# usage: check_deb.sh BUILD_DIR SOURCE_DIR VERSION
set -euo pipefail
build=$(cd "$1" && pwd)
source_dir=$2
version=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

(cd "$build" && cpack -G DEB -B "$work/out" >"$work/cpack.log" 2>&1) || { cat "$work/cpack.log" >&2; fail "cpack -G DEB failed"; }
deb=$(ls "$work"/out/gpulane_*_amd64.deb 2>/dev/null | head -n 1)
[ -n "$deb" ] || fail "no gpulane_<version>_amd64.deb in $(ls "$work/out")"

field() { dpkg-deb -f "$1" "$2"; }
[ "$(field "$deb" Package)" = gpulane ] || fail "Package is not gpulane"
[ "$(field "$deb" Architecture)" = amd64 ] || fail "Architecture is not amd64"
field "$deb" Depends | grep -q libc6 || fail "Depends lacks libc6 (dpkg-shlibdeps)"
dpkg-deb --info "$deb" conffiles | grep -qx /etc/gpulane/config.toml || fail "/etc/gpulane/config.toml is not a conffile"
for script in postinst prerm postrm; do dpkg-deb --info "$deb" "$script" >/dev/null || fail "no $script"; done

dpkg-deb --contents "$deb" | awk '{print $6}' | sed 's#^\./#/#' >"$work/contents"
for path in /usr/bin/gpulane /usr/bin/gpulane-web /usr/lib/systemd/system/gpulane.service /usr/lib/tmpfiles.d/gpulane.conf \
            /etc/gpulane/config.toml /usr/share/man/man1/gpulane.1.gz /usr/share/man/man1/gpulane-run.1.gz \
            /usr/share/man/man1/gpulane-web.1.gz /usr/share/man/man5/gpulane.toml.5.gz \
            /usr/share/bash-completion/completions/gpulane /usr/share/zsh/vendor-completions/_gpulane \
            /usr/share/fish/vendor_completions.d/gpulane.fish /usr/share/gpulane/web/index.html \
            /usr/share/doc/gpulane/copyright /usr/share/doc/gpulane/changelog.gz /usr/share/doc/gpulane/README.md; do
  grep -qx "$path" "$work/contents" || fail "$path is not in the package"
done

dpkg -x "$deb" "$work/root"
"$work/root/usr/bin/gpulane" --version | grep -Eq "^gpulane $version \(commit ([0-9a-f]+(\+changes)?|unknown), [A-Za-z]+\)$" \
  || fail "unpacked gpulane --version printed '$("$work/root/usr/bin/gpulane" --version)'"
grep -qx 'ExecStart=/usr/bin/gpulane daemon' "$work/root/usr/lib/systemd/system/gpulane.service" \
  || fail "the unit does not start /usr/bin/gpulane"
# Every subcommand has its page, holding each of its options.
for sub in $("$work/root/usr/bin/gpulane" --help | sed -n '/^Subcommands:/,$ s/^  \([a-z]\+\) .*/\1/p'); do
  page="$work/root/usr/share/man/man1/gpulane-$sub.1.gz"
  [ -f "$page" ] || fail "no man page for gpulane $sub"
  # The page as text in a file: `zcat | sed | grep -q` fails under pipefail once a page is longer
  # than sed's 4 KiB output buffer (grep -q exits at the first match, sed gets SIGPIPE).
  zcat "$page" | sed 's/\\-/-/g' > "$work/page.txt"
  for opt in $("$work/root/usr/bin/gpulane" "$sub" --help | grep -o -- '--[a-z][a-z-]*' | sort -u); do
    grep -q -- "$opt" "$work/page.txt" || fail "gpulane-$sub.1 lacks $opt"
  done
done

if [ -d "$source_dir/python/gpulane" ] || ls "$work"/out/python3-gpulane_*_all.deb >/dev/null 2>&1; then
  pydeb=$(ls "$work"/out/python3-gpulane_*_all.deb 2>/dev/null | head -n 1)
  [ -n "$pydeb" ] || fail "no python3-gpulane_<version>_all.deb"
  [ "$(field "$pydeb" Architecture)" = all ] || fail "python3-gpulane is not Architecture: all"
  dpkg -x "$pydeb" "$work/root"
  PYTHONPATH="$work/root/usr/lib/python3/dist-packages" python3 -c 'import gpulane, sys; sys.exit(0 if gpulane.lease else 1)' \
    || fail "the unpacked Python package does not import"
fi

command -v lintian >/dev/null || fail "lintian is not installed (scripts/test.sh installs it)"
lintian --tag-display-limit 0 "$work"/out/*.deb 2>&1 | grep -v 'running with root privileges' >"$work/lintian" || true
if [ -s "$work/lintian" ]; then cat "$work/lintian" >&2; fail "lintian reported the tags above"; fi
echo "ok: $(cd "$work/out" && ls *.deb | tr '\n' ' ')"
