#pragma once
// The Slurm jobs a user submitted through gpulane, remembered in their own state folder
// (<state>/slurm/jobs.jsonl, one JSON object a line, appended under flock), so that `queue`,
// `show`, `wait`, `logs` and `cancel` know them without asking Slurm for every job there is.
#include <string>
#include <vector>

#include "util/result.h"

namespace gpulane::slurm {

/// gpulane's notation for a Slurm job: "slurm:1234", an array task "slurm:1234_5".
inline constexpr const char* kIdPrefix = "slurm:";

/// Whether `word` names a Slurm job ("slurm:..."); `*slurm_id` gets what follows the prefix.
bool IsSlurmId(const std::string& word, std::string* slurm_id = nullptr);
/// Checks a Slurm id: digits, optionally "_" and a task's digits. Errors: kInvalidArgument.
Status CheckSlurmId(const std::string& slurm_id);

/// One submission.
struct RegisteredJob {
  std::string slurm_id;                  ///< sbatch's id ("1234"; an array's id for all its tasks)
  std::string name;
  std::vector<std::string> argv;
  std::string cwd;
  std::string output_pattern, error_pattern;  ///< as passed to sbatch ("slurm-%j.out")
  bool array = false;
  unsigned gpu_count = 0;
  double submit_time_s = 0;
};

/// The registry file of a state folder: <state_dir>/slurm/jobs.jsonl.
class JobRegistry {
 public:
  explicit JobRegistry(std::string state_dir);
  /// Appends a submission (the folder is created mode 0700). Errors: kIo.
  Status Add(const RegisteredJob& job) const;
  /// Every submission, oldest first; an unreadable line is skipped. Errors: kIo.
  Result<std::vector<RegisteredJob>> All() const;
  /// The folder the batch scripts write exit codes to (<state_dir>/slurm/exit).
  std::string ExitCodeDir() const;
  /// <state_dir>/slurm: scripts, the poll cache and its lock.
  std::string Dir() const { return dir_; }

 private:
  std::string dir_;
};

/// The folder, made if missing (mode 0700, parents too). Errors: kIo naming it.
Status MakeDirs(const std::string& dir);

}  // namespace gpulane::slurm
