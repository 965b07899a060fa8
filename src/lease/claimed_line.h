#pragma once
// The line's decision as one decider makes it, with the rule that no holder keeps what it does not
// use (sched/unclaimed.h): a ticket this decider has seen granted and unclaimed for
// sched.max_unclaimed is decided last, reserving nothing and preempting nobody; and each user's
// hold of idle GPUs counted across her tickets (sched/reserve_idle.h). The waiter
// (lease/waiter.h) and a preemptible job's holder (lease/preemption.h) decide through it.
#include <cstddef>
#include <optional>
#include <vector>

#include "lease/occupancy.h"
#include "lease/records.h"
#include "sched/policy.h"
#include "sched/unclaimed.h"

namespace gpulane::lease {

struct LineDecision {
  /// One per ticket, in the order of the tickets given (decisions[i] is tickets[i]'s).
  std::vector<sched::Decision> decisions;
  /// The order they were decided in (indices into the tickets): the demoted ones last.
  std::vector<std::size_t> order;
  /// When a ticket seen granted and not claimed loses its place if it still has not claimed.
  std::optional<double> recheck_at_s;
};

/// Decides `tickets` (in line order) over `occupancy` under `limits` at `now_s`, remembering grants
/// and the users' holds of idle GPUs in `watch`. `self`: the decider's own ticket's index (never demoted), if it has one.
LineDecision DecideLine(const Occupancy& occupancy, const std::vector<TicketRecord>& tickets, const sched::Limits& limits,
                        sched::LineMemory& watch, std::optional<std::size_t> self, double now_s,
                        double max_unclaimed_s);

}  // namespace gpulane::lease
