#pragma once
// Slurm's word on jobs, read in batches and mapped to gpulane's states. Pure functions.
//
// One poll is one `squeue -a -h --states=all -j ID,ID,... -O <kSqueueFormat>` for all of a user's
// unfinished jobs (every partition, finished jobs included: without --states=all a failed job just
// disappears and reads as completed), then `sacct` for those squeue no longer knows.
#include <optional>
#include <string>
#include <vector>

#include "util/result.h"

namespace gpulane::slurm {

/// squeue's --Format: fields separated by '|', one job (or array task) a line.
inline constexpr const char* kSqueueFormat =
    "JobArrayID:|,ArrayJobID:|,ArrayTaskID:|,JobID:|,State:|,Reason:|,exit_code:|,Partition:|,NodeList:|";
/// sacct's --format with --parsable2 (fields separated by '|').
inline constexpr const char* kSacctFormat = "JobID,State,ExitCode,Reason,Partition,NodeList";

/// One job or array task as Slurm reports it.
struct SlurmJobRow {
  std::string id;          ///< "1234", or "1234_5" for an array task ("1234_[6-9]" pending tasks)
  std::string job_id;      ///< Slurm's own id of this row ("1239" for task 1234_5)
  std::string state;       ///< Slurm's state: "PENDING", "RUNNING", "FAILED", "CANCELLED" ...
  std::string reason;      ///< "Resources", "Dependency", "None" ...
  std::optional<int> exit_code;    ///< the command's exit status when known
  std::optional<int> signal;       ///< the signal that ended it, when one did
  std::string partition, nodes;
};

/// squeue's rows. Errors: kInternal naming a line that does not have the expected fields.
Result<std::vector<SlurmJobRow>> ParseSqueue(const std::string& text);
/// sacct --parsable2 --noheader rows (job steps, "1234.batch", are skipped; "CANCELLED by 0" is
/// CANCELLED; ExitCode "3:0" is exit 3, "0:9" signal 9). Errors: kInternal for a malformed line.
Result<std::vector<SlurmJobRow>> ParseSacct(const std::string& text);

/// gpulane's view of a Slurm job.
struct JobView {
  std::string state;                 ///< gpulane's state name: pending, held, running, completed, failed, cancelled, timeout
  std::string reason;                ///< words for people ("" when none)
  std::optional<int> exit_code;      ///< the exit status gpulane reports (128+N for signal N)
  bool finished = false;             ///< it will never run (again): wait returns
  bool ran = false;                  ///< its command started (wait: 11 when it finished without)
};

/// Maps Slurm's state and reason to gpulane's:
///   PENDING (Resources, Priority, Dependency...) pending; PENDING/JobHeldUser|JobHeldAdmin held;
///   PENDING/DependencyNeverSatisfied finished without running ("its dependency failed");
///   CONFIGURING, RUNNING, COMPLETING, SUSPENDED, STAGE_OUT, RESIZING, SIGNALING running;
///   REQUEUED, REQUEUE_HOLD, REQUEUE_FED pending; COMPLETED completed; FAILED, OUT_OF_MEMORY,
///   NODE_FAIL (never running), BOOT_FAIL, DEADLINE, SPECIAL_EXIT failed; TIMEOUT timeout;
///   CANCELLED, PREEMPTED, REVOKED cancelled. Unknown states stay unfinished ("slurm: X").
/// An exit code is only read once the state is final: a late exit code is never a failure.
JobView MapSlurmState(const SlurmJobRow& row);

/// The view from the exit-code file the batch script wrote: completed for 0, failed otherwise.
/// `slurm_gone`: Slurm no longer lists the job (no accounting); else it has not caught up yet.
JobView ViewFromExitFile(int exit_code, bool slurm_gone);

}  // namespace gpulane::slurm
