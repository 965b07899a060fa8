#pragma once
// `--watch` for the commands that have it (`status`, `queue`): a frame every interval, redrawn in
// place on a terminal, until Ctrl-C.
#include <functional>
#include <string>
#include <variant>

namespace gpulane::cli {

/// Writes the frame `render` makes every `interval_s` seconds until SIGINT or SIGTERM, or until
/// `frames` frames were written (0: no limit). With `redraw` (a terminal) each frame replaces the
/// last (home, each line cleared to its end, then the rest of the screen cleared); else they follow
/// one another. `render(first)` returns the frame's text, or the exit code of a failure it has
/// reported (on stderr), which ends the watch. Returns kExitOk, or that exit code.
using Frame = std::variant<std::string, int>;
int WatchFrames(double interval_s, long frames, bool redraw, const std::function<Frame(bool first)>& render);

}  // namespace gpulane::cli
