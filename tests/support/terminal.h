#pragma once
// Running gpulane with its stdout on a pseudo-terminal, as a user at a terminal sees it: for what
// gpulane does only on a terminal (colour).
#include <string>
#include <vector>

#include "support/harness.h"

namespace gpulane::test {

/// Runs gpulane with `args` and the caller's environment plus `env` (as RunGpulane), stdout on a
/// new pseudo-terminal and stderr captured apart. `out` holds what reached the terminal (the
/// terminal turns "\n" into "\r\n"). Kills it after `timeout_s`.
RunResult RunGpulaneOnTerminal(const std::vector<std::string>& args, const Env& env, double timeout_s = 30);

/// As RunGpulaneOnTerminal, but with stderr on the pseudo-terminal: `out` holds what reached it,
/// `err` is empty and stdout is not kept. For what gpulane prints to stderr only on a terminal
/// (run --each's progress line).
RunResult RunGpulaneWithStderrOnTerminal(const std::vector<std::string>& args, const Env& env, double timeout_s = 30);

}  // namespace gpulane::test
