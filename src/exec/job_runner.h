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

#include "exec/device_isolation.h"
#include "os/env.h"
#include "util/clock.h"
#include "util/result.h"

namespace gpulane::exec {

/// What to run.
struct JobSpec {
  std::vector<std::string> argv;  ///< argv[0] is looked up in PATH (of `env`) when it has no '/'
  std::vector<std::string> env;   ///< the whole environment, "KEY=VALUE"
  double kill_grace_s = 10;       ///< between SIGTERM and SIGKILL for what the job leaves behind
  std::vector<int> keep_fds;      ///< descriptors the job inherits besides 0, 1, 2 (the lease)
  std::string cwd;                ///< working directory ("" = unchanged), entered with the job's rights
  /// "" = inherit; else opened with the job's rights, appending (O_APPEND), never through a final
  /// symlink, never blocking (a FIFO is refused at once), never as a controlling terminal; only a
  /// regular file or /dev/null is accepted.
  std::string stdout_path;
  /// stdout_path is a default name: create a new file there (O_EXCL), never append to one that
  /// existed before; when the name is taken, the first free of <stem>.1<ext>, <stem>.2<ext>, ...
  /// ("gpulane-12.out" -> "gpulane-12.1.out"). OpenedLogs says which was used.
  bool stdout_new_file = false;
  std::string stderr_path;        ///< "" = inherit, or the same path as stdout to share one file
  std::optional<std::uint32_t> uid, gid;  ///< run as this user (needs root): setgroups, setgid, setuid, checked
  std::optional<double> time_limit_s;     ///< SIGTERM at the limit, SIGKILL kill_grace_s later
  /// Stopped this many seconds after its start as at a time limit (its partition closes, see
  /// sched::StopOf), unless the time limit comes first; JobOutcome::stopped says it was.
  std::optional<double> stop_in_s;
  /// Called every `tick_s` seconds while the job runs (0: never), from the runner's own loop (a
  /// look at the GPUs the job uses: exec/leased_job.h). Returning true stops the job now as at a
  /// time limit (SIGTERM, kill_grace_s, SIGKILL; JobOutcome::stopped), e.g. a preemption.
  std::function<bool()> on_tick;
  double tick_s = 0;
  /// >= 0: a descriptor (close-on-exec, so the job never gets it) through which the forked child
  /// overwrites the first byte with '1' right before its execve, and with '0' again when execve
  /// fails: the evidence that the command may have started, which outlives a supervisor killed
  /// between its fork and the exec (daemon/job_files.h, the exec mark). When that write fails the
  /// command is not started (exec_failed).
  int exec_mark_fd = -1;
  /// Called in the parent right after the fork, with the child's pid, before the child's reports
  /// are read (the test fault point "forked" of the supervisor: daemon/supervisor.cc).
  std::function<void(pid_t)> on_forked;
  /// Device isolation (exec/device_isolation.h), carried out by the forked child as root before it
  /// becomes the job's user; nullopt: none.
  std::optional<IsolationPlan> isolation;
  /// What about the job's isolation cannot be done, known before the fork, as in "cannot <this>"
  /// ("isolate the job's GPUs: ..."); "" = nothing known against it.
  std::string isolation_failure;
  /// A job that cannot be isolated (isolation_failure, or a step of `isolation` that fails) fails
  /// to start (exit 126) instead of starting with a warning.
  bool isolation_required = false;
  /// How long planning `isolation` took in the spawner, microseconds (-1: unknown), for the timing
  /// split (GPULANE_ISOLATE_TIMING=1).
  long long isolation_plan_us = -1;
  /// Called in the spawner once the child's reports are read (before on_logs), with whether the
  /// isolation plan was carried out and, when isolation was not applied though asked for, why
  /// ("cannot ...": the same words as the warning or the failure).
  std::function<void(bool applied, const std::string& not_applied)> on_isolated;
  /// Warnings for the job's owner about its start (one line each), called once its logs are open.
  std::function<void(const std::string&)> on_warning;
};

/// The log files a job's command writes to, as they were opened.
struct OpenedLogs {
  std::string stdout_path, stderr_path;  ///< the files used ("" = inherited), absolute when given so
  std::uint64_t stdout_offset = 0;       ///< where the job's output starts: the size an appended file had
  std::uint64_t stderr_offset = 0;
};

/// The value (sigqueue) that marks a stop signal as a cancel: the daemon sends a cancel's SIGTERM
/// to a job's supervisor with it (daemon/launcher.cc), so the job's log can say it was cancelled.
inline constexpr int kCancelSignalValue = 0x67706c63;

/// How a job ended.
struct JobOutcome {
  int exit_code = 0;            ///< exit status, or 128 + signal number when killed by a signal
  bool exec_failed = false;     ///< the command could not be started (exit_code 126 or 127)
  std::string exec_error;       ///< why, for the message
  std::set<pid_t> pids;         ///< every process of the job seen (for the GPU check afterwards)
  int leftovers_terminated = 0; ///< processes still running after the main one ended
  int leftovers_killed = 0;     ///< of those, how many needed SIGKILL
  bool timed_out = false;       ///< ended by its time limit
  bool stopped = false;         ///< ended by JobSpec::stop_in_s or by JobSpec::on_tick
  /// The first stop signal (SIGINT, SIGTERM, SIGHUP) RunJob got and forwarded to the job's process
  /// group (0: none), who sent it, and whether its sender marked it as a cancel (sigqueue with
  /// kCancelSignalValue, as the daemon's cancel does).
  int stop_signal = 0;
  pid_t stop_signal_sender = 0;
  bool stop_signal_cancel = false;
  OpenedLogs logs;              ///< the logs it wrote (also when the command then could not be started)
};

/// Runs `spec` to the end: forks, puts the job in its own process group (and in the terminal's
/// foreground when gpulane has it), forwards SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2
/// to the job's process group, and reaps the whole tree. `on_started(pid)` is called once the job
/// runs (to record its process group); `on_logs(logs)` before that, once the job's logs are open
/// (also when the command then fails to start). Blocks until every process of the job is gone.
/// A log that cannot be opened fails the start (exec_failed, exit code 126) with exec_error naming
/// the file and why. `env`'s clock times the ticks, the time limit and the kill grace; its spawner
/// starts the job. Errors: kIo when fork fails.
Result<JobOutcome> RunJob(const JobSpec& spec, const os::Env& env, const std::function<void(pid_t)>& on_started,
                          const std::function<void(const OpenedLogs&)>& on_logs = {});

}  // namespace gpulane::exec
