#pragma once
// `gpulane run --each FILE`: every command line of FILE (util/shell_words.h) run like `gpulane run`
// from one terminal, at most N at once, each in a child process of its own that goes through the
// whole lease-and-run lifecycle (exec::RunLeasedJob): its own place in the lease line, its own
// lease, its own clean-up. The parent only starts children, hears when each got its GPUs, reaps
// them and prints the progress (render/each_progress.h).
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "os/env.h"
#include "sched/request.h"
#include "util/clock.h"
#include "util/shell_words.h"

namespace gpulane::cli {

/// Runs one line in a child process: `argv` through the `gpulane run` lifecycle, writing
/// "granted <GPU indices, comma-separated>\n" to `report_fd` once its GPUs are leased (before the
/// command starts); returns the exit code `gpulane run` would.
using LineRunner = std::function<int(const std::vector<std::string>& argv, int report_fd)>;

/// How many lines run at once when -j is not given: the GPUs the request may use (all of the
/// machine's, or its --gpus) divided by its -g (at least 1), read by a short child process so that
/// this process never initialises NVML before it forks the lines; with -g 0 the CPU cores. 0 when
/// the GPUs cannot be read: the child has printed why, and *exit_code is its exit code (3 no
/// driver, 4 NVML, 2 a --gpus that names no GPU).
unsigned DefaultParallel(const sched::Request& request, const os::Env& env, int* exit_code);

/// Runs `commands` (in file order, at most `parallel` at once, `parallel` >= 1) with `run_line`.
/// SIGINT, SIGTERM and SIGHUP stop it from starting more lines; one sent to this process alone (not
/// by the terminal to the whole process group) is passed on to the running lines. Returns 0 when
/// every line exited 0; 128 + N when signal N stopped it; the code of a line that failed before its
/// GPUs were leased with a usage, driver or safety error (2, 3, 4, 7: every line would), after
/// which no more lines start; else kExitLinesFailed.
int RunEach(const std::vector<CommandLine>& commands, unsigned parallel, const LineRunner& run_line);

}  // namespace gpulane::cli
