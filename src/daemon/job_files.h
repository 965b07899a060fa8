#pragma once
// The files through which the daemon and a job's supervisor hand the job over, in <state>/jobs/:
//   <id>.spec.json    the job (written by the daemon before the supervisor starts; 0600)
//   <id>.lock         held (flock) by the supervisor for its whole life: its liveness
//   <id>.status.json  what the supervisor last reported: waiting, running, done (written atomically)
// They let a job outlive a daemon restart: the supervisor records the exit status even while no
// daemon runs, and a restarted daemon reads it back.
#include <signal.h>
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "store/job.h"
#include "util/result.h"

namespace gpulane::daemon {

/// What a supervisor reports.
struct SupervisorStatus {
  std::string phase = "waiting";  ///< "waiting" (for GPUs), "running", "done"
  pid_t pid = 0;                  ///< the supervisor
  std::string reason;             ///< waiting: why; done: what went wrong, if anything
  std::vector<std::string> gpu_uuids;
  std::optional<double> start_time, end_time;
  std::optional<int> exit_code;
  bool timed_out = false;
  bool interrupted = false;       ///< ended by a signal before the job started (cancel)
  bool start_failed = false;      ///< the command could not be started
  bool held = false;              ///< gave up its place in line on `gpulane hold`, never started
  store::JobLogs logs;            ///< running, done: the files the job's output goes to, once opened
};

/// The signal the daemon sends a supervisor that waits for GPUs when its job is held: leave the
/// line without starting the job. Ignored once the job runs (never forwarded to it).
inline int HoldSignal() { return SIGRTMIN + 1; }

class JobFiles {
 public:
  JobFiles(std::string dir, std::int64_t id) : dir_(std::move(dir)), id_(id) {}
  std::string spec_path() const;
  std::string status_path() const;
  std::string lock_path() const;

  /// Writes the spec (the whole job, with its environment), mode 0600, durably.
  Status WriteSpec(const store::Job& job) const;
  Result<store::Job> ReadSpec() const;
  /// Replaces the status atomically (temp file, rename); the final "done" status is also flushed to
  /// disk (fsync of file and folder). After a power loss a job whose "running" record was lost is
  /// queued again, as one that was interrupted.
  Status WriteStatus(const SupervisorStatus& status) const;
  /// nullopt when there is none yet.
  std::optional<SupervisorStatus> ReadStatus() const;
  /// True while a supervisor holds the lock.
  bool SupervisorAlive() const;
  /// Removes all three files.
  void Remove() const;
  /// Removes the status file alone.
  void RemoveStatus() const;

 private:
  std::string dir_;
  std::int64_t id_;
};

/// The job id of a file name in the jobs folder ("12.status.json" -> 12), or nullopt.
std::optional<std::int64_t> JobIdOfFile(const std::string& name);

}  // namespace gpulane::daemon
