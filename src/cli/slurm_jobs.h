#pragma once
// Slurm jobs in gpulane's commands (issue 12, items 1-2; docs/slurm.md): `submit --cluster slurm`
// (slurm/sbatch.h), and `queue`, `show`, `wait`, `logs`, `cancel`, `hold`, `release` of jobs named slurm:ID, read
// through the user's shared, rate-bounded poll (slurm/poller.h).
#include <string>
#include <vector>

#include "sched/request.h"

namespace gpulane::cli {

/// What `submit --cluster slurm` was given.
struct SlurmSubmitArgs {
  sched::Request request;               ///< RequestOptions::ToClusterRequest
  std::string name, after, after_any, array, output, error;
  bool hold = false;
  std::vector<std::string> command;
};

/// Translates and submits with sbatch; prints "slurm:<id>" on stdout. Returns the exit code.
int SubmitToSlurm(const SlurmSubmitArgs& args);

/// Splits job-id words into Slurm ones ("slurm:12", prefix removed) and the rest (local).
void SplitSlurmIds(const std::vector<std::string>& words, std::vector<std::string>* slurm, std::vector<std::string>* local);

int ShowSlurmJob(const std::string& slurm_id, bool as_json);
int WaitSlurmJobs(const std::vector<std::string>& slurm_ids);
int SlurmLogs(const std::string& slurm_id, bool follow, bool err);
int CancelSlurmJobs(const std::vector<std::string>& slurm_ids);
/// `hold` (`hold` true) or `release` of waiting Slurm jobs: `scontrol hold|release ID,ID`. A running
/// or ended job is refused with a warning (exit code 12, wrong state); the others are still held
/// or released. Returns the exit code.
int HoldSlurmJobs(const std::vector<std::string>& slurm_ids, bool hold);
/// The user's unfinished Slurm jobs (all with `all`) as queue table rows (`as_json`: JSON objects
/// as `queue --json` lists them, each indented for its list); "" when there are none. Errors are
/// printed as warnings: the local queue is shown whatever Slurm does.
std::vector<std::string> SlurmQueueRows(bool all, bool as_json);

}  // namespace gpulane::cli
