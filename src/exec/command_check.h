#pragma once
// Whether a job's command can be executed at all, checked before anything waits for GPUs:
// `gpulane run -- nonexistent-cmd` once waited for its GPUs (minutes, hours) only to exit 127.
#include <optional>
#include <string>
#include <vector>

namespace gpulane::exec {

/// Why a command cannot be executed, as a shell would say it.
struct CommandProblem {
  int exit_code = 127;  ///< 127: not found; 126: found but not executable (a directory, no x bit)
  std::string message;  ///< "cannot run 'trian.py': not found in PATH (/usr/local/bin:/usr/bin:/bin)"
};

/// Checks `argv0` as the job runner will execute it (exec/job_runner: looked up in the PATH of
/// `env`, the job's environment, unless it contains a '/'; relative names and PATH entries taken
/// from `cwd`, the job's directory), with this process's permissions. nullopt when some candidate
/// is an executable regular file. Only a check: the file may still change before the job runs.
std::optional<CommandProblem> CheckCommand(const std::string& argv0, const std::vector<std::string>& env,
                                           const std::string& cwd);

}  // namespace gpulane::exec
