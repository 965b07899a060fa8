#pragma once
// `gpulane run --each FILE`: the words of its progress (pure: counts and times in, text out). On
// a terminal one status line is rewritten in place; without one, each line's start and end is a
// line of its own (cli/run_each.cc decides which).
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace gpulane {

/// Where the lines of a command file stand.
struct EachCounts {
  std::size_t total = 0;    ///< commands in the file
  std::size_t done = 0;     ///< ended with exit status 0
  std::size_t failed = 0;   ///< ended otherwise (exit status, signal, could not start)
  std::size_t running = 0;  ///< started on their GPUs
  std::size_t waiting = 0;  ///< started here, waiting for GPUs (their own place in the lease line)
  /// Not started at all yet: total - done - failed - running - waiting.
  std::size_t queued() const { return total - done - failed - running - waiting; }
};

/// Seconds until every line has ended, estimated from the mean run time of the lines that ended
/// (`finished_s`, seconds each): what the running lines (`running_s`: how long each has run) have
/// left of that mean, plus the mean for each line not yet running (`not_running`), spread over
/// `parallel` slots. nullopt before any line has ended (nothing to go by).
std::optional<double> EstimateEtaS(const std::vector<double>& finished_s, const std::vector<double>& running_s,
                                   std::size_t not_running, unsigned parallel);

/// "3/8 done, 4 running, 1 waiting, 0 failed, ETA 2m 10s" (ETA "unknown" without an estimate;
/// none once everything ended).
std::string EachProgressLine(const EachCounts& counts, std::optional<double> eta_s);

/// "8 lines: 7 done, 1 failed (lines 9)" / "8 lines: all 8 done": the last line. `failed_lines`
/// are file line numbers, in file order; at most 10 are named, then "...".
std::string EachSummaryLine(const EachCounts& counts, const std::vector<int>& failed_lines);

}  // namespace gpulane
