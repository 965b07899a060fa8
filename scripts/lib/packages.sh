# Debian packages for scripts/setup.sh (building and running gpulane) and scripts/test.sh (its
# tests), sourced by both. `ensure_packages WHY NAME...` installs the NAMEs that are missing, after
# naming them, with --no-install-recommends, and leaves the machine's services as they were:
#   - a policy-rc.d that refuses every start is in place while apt runs, so no package's
#     maintainer scripts start a service (munge, slurmctld and slurmd would, on a real server);
#   - afterwards each newly installed package's systemd units and init scripts are disabled
#     (deb-systemd-helper disable, update-rc.d disable): a reboot starts none of them either.
# The Slurm tests start munged, slurmctld and slurmd from a temporary folder of their own
# (tests/slurm/cluster.sh); nothing needs the packages' services. Packages that were installed
# before are never touched, so a machine that runs its own Slurm keeps it as it was.

# What building gpulane and the dashboard needs, and python3 for the build's scripts.
GPULANE_BUILD_PACKAGES=(build-essential cmake ninja-build pkg-config libcli11-dev nlohmann-json3-dev libfmt-dev
  libspdlog-dev libsqlite3-dev libtomlplusplus-dev libcpp-httplib-dev python3 ca-certificates)
# The dashboard's bundler runs on Node.js and npm: Debian's, unless the machine has its own.
command -v node >/dev/null 2>&1 || GPULANE_BUILD_PACKAGES+=(nodejs)
command -v npm >/dev/null 2>&1 || GPULANE_BUILD_PACKAGES+=(npm)

# What the tests need on top, each for the tests named beside it.
GPULANE_TEST_PACKAGES=(
  libgtest-dev libgmock-dev libbenchmark-dev  # the test programs and bench/
  sqlite3 curl tmux                           # store checks, HTTP checks, `gpulane top` in a real terminal
  python3-prometheus-client                   # /metrics parsed by Prometheus' own parser
  chromium                                    # the dashboard's browser test
  help2man lintian                            # man pages and the Debian packages' checks (ctest -R Packaging)
  zsh fish                                    # completions and `pick --export` in each shell
  python3-pytest python3-pip python3-setuptools python3-venv  # the Python package's tests
  slurmctld slurmd slurm-client munge)        # the Slurm tests' own cluster (tests/slurm)

missing_packages() {
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || echo "$p"
  done
}

# The newly installed packages' services: disabled, never started (see the top of this file).
disable_services_of() {
  local p unit script
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || continue
    for unit in $(dpkg -L "$p" 2>/dev/null | grep -E '^/(usr/)?lib/systemd/system/[^/]+\.(service|socket|timer)$'); do
      deb-systemd-helper disable "$(basename "$unit")" >/dev/null 2>&1 || true
    done
    for script in $(dpkg -L "$p" 2>/dev/null | grep -E '^/etc/init\.d/[^/]+$'); do
      update-rc.d "$(basename "$script")" disable >/dev/null 2>&1 || true
    done
  done
}

ensure_packages() {
  local why=$1
  shift
  local missing
  mapfile -t missing < <(missing_packages "$@")
  ((${#missing[@]})) || return 0
  echo "== installing ${#missing[@]} Debian packages for $why: ${missing[*]}" >&2
  local sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || {
      echo "error: ${missing[*]} missing and not root: run this as root, or apt-get install them" >&2
      return 1
    }
    sudo=(sudo)
  fi
  # Everything the packages bring in with them (their dependencies too) counts as new.
  local before
  before=$(mktemp)
  dpkg-query -W -f='${Package}\n' | sort >"$before"
  local policy=/usr/sbin/policy-rc.d own_policy=0
  if [ ! -e "$policy" ]; then
    "${sudo[@]}" sh -c "printf '#!/bin/sh\nexit 101\n' >$policy && chmod 755 $policy"
    own_policy=1
  fi
  local rc=0
  "${sudo[@]}" apt-get update -qq &&
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" ||
    rc=$?
  local new
  mapfile -t new < <(dpkg-query -W -f='${Package}\n' | sort | comm -13 "$before" -)
  rm -f "$before"
  if ((${#new[@]})); then
    if ((${#sudo[@]})); then
      "${sudo[@]}" bash -c "$(declare -f disable_services_of); disable_services_of $(printf '%q ' "${new[@]}")"
    else
      disable_services_of "${new[@]}"
    fi
  fi
  ((own_policy)) && "${sudo[@]}" rm -f "$policy"
  return "$rc"
}
