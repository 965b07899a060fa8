#pragma once
// `gpulane status --watch`'s text frames, for commands that fall back to them (`gpulane top`
// without a terminal).
#include <string>

#include "os/env.h"

namespace gpulane::cli {

/// Prints `gpulane status`'s text every `interval_s` seconds (colour by `color`: "auto" (a terminal
/// without NO_COLOR), "always" or "never"; redrawn in place on a terminal, one frame after the other
/// otherwise) until SIGINT or SIGTERM, or until `frames` frames were printed (0: no limit). Returns
/// the exit code: kExitOk, or the error's when the GPUs cannot be read.
int WatchStatus(double interval_s, long frames, const std::string& color, const os::Env& env);

}  // namespace gpulane::cli
