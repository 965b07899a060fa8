#pragma once
// Where the daemon listens and keeps its state, and whether a system daemon serves this machine.
//   system mode (root, systemd unit): socket /run/gpulane/gpulane.sock, state /var/lib/gpulane
//   user mode (started by `gpulane submit` when no system daemon is installed):
//     socket $XDG_RUNTIME_DIR/gpulane/gpulane.sock (else /tmp/gpulane-<uid>/gpulane.sock)
//     state  $XDG_STATE_HOME/gpulane (else ~/.local/state/gpulane, else /tmp/gpulane-<uid>/state/gpulane)
// GPULANE_SOCKET and GPULANE_STATE_DIR override both (tests, several instances).
//
// /tmp/gpulane-<uid> lies in a folder every user may write to (su, cron and ssh without
// pam_systemd leave XDG_RUNTIME_DIR unset): another user could create it first, listen on its
// socket as a fake daemon and read the submissions sent there (their environment: keys, tokens).
// So it is used only as the user's own private folder (SecureUserPaths: created mode 0700,
// refused when it is anything else), and clients talk only to a daemon that runs as root or as
// themselves (proto::CheckDaemonPeer).
#include <string>
#include <vector>

#include "util/result.h"

namespace gpulane::daemon {

/// The system daemon's own places. GPULANE_SOCKET and GPULANE_STATE_DIR move where a daemon
/// listens, but never these: they are what an admin's install leaves behind.
inline constexpr const char* kSystemSocket = "/run/gpulane/gpulane.sock";
inline constexpr const char* kSystemStateDir = "/var/lib/gpulane";
/// What `systemctl enable gpulane` creates (the unit's WantedBy=multi-user.target).
inline constexpr const char* kEnabledUnitLink = "/etc/systemd/system/multi-user.target.wants/gpulane.service";

struct DaemonPaths {
  std::string socket;
  std::string state_dir;  ///< holds jobs.db and jobs/ (per-job spec, status and lock files)
  bool system = false;
};

DaemonPaths SystemPaths();
DaemonPaths UserPaths();

/// The shared-/tmp fallback of user mode: /tmp/gpulane-<uid> (uid: getuid()).
std::string UserTmpDir();

/// Checks that `dir` is the caller's private folder: a real directory (no symlink), owned by the
/// caller (geteuid), mode 0700 exactly. When it is missing: created with mode 0700 if `create`,
/// else fine (nothing is there to trust or distrust). Errors: kUnsafe (what is wrong with it and
/// how to fix it, one line), kIo (it cannot be created).
Status EnsurePrivateDir(const std::string& dir, bool create);

/// EnsurePrivateDir(UserTmpDir(), create) when the socket or the state folder of `paths` lies in
/// it; nothing to check otherwise (XDG_RUNTIME_DIR and the home folder are the user's own).
Status SecureUserPaths(const DaemonPaths& paths, bool create);

/// The sockets to ask for GPU snapshots, in order: $GPULANE_SOCKET alone when set, else the system
/// daemon's, then the user's own. Any daemon's snapshot will do: they all read the same GPUs.
std::vector<std::string> SnapshotSockets();

/// Whether a system daemon is installed here: then clients ask only it, wait for it while it
/// restarts and never start a per-user daemon. Decided, first match wins, by
///   1. $GPULANE_SYSTEM_DAEMON: "1" yes, "0" no;
///   2. `config_mode` (the machine's `daemon.mode`): "system" yes, "user" no;
///   3. ("auto") yes when `<root>/var/lib/gpulane` exists (a system daemon has run here: systemd's
///      StateDirectory= or the daemon made it) or `<root>` + kEnabledUnitLink exists (the unit is
///      enabled), else no.
/// `root` is "" except in tests. Errors: kInvalidArgument for another GPULANE_SYSTEM_DAEMON value.
Result<bool> SystemDaemonInstalled(const std::string& config_mode, const std::string& root = "");

/// Whether systemd has a gpulane.service unit here (`<root>` + /etc/systemd/system, /usr/local/lib,
/// /usr/lib or /lib systemd/system): whether `systemctl start gpulane` can start the system daemon.
bool SystemUnitInstalled(const std::string& root = "");

}  // namespace gpulane::daemon
