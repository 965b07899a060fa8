#pragma once
// Ending processes that hold GPU memory after their job (issue 12, item 4: `gpulane slurm epilog`):
// SIGTERM, a grace, SIGKILL, through pidfds so that a pid reused meanwhile is never signalled.
#include <sys/types.h>

#include <vector>

#include "util/clock.h"

namespace gpulane::exec {

/// What became of each process EndProcesses was given.
struct EndedProcesses {
  std::vector<pid_t> on_term;   ///< ended within the grace after SIGTERM
  std::vector<pid_t> on_kill;   ///< needed SIGKILL
  std::vector<pid_t> gone;      ///< had ended before (or could not be opened: ESRCH)
  std::vector<pid_t> survived;  ///< still there after SIGKILL and a further second, or not ours to signal (EPERM)
};

/// Sends SIGTERM to every pid, waits up to `grace_s` seconds for them to end, sends SIGKILL to
/// those left and waits up to one more second. Each process is held by a pidfd (pidfd_open(2),
/// Linux 5.3) from before the first signal: a pid that ends and is reused is not signalled again.
/// Never signals pid 0, 1 or this process. `clock` (os::Env's) times the waits.
EndedProcesses EndProcesses(const std::vector<pid_t>& pids, double grace_s, const Clock& clock);

}  // namespace gpulane::exec
