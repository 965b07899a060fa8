#pragma once
// Which queued jobs the daemon hands to supervisors next, as a pure function of the queue: no
// store, no clock, no processes (the daemon gathers the inputs, daemon/job_table.h applies the
// plan). A supervisor then waits for GPUs in the lease line (sched/policy.h); this decides only
// who may join it.
//
// Rules:
//  - Line order: sched/line_order.h, the one order of every line (QueuedKey: --priority class,
//    then QueuedJob::fair_priority, then the id as the arrival). The daemon numbers jobs in the
//    order it accepts them, so among equal priorities this is submission order.
//  - Held jobs are skipped (they stay where they are in line).
//  - --after: a job starts once every such dependency completed; one that ended otherwise (failed,
//    cancelled, timed out) dooms it: it is cancelled, naming the dependency and how it ended.
//    --after-any: it starts once every such dependency ended, however. A dependency on an array's
//    id stands for all its tasks (ArrayDependencyState).
//  - The cap: at most `max_waiting` launched jobs wait for GPUs at once (counting those already
//    waiting); the rest wait in the queue. Preemptible jobs (submit --preemptible) have a cap of
//    their own, so that waiting preemptible jobs never keep a job that would preempt them out of
//    the lease line. CPU-only jobs (-g 0) wait for no GPU: neither cap counts or holds them.
//  - Hysteresis (sched/preemption.h): a preemptible job that gave way before (preemptions > 0)
//    is launched only when no job that is not preemptible, ready to start, is left waiting by the
//    cap; else it is blocked with that reason, so it never takes back GPUs such a job waits for.
//  - Past the cap: of the jobs the cap leaves out, those that are not preemptible are named
//    (LaunchPlan::capped); sched/launch_past_cap.h launches those the lease line would grant GPUs
//    at once without delaying any request waiting there.
//  - Only the head of the line is looked at (LaunchLookahead jobs), so that a queue of 100,000
//    jobs costs a partial sort per decision instead of a full one; jobs further back neither start
//    nor get a blocked reason in that round.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "sched/line_order.h"

namespace gpulane::sched {

/// Where a job that others depend on stands.
enum class DependencyState { kUnfinished, kCompleted, kFailed, kCancelled, kTimeout };

/// "unfinished", "completed", "failed", "cancelled", "timeout" (the job states' names).
const char* DependencyStateName(DependencyState state);

/// The state of an array as a dependency, from its tasks' states (in task order): unfinished while
/// any task is; else completed when every task completed; else how the last task that did not
/// complete ended. No tasks: completed.
DependencyState ArrayDependencyState(const std::vector<DependencyState>& tasks);

/// A job others depend on: job `id` (an array's id stands for all its tasks), or with `task` the task
/// with that array index of array `id` ("12_3"; store/job_id.h parses and prints the notation).
struct JobRef {
  std::int64_t id = 0;
  std::optional<int> task;
  bool operator==(const JobRef&) const = default;
};

/// "12" or "12_3".
std::string JobRefText(const JobRef& ref);

/// The caller's answer to "where does this job stand?" (arrays resolved as ArrayDependencyState).
/// A job the caller does not know is kUnfinished: the dependent keeps waiting.
using DependencyLookup = std::function<DependencyState(const JobRef& job)>;

/// One queued job as the launch decision sees it. The spans point into the caller's jobs, which
/// must outlive the call.
struct QueuedJob {
  std::int64_t id = 0;
  int priority = 0;                       ///< higher goes first
  bool held = false;                      ///< skipped until released (callers may also leave held jobs out)
  std::span<const JobRef> after_ok;   ///< --after: these must complete (exit 0)
  std::span<const JobRef> after_any;  ///< --after-any: these must end, however
  double fair_priority = 0;           ///< within a priority class, higher goes first (sched::PriorityOf)
  bool preemptible = false;           ///< submit --preemptible: counted against its own cap
  /// A CPU-only job (-g 0): it never waits for GPUs, so it is not counted against either cap and
  /// starts whenever its dependencies allow.
  bool cpu_only = false;
  /// A preemptible job's preemptions so far (store::Preemptions): above 0 it joins the line again
  /// only while no job that is not preemptible is kept out of it by the cap (sched/preemption.h).
  unsigned preemptions = 0;
};

/// The cap on supervisors waiting for GPUs.
struct LaunchLimits {
  unsigned max_waiting = 4;      ///< launched jobs that may wait for GPUs at once
  unsigned already_waiting = 0;  ///< launched jobs waiting now, preemptible ones left out
  unsigned already_waiting_preemptible = 0;  ///< launched preemptible jobs waiting now (their own cap of max_waiting)
  /// sched.max_preemptions_per_minute (0: no bound): while `preemptions_last_minute` (the
  /// machine's jobs preempted in the last 60 s) is at it, no preemptible job is launched, so no
  /// more start that could be preempted (sched/preemption.h).
  unsigned max_preemptions_per_minute = 0;
  unsigned preemptions_last_minute = 0;
};

/// `job`'s place in line (sched/line_order.h): its --priority, fair_priority, and its id as arrival.
LineKey QueuedKey(const QueuedJob& job);

/// daemon.max_waiting's default: 2 per GPU, at least 4.
unsigned DefaultMaxWaiting(unsigned gpu_count);

/// How many jobs at the head of the line one decision looks at, for a cap of `max_waiting`.
std::size_t LaunchLookahead(unsigned max_waiting);

/// A job that gets an update without starting: cancelled (its dependency failed) or still blocked.
struct JobReason {
  std::int64_t id = 0;
  std::string reason;  ///< "its dependency job 12 failed (--after needs it to complete)", "waiting for job 12_3", "waiting for job 12 to end"
  bool operator==(const JobReason&) const = default;
};

/// The decision.
struct LaunchPlan {
  std::vector<std::int64_t> launch;  ///< hand these to supervisors, in line order
  std::vector<JobReason> cancel;     ///< cancel these (never to run), with why
  std::vector<JobReason> blocked;    ///< these wait for a dependency (or a bound of preemption), with why
  /// Ready GPU jobs that are not preemptible, left waiting by the cap, in line order: those
  /// sched::LaunchPastCap may launch past it.
  std::vector<std::int64_t> capped;
  /// Every job looked at (the head of the line, held ones left out), in line order: launched,
  /// cancelled, blocked and those left waiting by the cap alike.
  std::vector<std::int64_t> order;
};

/// Decides for `queue` (any order; jobs other than pending or held must not be in it). `lookup`
/// is asked about each dependency of the jobs looked at. Never fails.
LaunchPlan PlanLaunches(std::vector<QueuedJob> queue, const DependencyLookup& lookup, const LaunchLimits& limits);

}  // namespace gpulane::sched
