#pragma once
// What a job's --notify sends and when (issue 11, item 4), for queued jobs' supervisors and
// `gpulane run` alike: the end of an attempt (end, fail), and the anomalies the daemon's sampler
// raised for the job while it runs (anomaly), asked for every kAnomalyPollS. Delivery is
// exec::SendDetached's: a detached process, as the job's user.
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "exec/job_runner.h"
#include "util/notify_target.h"

namespace gpulane::daemon {

/// How often a running job with --notify anomaly asks the daemon for its anomalies, seconds.
inline constexpr double kAnomalyPollS = 5;
/// The most anomaly notifications one job sends (a flapping condition must not flood anyone).
inline constexpr int kMaxAnomalyNotifications = 20;

/// A job as its notifications name it, and where they go.
struct NotifiedJob {
  std::string id;        ///< "12", "12_3", "r4121"
  std::string name;
  std::string user;
  std::string log_path;  ///< its log for people (the tail goes with each notification)
  std::optional<uid_t> uid;  ///< deliver as this user (set when running as root)
  std::optional<gid_t> gid;
  std::vector<std::string> env;  ///< the job's environment (the command gets it too)
  NotifyTarget target;
};

/// The line of an ended attempt: "gpulane: job 12 (train) of alice failed with exit code 1: ...".
/// `stopped_by_gpulane`: ended by a preemption or its partition's close (cancelled, not failed).
std::string EndMessage(const NotifiedJob& job, const exec::JobOutcome& ran, bool stopped_by_gpulane, const std::string& reason);

/// Sends "end" or "fail" for the attempt that ended with `ran`, when the target wants it.
void NotifyJobEnd(os::Spawner& spawner, const NotifiedJob& job, const exec::JobOutcome& ran, bool stopped_by_gpulane, const std::string& reason);

/// Sends each new anomaly of one job (the daemon's `events`, by job id), up to
/// kMaxAnomalyNotifications.
class AnomalyNotifier {
 public:
  /// Events raised before `since_s` (seconds since the epoch: the job's start) are not this run's.
  /// `spawner` starts the deliveries (exec/notify.h).
  AnomalyNotifier(os::Spawner& spawner, NotifiedJob job, double since_s)
      : spawner_(spawner), job_(std::move(job)), since_s_(since_s) {}
  /// The log the job writes to (known once it started).
  void SetLog(const std::string& path) { job_.log_path = path; }
  /// Asks the daemon (the first of daemon::SnapshotSockets that answers) for events since the
  /// last look and sends those of this job. Quick: one request.
  void Poll();

 private:
  os::Spawner& spawner_;
  NotifiedJob job_;
  double since_s_ = 0;
  std::int64_t last_id_ = 0;
  int sent_ = 0;
};

}  // namespace gpulane::daemon
