#include "sched/preemption.h"

namespace gpulane::sched {

bool GivesWay(const Request& r, unsigned max_preemptions_per_job) {
  return r.preemptible != Preemptible::kNo && r.preemptions < max_preemptions_per_job;
}

std::vector<int> WantedByWaiters(const std::vector<GpuState>& gpus, std::span<const Request> line, const Limits& limits,
                                 std::span<const MigUnit> mig_units) {
  std::vector<Request> firm;
  std::vector<int> place;
  bool any_preemptible = false;
  for (std::size_t k = 0; k < line.size(); ++k) {
    if (line[k].preemptible != Preemptible::kNo) any_preemptible = true;
    else if (line[k].mig_profile.empty()) {  // a MIG device's GPU takes no whole-GPU request anyway
      firm.push_back(line[k]);
      place.push_back(static_cast<int>(k));
    }
  }
  if (!any_preemptible || firm.empty()) return {};
  Limits without = limits;
  without.grants_only = false;  // its early end would skip the preemptions
  const std::vector<Decision> decisions = Schedule(gpus, firm, without, mig_units);
  std::vector<int> wanted(gpus.size(), -1);
  for (std::size_t k = 0; k < decisions.size(); ++k) {
    const Decision& d = decisions[k];
    if (!d.granted && d.preempt.empty()) continue;
    for (unsigned i : d.gpus)
      if (i < wanted.size() && wanted[i] < 0) wanted[i] = place[k];
  }
  return wanted;
}

}  // namespace gpulane::sched
