#include "sched/launch_past_cap.h"

#include <algorithm>

namespace gpulane::sched {

bool MayLaunchPastCap(const Request& request) {
  return request.count > 0 && request.preemptible == Preemptible::kNo && request.gpu_list.empty() &&
         request.partition.empty() && request.mig_profile.empty();
}

std::vector<std::int64_t> LaunchPastCap(const LineNow& line, std::span<const CappedJob> capped) {
  std::vector<std::int64_t> launch;
  std::vector<Request> behind;
  std::vector<std::int64_t> ids;
  for (const CappedJob& job : capped) {
    if (!MayLaunchPastCap(job.request)) continue;
    behind.push_back(job.request);
    ids.push_back(job.id);
  }
  // A GPU leased whole, or never usable, is granted to nobody now: with every GPU so, nothing is.
  const bool none_open = std::none_of(line.gpus.begin(), line.gpus.end(),
                                      [](const GpuState& g) { return g.usable && !g.exclusive_holder; });
  if (behind.empty() || none_open) return launch;
  // One pass: a candidate that would wait reserves nothing, so it changes nothing for those after it.
  const std::vector<Decision> decisions = GrantsBehindLine(line.gpus, line.line, behind, line.limits, line.mig_units);
  for (std::size_t k = 0; k < decisions.size(); ++k)
    if (decisions[k].granted) launch.push_back(ids[k]);
  return launch;
}

}  // namespace gpulane::sched
