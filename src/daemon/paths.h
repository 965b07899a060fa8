#pragma once
// Where the daemon listens and keeps its state.
//   system mode (root, systemd unit): socket /run/gpulane/gpulane.sock, state /var/lib/gpulane
//   user mode (started by the client when no system daemon answers):
//     socket $XDG_RUNTIME_DIR/gpulane/gpulane.sock (else /tmp/gpulane-<uid>/gpulane.sock)
//     state  $XDG_STATE_HOME/gpulane (else ~/.local/state/gpulane)
// GPULANE_SOCKET and GPULANE_STATE_DIR override both (tests, several instances).
#include <string>

namespace gpulane::daemon {

struct DaemonPaths {
  std::string socket;
  std::string state_dir;  ///< holds jobs.db and jobs/ (per-job spec, status and lock files)
  bool system = false;
};

DaemonPaths SystemPaths();
DaemonPaths UserPaths();

}  // namespace gpulane::daemon
