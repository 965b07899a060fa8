#include "render/each_progress.h"

#include <algorithm>
#include <numeric>

#include <fmt/format.h>

#include "util/units.h"

namespace gpulane {

std::optional<double> EstimateEtaS(const std::vector<double>& finished_s, const std::vector<double>& running_s,
                                   std::size_t not_running, unsigned parallel) {
  if (finished_s.empty()) return std::nullopt;
  const double mean = std::accumulate(finished_s.begin(), finished_s.end(), 0.0) / static_cast<double>(finished_s.size());
  double work_s = mean * static_cast<double>(not_running);
  // A line's run cannot be split among slots: the estimate is at least the longest one left.
  double longest_left_s = not_running > 0 ? mean : 0;
  for (double ran : running_s) {
    const double left = std::max(0.0, mean - ran);
    work_s += left;
    longest_left_s = std::max(longest_left_s, left);
  }
  const std::size_t lines = running_s.size() + not_running;
  if (lines == 0) return 0.0;
  const double slots = static_cast<double>(std::min<std::size_t>(std::max(1u, parallel), lines));
  return std::max(work_s / slots, longest_left_s);
}

std::string EachProgressLine(const EachCounts& c, std::optional<double> eta_s) {
  std::string line = fmt::format("{}/{} done, {} running, {} waiting, {} failed", c.done, c.total, c.running,
                                 c.waiting + c.queued(), c.failed);
  if (c.done + c.failed == c.total) return line;
  return line + ", ETA " + (eta_s ? FormatSeconds(*eta_s) : std::string("unknown"));
}

std::string EachSummaryLine(const EachCounts& c, const std::vector<int>& failed_lines) {
  const std::string lines = fmt::format("{} line{}", c.total, c.total == 1 ? "" : "s");
  if (c.failed == 0 && c.done == c.total) return fmt::format("{}: all {} done", lines, c.total);
  std::string out = fmt::format("{}: {} done, {} failed", lines, c.done, c.failed);
  if (c.done + c.failed < c.total) out += fmt::format(", {} not run", c.total - c.done - c.failed);
  if (!failed_lines.empty()) {
    out += failed_lines.size() == 1 ? " (line " : " (lines ";
    for (std::size_t i = 0; i < failed_lines.size() && i < 10; ++i) out += fmt::format("{}{}", i ? ", " : "", failed_lines[i]);
    out += failed_lines.size() > 10 ? ", ...)" : ")";
  }
  return out;
}

}  // namespace gpulane
