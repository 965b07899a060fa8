#pragma once
// `gpulane daemon status`, `gpulane daemon stop` and `gpulane daemon --user --install`: one's own
// daemon seen, stopped, and kept running by systemd (docs/user-daemon.md).
#include <map>
#include <string>

namespace gpulane::cli {

/// Prints whether a daemon answers (mode, pid, socket, dashboard URL) or, when none does, the
/// user's own daemon's state (its unfinished jobs) and how to start it. Exit 0 when one answers,
/// kExitUnavailable when none does.
int RunDaemonStatus();

/// Stops the user's own daemon (SIGTERM, then waits for it to end: up to 30 s) and says what goes on
/// without it; the system daemon's is systemd's to stop (said, exit kExitUsage). Exit 0 when it
/// stopped or none ran.
int RunDaemonStop();

/// The systemd user unit that runs `exe` as `gpulane daemon --user` (restarted on failure; its
/// stop leaves the jobs' supervisors alone), with `environment` (name -> value) pinned.
std::string UserUnitText(const std::string& exe, const std::map<std::string, std::string>& environment);

/// Writes UserUnitText for this binary to $XDG_CONFIG_HOME/systemd/user/gpulane.service (else
/// ~/.config/...) and prints where, and the systemctl and loginctl lines that start it now and at
/// boot; runs neither. Refused (kExitUsage) when a system daemon serves this machine.
int RunDaemonInstall();

}  // namespace gpulane::cli
