#!/usr/bin/env bash
# The first README command on a fresh Debian 12, measured (issue 24, "an install that leaves the
# machine as it was, fast"): a minimal Debian 12 made with debootstrap (--variant=minbase, the
# smallest Debian there is, so every package setup.sh needs is counted), this tree copied in
# (git archive HEAD: committed files only), then ./scripts/setup.sh run in it as root.
#
#   sudo bench/fresh_install.sh [DIR]      (default /var/tmp/gpulane-fresh; needs debootstrap, root)
#
# Prints: the packages installed and the disk they took, the wall time of the whole command and of
# its parts (packages, npm, build, status), its CPU time, the load beside it, and whether any
# service was enabled or started (systemd wants-links and init-script links in the chroot, and
# processes of the packages' daemons). With FRESH_OLD_PACKAGES=1 it also counts, by apt's
# simulation, the packages the setup.sh before this change installed (its list is kept below) and
# what setup.sh and test.sh install now; FRESH_COUNT_ONLY=1 stops there, before installing anything.
# Network: Debian's mirror and the npm registry, as setup.sh itself uses them; the host's CA bundle
# is copied in so that npm trusts what the host trusts.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-/var/tmp/gpulane-fresh}
command -v debootstrap >/dev/null || { echo "fresh_install.sh: needs debootstrap (apt-get install debootstrap)" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || { echo "fresh_install.sh: run as root (chroot, debootstrap)" >&2; exit 1; }

mirror=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)
[ -n "$mirror" ] || mirror=$(awk '/^deb /{print $2; exit}' /etc/apt/sources.list)
if [ ! -x "$dir/bin/bash" ]; then
  echo "== debootstrap --variant=minbase bookworm $dir" >&2
  debootstrap --variant=minbase bookworm "$dir" "$mirror" >/dev/null
fi
cp /etc/apt/sources.list.d/debian.sources "$dir/etc/apt/sources.list.d/" 2>/dev/null && rm -f "$dir/etc/apt/sources.list" || true
# The host's CA bundle, for npm (a machine whose HTTPS goes through a proxy of its own CA): in a
# file of its own, since the chroot's ca-certificates package comes only with setup.sh's packages.
cp /etc/ssl/certs/ca-certificates.crt "$dir/root/host-ca-certificates.crt" 2>/dev/null || true
mountpoint -q "$dir/proc" || mount --bind /proc "$dir/proc"
trap 'umount "$dir/proc" 2>/dev/null || true' EXIT
rm -rf "$dir/root/gpulane" && mkdir -p "$dir/root/gpulane"
git archive HEAD | tar -x -C "$dir/root/gpulane"
base_packages=$(chroot "$dir" dpkg-query -W -f='${Package}\n' | wc -l)

if [ "${FRESH_OLD_PACKAGES:-0}" = 1 ]; then
  old=(build-essential cmake ninja-build pkg-config libcli11-dev nlohmann-json3-dev libfmt-dev libspdlog-dev
       libsqlite3-dev libtomlplusplus-dev libgtest-dev libgmock-dev libbenchmark-dev sqlite3 python3 curl tmux
       libcpp-httplib-dev python3-prometheus-client chromium help2man lintian zsh fish python3-pytest python3-pip
       python3-setuptools python3-venv slurmctld slurmd slurm-client munge nodejs npm)
  chroot "$dir" apt-get update -qq
  echo "before this change, setup.sh would install $(chroot "$dir" apt-get install -s "${old[@]}" | grep -c '^Inst') packages here (apt-get -s)"
  # The same simulation for what setup.sh and test.sh install now (scripts/lib/packages.sh, with
  # node and npm as on a machine without them).
  new_counts=$(chroot "$dir" /bin/bash -c 'cd /root/gpulane && source scripts/lib/packages.sh &&
    build=("${GPULANE_BUILD_PACKAGES[@]}" nodejs npm) &&
    echo "$(apt-get install -s --no-install-recommends "${build[@]}" | grep -c "^Inst")" \
         "$(apt-get install -s --no-install-recommends "${build[@]}" "${GPULANE_TEST_PACKAGES[@]}" | grep -c "^Inst")"')
  read -r n_setup n_all <<<"$new_counts"
  echo "now, setup.sh would install $n_setup packages here, and test.sh $((n_all - n_setup)) more (apt-get -s)"
  [ "${FRESH_COUNT_ONLY:-0}" = 1 ] && exit 0
fi

cat >"$dir/root/fresh-run.sh" <<'EOF'
cd /root/gpulane
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
[ -s /root/host-ca-certificates.crt ] && export NODE_EXTRA_CA_CERTS=/root/host-ca-certificates.crt
./scripts/setup.sh
EOF
used0=$(du -sxm "$dir" | cut -f1)
load=$(cut -d' ' -f1 /proc/loadavg)
start=$(date +%s.%N)
rc=0
/usr/bin/time -f '%U %S' -o /tmp/fresh-cpu chroot "$dir" /bin/bash /root/fresh-run.sh >"$dir/root/setup.log" 2>&1 || rc=$?
end=$(date +%s.%N)
used1=$(du -sxm "$dir" | cut -f1)
packages=$(($(chroot "$dir" dpkg-query -W -f='${Package}\n' | wc -l) - base_packages))
wants=$(find "$dir/etc/systemd/system" -path '*.wants/*' -newer "$dir/root/fresh-run.sh" 2>/dev/null | wc -l)
rclinks=$(find "$dir"/etc/rc[2-5].d -name 'S*' -newer "$dir/root/fresh-run.sh" 2>/dev/null | wc -l)
read -r cpu_user cpu_sys < <(tail -n 1 /tmp/fresh-cpu)  # after "Command exited with ..." when it failed
python3 - "$start" "$end" "$rc" "$packages" "$((used1 - used0))" "$cpu_user" "$cpu_sys" "$load" "$wants" "$rclinks" <<'EOF'
import sys
start, end, rc, packages, disk, user, sys_, load, wants, rclinks = sys.argv[1:]
print(f"## ./scripts/setup.sh on a fresh Debian 12 (debootstrap minbase), {__import__('os').cpu_count()} CPUs")
print(f"- exit {rc}; wall {float(end) - float(start):.0f} s; CPU {float(user):.0f} s user + {float(sys_):.0f} s system;"
      f" load before {load}")
print(f"- packages installed: {packages}; disk used: {disk} MiB")
print(f"- services enabled by the install: {wants} systemd wants-links, {rclinks} init-script start links")
EOF
grep '^== setup:' "$dir/root/setup.log" | sed 's/^== setup: /- /'
echo "(the whole log: $dir/root/setup.log)"

# FRESH_TEST_PACKAGES=1: then what ./scripts/test.sh installs before building the tests (Slurm's and
# munge's daemons among them), and whether any of their services was enabled or started.
if [ "${FRESH_TEST_PACKAGES:-0}" = 1 ] && [ "$rc" -eq 0 ]; then
  touch "$dir/root/tests-mark"
  before=$(chroot "$dir" dpkg-query -W -f='${Package}\n' | wc -l)
  chroot "$dir" /bin/bash -c 'cd /root/gpulane && source scripts/lib/packages.sh &&
    ensure_packages "the tests" "${GPULANE_TEST_PACKAGES[@]}"' >"$dir/root/test-packages.log" 2>&1 || rc=$?
  after=$(chroot "$dir" dpkg-query -W -f='${Package}\n' | wc -l)
  wants=$(find "$dir/etc/systemd/system" -path '*.wants/*' -newer "$dir/root/tests-mark" 2>/dev/null | wc -l)
  rclinks=$(find "$dir"/etc/rc[2-5].d -name 'S*' -newer "$dir/root/tests-mark" 2>/dev/null | wc -l)
  daemons=$(pgrep -x 'munged|slurmctld|slurmd' | while read -r p; do [ "$(readlink /proc/$p/root)" = "$dir" ] && echo "$p"; done | wc -l)
  echo "## the tests' packages (scripts/lib/packages.sh GPULANE_TEST_PACKAGES): exit $rc"
  echo "- packages installed: $((after - before)); services enabled: $wants systemd wants-links, $rclinks init-script start links; daemons running from them: $daemons"
fi
exit "$rc"
