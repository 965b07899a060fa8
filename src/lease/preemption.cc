#include "lease/preemption.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "lease/claimed_line.h"
#include "lease/decision_inputs.h"
#include "lease/occupancy.h"
#include "util/strings.h"

namespace gpulane::lease {

std::optional<std::string> PreemptionOf(const DirContents& contents, const GpuSnapshot& snapshot, ProcessTable& processes,
                                        const std::string& own_lease, const WaitRequest& w, double now_s,
                                        std::map<std::string, double>& first_seen_free_s, sched::LineMemory& unclaimed) {
  if (TicketsOfLine(contents.tickets, "").empty()) return std::nullopt;  // nobody waits
  std::vector<LeaseRecord> leases = contents.leases;
  std::vector<std::string> own_uuids;
  for (LeaseRecord& lease : leases) {
    if (!IsNamed(lease, own_lease)) continue;
    lease.preemptible = true;  // its holder knows its job is preemptible, whatever the file says
    for (const LeasedGpu& g : lease.gpus) own_uuids.push_back(g.uuid);
  }
  if (own_uuids.empty()) return std::nullopt;  // not leased any more
  // As a waiter of the machine's line decides (lease/decision_inputs.h).
  auto in = GatherDecisionInputs(leases, contents.tickets, snapshot, processes, w, now_s, first_seen_free_s);
  if (!in) return std::nullopt;  // the machine's line has no parent to lose
  const std::vector<TicketRecord>& line = in->view.tickets;
  // A ticket that did not claim what it was granted preempts nobody (sched/unclaimed.h).
  const LineDecision decided = DecideLine(in->view.occupancy, line, in->limits, unclaimed, std::nullopt, now_s, w.max_unclaimed_s);
  const std::vector<sched::Decision>& decisions = decided.decisions;
  for (std::size_t k = 0; k < decisions.size(); ++k) {
    for (unsigned i : decisions[k].preempt) {
      if (i >= snapshot.devices.size()) continue;
      if (std::find(own_uuids.begin(), own_uuids.end(), snapshot.devices[i].uuid) == own_uuids.end()) continue;
      const sched::Request& r = line[k].request;
      // The job by its id when its ticket names it (TicketRecord::job_text), as `status` does.
      const std::string job = line[k].job_text.empty() ? "job" : "job " + line[k].job_text;
      return fmt::format("preempted: {}'s {} ({} in line) needs GPU{}", r.user.empty() ? std::string("another user") : r.user,
                         job, Ordinal(decisions[k].position), i);
    }
  }
  return std::nullopt;
}

}  // namespace gpulane::lease
