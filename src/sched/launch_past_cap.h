#pragma once
// Launching past the cap: which of the queued jobs that sched::PlanLaunches leaves waiting by
// daemon.max_waiting (LaunchPlan::capped) start anyway, because the lease line would grant them GPUs
// at once without delaying any request waiting there. Pure, like the rest of sched/: the daemon
// passes the line's inputs as every decider gathers them (lease/decision_inputs.h), the simulator
// its own; both call this.
//
// Why: jobs past the cap wait in the daemon's queue, where the lease line's backfill never sees
// them, so a small job that fits on GPUs free right now waited behind bigger jobs waiting in the
// line (docs/simulate-results.md measures what that cost).
//
// Rules:
//  - Candidates: the jobs the cap left out (ready, GPU, not preemptible), in line order. Preemptible
//    jobs keep their own cap and CPU-only jobs are never capped (sched/launch.h).
//  - A candidate is launched past the cap when the lease line, with it placed last (behind every
//    request waiting there and every candidate launched before it in this decision), grants it GPUs
//    now: sched::GrantsBehindLine, the line's own rules (reservations, backfill, the policy, users'
//    max_gpus). Placed last, it gets no GPU that a request waiting there is granted or holds, unless
//    by backfill (its time limit ends before that reservation starts): it delays none of them, the
//    head included.
//  - A launched candidate's GPUs count as taken for the candidates after it: two are never counted
//    on the same free GPU.
//  - Never launched past the cap: a job that names GPUs (--gpus), a partition or a MIG device (its
//    supervisor resolves those against the machine and the clock; this decision does not).
//  - Unknown is not free: without the line's inputs (the GPUs or the lease directory unread) the
//    caller launches nothing past the cap.
//  - Its supervisor's ticket then takes its place by the line order (sched/line_order.h): one that
//    the order puts before a waiting request (a higher --priority or fair share) is judged before it
//    there, as a job launched under the cap would be.
#include <cstdint>
#include <span>
#include <vector>

#include "sched/policy.h"
#include "sched/request.h"

namespace gpulane::sched {

/// The lease line now, as one decision of it reads it.
struct LineNow {
  std::vector<GpuState> gpus;  ///< index i at position i
  std::vector<Request> line;   ///< the requests waiting there, first in line first
  Limits limits;               ///< the decision's settings (now_s for backfill)
  std::vector<MigUnit> mig_units;
};

/// A job the cap left waiting (LaunchPlan::capped) with what it asks for.
struct CappedJob {
  std::int64_t id = 0;
  Request request;
};

/// Whether `request` may be decided here at all (the rules above: GPUs, not preemptible, no --gpus,
/// partition or MIG device).
bool MayLaunchPastCap(const Request& request);

/// Of `capped` (in line order), the ids of those launched past the cap, in that order.
std::vector<std::int64_t> LaunchPastCap(const LineNow& line, std::span<const CappedJob> capped);

}  // namespace gpulane::sched
