#pragma once
// Reading the state of a user's Slurm jobs at a bounded rate, shared by all of the user's gpulane
// processes: one poll is one squeue call for every unfinished job of the user (and one sacct call
// for those squeue no longer lists, or the batch scripts' exit-code files when Slurm keeps no
// accounting). Its result is kept in <state>/slurm/poll.json under <state>/slurm/poll.lock (flock):
// a process that finds it younger than the poll interval reads it instead of asking Slurm, so a
// hundred `gpulane wait` clients make about 60 / interval calls a minute between them.
#include <string>
#include <vector>

#include "slurm/command_runner.h"
#include "slurm/job_registry.h"
#include "slurm/job_state.h"
#include "util/clock.h"
#include "util/result.h"

namespace gpulane::slurm {

/// One job or array task as gpulane shows it.
struct PolledJob {
  std::string id;          ///< Slurm's notation: "1234", "1234_5", "1234_[6-9]" (pending tasks)
  std::string parent;      ///< the registered (submitted) id it belongs to: "1234"
  std::string job_id;      ///< Slurm's own id of the row (sbatch's %j: "1239" for task 1234_5)
  std::string slurm_state; ///< Slurm's own word ("PENDING"; "" when read from an exit-code file)
  std::string partition, nodes;
  JobView view;
  /// Slurm's final word, or Slurm no longer knows the job: never asked about again. A job ended
  /// by its exit-code file alone is finished (wait returns) but not confirmed until the next poll.
  bool confirmed = false;
};

/// How often Slurm is asked at most.
struct PollSettings {
  double interval_s = 5;         ///< [slurm] poll_interval: a poll younger than this is reused
  double new_job_interval_s = 1; ///< a job the last poll did not cover waits at most this long
};

class Poller {
 public:
  Poller(CommandRunner& runner, const Clock& clock, JobRegistry registry, PollSettings settings);
  /// The rows of `jobs` (registered submissions; an array's tasks each), from the shared poll
  /// when it is fresh enough, else after polling Slurm about every unfinished job in the registry
  /// (and `jobs`). A job submitted since the last poll has no rows until the next one, at most
  /// new_job_interval_s away. A job whose batch script wrote its exit
  /// code is finished with that code at once (no Slurm call needed). Errors: kUnavailable when
  /// squeue cannot be run or fails for another reason than unknown ids; kIo for the cache.
  Result<std::vector<PolledJob>> Poll(const std::vector<RegisteredJob>& jobs);
  /// Marks the shared poll out of date, so that the next Poll asks Slurm whatever its age: after
  /// this user changed jobs (scancel, scontrol hold|release), the next `queue` shows the change.
  /// Errors: kIo for the cache.
  Status Invalidate();
  /// How many Slurm commands this poller ran (tests, benchmarks).
  int slurm_calls() const { return calls_; }

 private:
  Result<std::vector<PolledJob>> AskSlurm(const std::vector<std::string>& ids);
  /// The rows the batch scripts' exit-code files give (`slurm_gone`: Slurm no longer knows the job).
  std::vector<PolledJob> FromExitFiles(const std::string& id, bool array, bool slurm_gone) const;

  CommandRunner& runner_;
  const Clock& clock_;
  JobRegistry registry_;
  PollSettings settings_;
  int calls_ = 0;
};

/// "1234,1240": ids joined for squeue -j and sacct -j.
std::string JoinIds(const std::vector<std::string>& ids);

}  // namespace gpulane::slurm
