#pragma once
// The one OS touchpoint of slurm/: running Slurm's client commands (sbatch, squeue, sacct, scancel,
// scontrol, sinfo) with an argv, never through a shell. RealCommandRunner runs them; tests use a
// fake that answers from a script, so translation, polling and state mapping are unit-tested.
#include <string>
#include <vector>

#include "util/result.h"

namespace gpulane::slurm {

/// What a finished command printed and how it exited.
struct CommandOutput {
  int exit_code = 0;    ///< its exit status; 128+N when killed by signal N
  std::string stdout_text;
  std::string stderr_text;
};

/// Runs a command given as argv (argv[0] looked up on PATH) and collects its output.
class CommandRunner {
 public:
  virtual ~CommandRunner() = default;
  /// Errors: kUnavailable when the program is not found or cannot be started (naming it and the
  /// package to install); kIo when its output cannot be read. A non-zero exit is not an error here.
  virtual Result<CommandOutput> Run(const std::vector<std::string>& argv) = 0;
};

/// posix_spawnp with stdin from /dev/null and both outputs through pipes.
class RealCommandRunner : public CommandRunner {
 public:
  Result<CommandOutput> Run(const std::vector<std::string>& argv) override;
};

/// "squeue failed (exit 1): <its first stderr line>": one line for an error message.
std::string DescribeFailure(const std::vector<std::string>& argv, const CommandOutput& output);

}  // namespace gpulane::slurm
