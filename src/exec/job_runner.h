#pragma once
// Starting a job and ending it cleanly: exec the command directly (no shell), forward signals, and
// when its main process ends, terminate everything it left behind (its process group and the
// descendants that escaped it with setsid, caught by making gpulane a child subreaper): SIGTERM, a
// grace period, then SIGKILL. Same role as Slurm's slurmstepd for one job.
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "util/result.h"

namespace gpulane::exec {

/// What to run.
struct JobSpec {
  std::vector<std::string> argv;  ///< argv[0] is looked up in PATH (of `env`) when it has no '/'
  std::vector<std::string> env;   ///< the whole environment, "KEY=VALUE"
  double kill_grace_s = 10;       ///< between SIGTERM and SIGKILL for what the job leaves behind
  std::vector<int> keep_fds;      ///< descriptors the job inherits besides 0, 1, 2 (the lease)
  std::string cwd;                ///< working directory ("" = unchanged), entered with the job's rights
  std::string stdout_path;        ///< "" = inherit; else opened (append, O_NOFOLLOW) with the job's rights
  std::string stderr_path;        ///< "" = inherit, or the same path as stdout to share one file
  std::optional<std::uint32_t> uid, gid;  ///< run as this user (needs root): setgroups, setgid, setuid, checked
  std::optional<double> time_limit_s;     ///< SIGTERM at the limit, SIGKILL kill_grace_s later
};

/// How a job ended.
struct JobOutcome {
  int exit_code = 0;            ///< exit status, or 128 + signal number when killed by a signal
  bool exec_failed = false;     ///< the command could not be started (exit_code 126 or 127)
  std::string exec_error;       ///< why, for the message
  std::set<pid_t> pids;         ///< every process of the job seen (for the GPU check afterwards)
  int leftovers_terminated = 0; ///< processes still running after the main one ended
  int leftovers_killed = 0;     ///< of those, how many needed SIGKILL
  bool timed_out = false;       ///< ended by its time limit
};

/// Runs `spec` to the end: forks, puts the job in its own process group (and in the terminal's
/// foreground when gpulane has it), forwards SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2
/// to the job's process group, and reaps the whole tree. `on_started(pid)` is called once the job
/// runs (to record its process group). Blocks until every process of the job is gone.
/// Errors: kIo when fork fails.
Result<JobOutcome> RunJob(const JobSpec& spec, const std::function<void(pid_t)>& on_started);

}  // namespace gpulane::exec
