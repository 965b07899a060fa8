#pragma once
// Who goes first: the one order of every line gpulane keeps (the daemon's queue, sched::
// PlanLaunches; the lease directory's line of `gpulane run` requests and queued jobs' supervisors,
// lease/line_shares.h; the simulator's queue, sim/simulator.h). Pure: the callers compute the keys.
//
// The rule, compared in this order:
//  1. --priority class: higher first (users may only lower theirs; admins raise it).
//  2. Within a class, the line priority: higher first. With fair share it is sched::PriorityOf's
//     value (the user's fair-share factor and the job's age in line, sched/fairshare.h); without
//     (no factors published, a policy other than the default in the simulator) it is 0 for all.
//  3. Arrival: earlier first. The daemon's job id (it numbers jobs in the order it accepts them),
//     a ticket's seq (nanoseconds since the epoch of its request), the simulator's submission index.
//  4. Name: a last tie-break for two arrivals at the same instant ("" for callers whose arrival is
//     already unique; a ticket's file name stem).
#include <cstdint>
#include <string_view>

namespace gpulane::sched {

/// One waiting request's place, as the rule above reads it.
struct LineKey {
  int priority = 0;            ///< --priority class, higher first
  double line_priority = 0;    ///< fair share and age within the class, higher first (0 without)
  std::uint64_t arrival = 0;   ///< earlier (smaller) first
  std::string_view name;       ///< last tie-break, smaller first
};

/// True when `a` stands before `b` in line (a strict weak ordering for finite line priorities).
bool LineBefore(const LineKey& a, const LineKey& b);

}  // namespace gpulane::sched
