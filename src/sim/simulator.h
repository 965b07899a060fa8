#pragma once
// The trace replay: a virtual machine of N identical GPUs, a virtual clock and an event loop
// (arrivals, ends, and the times at which a decision changes by itself, Decision::recheck_at_s)
// that makes the daemon's two decisions at each event with the very functions the daemon calls:
// sched::PlanLaunches, which queued jobs join the lease line (at most max_waiting wait there), in
// the one line order (sched/line_order.h), and sched::LaunchPastCap, which of those the cap leaves
// out join it all the same (the line grants them GPUs at once); then sched::Schedule, the function `pick`, `run` and
// the supervisors call, which jobs of the lease line start. No I/O, no real clock.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sched/fairshare.h"
#include "sched/policy.h"
#include "sim/trace.h"
#include "util/result.h"

namespace gpulane::sim {

/// Where shares (memory-declared jobs) go among the GPUs they fit on.
enum class Placement {
  kBestFit,   ///< "bestfit": the request's default order (sched::DefaultOrder: best fit for shares)
  kMostFree,  ///< "mostfree": every job asks for --order memory, most free first (the default before best fit)
};
/// "bestfit", "mostfree".
const char* PlacementName(Placement placement);
std::optional<Placement> ParsePlacement(const std::string& name);

/// The simulated machine and the policy.
struct SimOptions {
  unsigned gpus = 8;                          ///< identical GPUs
  std::uint64_t gpu_mem_bytes = 80ULL << 30;  ///< memory of each, bytes
  sched::PolicyKind policy = sched::PolicyKind::kDefault;
  double max_reserve_idle_s = sched::kDefaultMaxReserveIdleS;  ///< Limits::max_reserve_idle_s, seconds
  /// kDefault orders the waiting jobs as the daemon does (sched/fairshare.h): by their user's
  /// fair-share factor (every user's share 1 unless `fair_share.shares` names them by the
  /// trace's user names in `user_names`) and their age; other policies keep submission order.
  bool fair_share = true;
  sched::FairShareSettings fair_share_settings;
  std::vector<std::string> user_names;  ///< Trace::users, for [shares] by name (may be empty)
  Placement placement = Placement::kBestFit;
  /// daemon.max_waiting: at most this many jobs wait in the lease line (launched by
  /// sched::PlanLaunches) at once; the others wait in the queue. 0: the daemon's default
  /// (sched::DefaultMaxWaiting).
  unsigned max_waiting = 0;
};

/// What happened to one job.
struct Outcome {
  double start_s = 0;      ///< virtual seconds
  double end_s = 0;        ///< start + min(duration, time limit)
  bool timed_out = false;  ///< stopped at its time limit before its duration
};

/// Event counts, for benchmarks, and how fragmented the GPUs were. Means are over time, from the
/// first submission to the last end.
struct SimStats {
  std::size_t decisions = 0;  ///< calls of sched::Schedule
  std::size_t max_waiting = 0;  ///< longest line (queued and launched jobs)
  double shared_gpus_mean = 0;  ///< GPUs holding at least one share (partly used), mean
  double idle_gpus_mean = 0;    ///< GPUs with nothing on them (whole GPUs free), mean
  /// Seconds during which a whole-GPU job waited for k GPUs while fewer than k GPUs had nothing on
  /// them but at least k would have, had the running shares been packed onto as few GPUs as their
  /// declared memory needs (ceil(sum / GPU memory)): waiting caused by how shares were spread.
  double fragmented_s = 0;
};

/// Replays `jobs` (submission order, each possible on this machine: Transform ensures it) and
/// returns one Outcome per job, by index. Errors: kInvalidArgument for a job that can never start
/// here; kInternal if jobs wait with nothing left to happen (a policy bug).
Result<std::vector<Outcome>> Simulate(const std::vector<Job>& jobs, const SimOptions& options, SimStats* stats = nullptr);

}  // namespace gpulane::sim
