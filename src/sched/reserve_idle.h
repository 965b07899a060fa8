#pragma once
// sched.max_reserve_idle over the whole reservation, per user (issue 23, item 4's second half).
// With the bound at 1 minute another user still waited 187 s: it applied only to the GPUs the
// waiting request could use now (a request that can never start on a free GPU, a --min-free above
// what is free, held it for ever), and it counted from the request's submission, so a
// resubmission started it again. Pure, like the rest of sched/: sched::Schedule asks
// IdleHoldSince for every GPU it would hold, and each decider keeps the users' clocks in its
// LineMemory (sched/unclaimed.h) with NoteIdleHolds.
//
// Rules:
//  - A waiting request whose start cannot be known holds an idle GPU (nothing leased on it, no
//    process, its processes known: GpuState::free_since_s is set) at most max_reserve_idle_s,
//    whatever it thinks of that GPU (free for it now or not), and only then. Leased or busy GPUs
//    it waits for are held as before: nobody else could use them now anyway.
//  - The bound counts per user, from the first time this decider saw one of her requests hold an
//    idle GPU, or from when that GPU became free if later; a new ticket of hers (a resubmission)
//    keeps her clock. Her clock is forgotten once this decider has seen none of her requests
//    hold or want an idle GPU for max_reserve_idle_s: so the GPUs are hers at most half the time
//    at worst, and the other users' requests behind her wait at most max_reserve_idle_s for a free
//    GPU whatever she resubmits.
//  - A decider that has no clock for her yet counts from her request's submission (never earlier
//    than its own first sight of the GPU free: free_since_s).
#include <cstdint>
#include <map>
#include <vector>

#include "sched/policy.h"
#include "sched/unclaimed.h"

namespace gpulane::sched {

/// The clock of `r`'s user: hers in `limits` (Limits::idle_hold_since_by_uid), else the request's
/// submission (never later than the decision's time: a submission time is its owner's word).
double UserIdleClock(const Limits& limits, const Request& r);
/// Since when `r` counts as holding the idle GPU `g`: its user's clock, or when `g` became free if
/// later.
double IdleHoldSince(const Limits& limits, const Request& r, const GpuState& g);

/// Whether `g` is idle: nothing leased on it, no process, its processes known (free_since_s set by
/// the decider, lease::NoteFreeSince; the simulator's free GPUs).
bool Idle(const GpuState& g);

/// Updates `memory`'s users' clocks from the decision `decisions` of `uids` (the requests' users, in
/// the same order) at `now_s`: a decision that held or wanted an idle GPU (Decision::idle_hold_since_s)
/// starts or keeps its user's clock; a clock not kept for `max_reserve_idle_s` is forgotten.
void NoteIdleHolds(LineMemory& memory, const std::vector<std::uint32_t>& uids, const std::vector<Decision>& decisions,
                   double now_s, double max_reserve_idle_s);

/// The users' clocks of `memory` as Schedule takes them (Limits::idle_hold_since_by_uid).
std::map<std::uint32_t, double> IdleHoldClocks(const LineMemory& memory);

}  // namespace gpulane::sched
