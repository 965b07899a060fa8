#pragma once
// How the daemon starts and signals a job's supervisor (`gpulane _supervise <jobs dir> <id>`,
// daemon/supervisor.h): behind an interface, so that the job table (daemon/job_table.h), its only
// caller, can be tested with a launcher that only records what it was asked to start and signal.
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "os/spawn.h"
#include "util/result.h"

namespace gpulane::daemon {

/// Starts and signals supervisors.
class SupervisorLauncher {
 public:
  virtual ~SupervisorLauncher() = default;
  /// Starts the supervisor of job `id`, whose spec file is already written, detached from the
  /// caller. Returns once it is on its way, not once it has taken the job's lock. Errors: kIo when
  /// no process could be started (fork failed).
  virtual Status Start(std::int64_t id) = 0;
  /// Sends `signal` to the supervisor of job `id`, process `pid` (as its status file reported
  /// it): SIGTERM for a cancel, HoldSignal() to leave the line for GPUs. A supervisor already gone
  /// is no error (it has written its last status, which the table reads).
  virtual void Signal(std::int64_t id, pid_t pid, int signal) = 0;
  /// Descriptors the started processes must not hold (the daemon's lock and listening socket),
  /// known once the daemon listens; a launcher that starts no process ignores them.
  virtual void CloseInChild(std::vector<int> /*fds*/) {}
  /// The soft RLIMIT_NOFILE the started processes get (0 leaves it); ignored likewise.
  virtual void ChildFileLimit(std::uint64_t /*soft_limit*/) {}
};

/// The real one: exec `self_exe _supervise jobs_dir id` started detached through `spawner`
/// (os/spawn.h: fork, setsid, fork again), so that the supervisor outlives the daemon and is
/// nobody's child but init's; its stdout and stderr go to `log_path` (appended), its stdin is
/// /dev/null.
class ForkExecLauncher final : public SupervisorLauncher {
 public:
  ForkExecLauncher(os::Spawner& spawner, std::string self_exe, std::string jobs_dir, std::string log_path)
      : spawner_(spawner),
        self_exe_(std::move(self_exe)), jobs_dir_(std::move(jobs_dir)), log_path_(std::move(log_path)) {}
  /// Descriptors closed in the child before anything else (the daemon's lock and listening
  /// socket: close-on-exec, but a copy held until the exec would keep a daemon restarted after a
  /// kill -9 from taking its lock).
  void CloseInChild(std::vector<int> fds) override { close_in_child_ = std::move(fds); }
  /// The soft RLIMIT_NOFILE (descriptors) the supervisor, and so its job, starts with: the one the
  /// daemon was started with, before it raised its own for client connections; 0 leaves it.
  void ChildFileLimit(std::uint64_t soft_limit) override { child_file_limit_ = soft_limit; }
  Status Start(std::int64_t id) override;
  /// kill(2).
  void Signal(std::int64_t id, pid_t pid, int signal) override;

 private:
  os::Spawner& spawner_;
  std::string self_exe_, jobs_dir_, log_path_;
  std::vector<int> close_in_child_;
  std::uint64_t child_file_limit_ = 0;
};

}  // namespace gpulane::daemon
