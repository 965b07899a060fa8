#pragma once
// No holder keeps what it does not use (issue 23, item 3). A ticket first in line whose holder
// never took the GPUs the line gave it (a `gpulane run` stopped with Ctrl-Z or SIGSTOP while it
// waited; a ticket file someone keeps locked by hand) held every request behind it: another user's
// `run --timeout 15m` waited the full 15 minutes while `status` showed both GPUs free, and a
// preemptible job was preempted for it 58 times in a minute. Pure, like the rest of sched/: every
// decider of the lease line (a waiter, lease/waiter.h; a preemptible job's holder,
// lease/preemption.h) keeps one LineMemory and orders the line with it before sched::Schedule.
//
// Rules:
//  - A request the line's decision grants is expected to take its GPUs at once: its holder decides
//    again within milliseconds of any change in the lease directory (inotify), or at its next NVML
//    read, and takes its lease under the directory's lock.
//  - Each decider notes when it first saw each other request granted. One it has seen granted,
//    and still not claimed, for max_unclaimed_s (sched.max_unclaimed) loses its place: from then on
//    this decider puts it after every other request of the line, as a request that reserves
//    nothing and preempts nobody (Demoted), for as long as its ticket lives (a ticket is known by
//    its file's identity, its inode: what the kernel vouches for, not what the file says).
//  - A request seen granted and then no longer granted (its GPUs went to an earlier request, or
//    were taken out of line) starts from zero the next time; a demoted one stays demoted.
//  - A decider never demotes its own request: it takes what it is granted itself.
//  - Each decider counts from its own first sight; no record of when a request was granted is
//    kept where a user could forge it, so nothing another user writes can take a place from
//    anyone. The request behind an unclaimed grant starts at most max_unclaimed_s after its own
//    first look at it (plus its next wake-up: Order::recheck_at_s).
// Deciders may disagree for up to that bound; none of them hands out a leased GPU: a grant becomes
// a lease only under the directory's lock after the leases are read again.
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <utility>
#include <vector>

#include "sched/request.h"

namespace gpulane::sched {

/// sched.max_unclaimed's default: 30 s. A live holder claims within milliseconds of its grant (and
/// at most one NVML poll, 1 s by default, when its view lags); 30 s leaves room for a loaded
/// machine and a slow poll, and costs a waiter behind a holder that never claims at most half a
/// minute.
inline constexpr double kDefaultMaxUnclaimedS = 30;

/// A request's identity in the line: its ticket file's (dev, ino).
using ClaimKey = std::pair<std::uint64_t, std::uint64_t>;

/// A user's hold of idle GPUs for starts nobody can predict, as one decider saw it
/// (sched/reserve_idle.h).
struct IdleHold {
  double since_s = 0;  ///< when it began (the bound counts from here, across her tickets)
  double last_s = 0;   ///< when this decider last saw one of her requests hold (or want to hold) one
};

/// One decider's memory of the line: grants nobody claimed (this file) and each user's hold of
/// idle GPUs (sched/reserve_idle.h). Kept for as long as the decider lives.
struct LineMemory {
  std::map<ClaimKey, double> granted_since_s;  ///< requests seen granted and not claimed since, first sight
  std::set<ClaimKey> demoted;                  ///< requests that lost their place
  std::map<std::uint32_t, IdleHold> idle_holds;  ///< uid -> her hold of idle GPUs
};

/// The order to decide `line` (keys in line order) in: every request that is not demoted in its
/// order, then the demoted ones in theirs. Indices into `line`.
std::vector<std::size_t> ClaimOrder(const LineMemory& watch, std::span<const ClaimKey> line);

/// `r` as a demoted request is decided: last, reserving nothing and preempting nobody (as a
/// preemptible request that gave way before: it takes only GPUs no one else waits for).
Request Demoted(Request r);

/// What NoteGrants found.
struct ClaimNotes {
  std::vector<std::size_t> newly_demoted;  ///< indices into the line demoted by this call
  /// When a request seen granted will lose its place if it still has not claimed (the decider
  /// wakes up then), seconds on the clock of `now_s`.
  std::optional<double> recheck_at_s;
};

/// Notes the decision of `line` (keys, in the order decided) at `now_s`: `granted[i]` whether the
/// request at i was granted. `self`: the decider's own request's index, never demoted. Requests
/// no longer in the line are forgotten. A request granted for max_unclaimed_s since this decider
/// first saw it is demoted.
ClaimNotes NoteGrants(LineMemory& watch, std::span<const ClaimKey> line, const std::vector<bool>& granted,
                      std::optional<std::size_t> self, double now_s, double max_unclaimed_s);

}  // namespace gpulane::sched
