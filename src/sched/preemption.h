#pragma once
// Preemption's hysteresis (issue 23, item 5): without it, preemptible jobs of a user ahead in the
// fair-share line took back every GPU a preemption freed, were preempted again, and the jobs that
// are not preemptible never started (221 restarts in 9 minutes). Pure, like the rest of sched/:
// sched::Schedule applies the line rules below for every decision (pick, run, queued jobs'
// supervisors, and a preemptible job's holder asking whether to give way, lease/preemption.h);
// sched::PlanLaunches applies the launch rule; the supervisor applies the bound per job.
//
// Rules:
//  - A preemptible request never takes a GPU that a request in the line that is not preemptible
//    would start on now, or would preempt for (WantedByWaiters: the decision of the line without
//    its preemptible requests). Starting there would only be preempted again at once.
//  - A preemptible request whose job gave way before (Request::preemptions > 0) does not take a GPU
//    reserved for a waiting request that is not preemptible either (a first-time one may, until
//    that request can start): a job preempted for another is not restarted on a GPU while a job
//    that is not preemptible waits for it.
//  - The daemon hands such a job to a supervisor again only while no job that is not preemptible
//    is kept out of the line by daemon.max_waiting (RelaunchHeldBack).
//  - Bounded per job: a job preempted sched.max_preemptions_per_job times is not preempted again
//    (GivesWay): its next attempt's lease is not preemptible and it runs to its end; it still
//    yields in the line as above (it takes only GPUs nobody else waits for).
// So with any number of preemptible jobs ahead, a job that is not preemptible waits for at most
// one preemption per GPU it needs (each holder's grace), never for a preemptible job restarted on
// its GPUs (tests/unit/preemption_hysteresis_test.cc states and checks the bound).
#include <span>
#include <vector>

#include "sched/policy.h"
#include "sched/request.h"

namespace gpulane::sched {

/// sched.max_preemptions_per_job's default.
inline constexpr unsigned kDefaultMaxPreemptionsPerJob = 3;
/// Its largest accepted value.
inline constexpr unsigned kMaxPreemptionsPerJobLimit = 1000;

/// Whether the job of `r` gives way to waiting jobs now: preemptible, and preempted fewer than
/// `max_preemptions_per_job` times so far (Request::preemptions).
bool GivesWay(const Request& r, unsigned max_preemptions_per_job);

/// For each GPU of `gpus`, the 0-based place in `line` of the first request that is not
/// preemptible and that the decision of the line without its preemptible requests grants that GPU
/// or names it for a preemption; -1 for none. Empty when `line` holds no preemptible request (or
/// no other): nothing to keep from anyone.
std::vector<int> WantedByWaiters(const std::vector<GpuState>& gpus, std::span<const Request> line, const Limits& limits,
                                 std::span<const MigUnit> mig_units);

}  // namespace gpulane::sched
