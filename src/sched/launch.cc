#include "sched/launch.h"

#include <algorithm>
#include <optional>

#include "sched/line_order.h"
#include "util/strings.h"

namespace gpulane::sched {
namespace {

// The one line order (sched/line_order.h): the daemon's job id is the arrival.
bool InLineBefore(const QueuedJob& a, const QueuedJob& b) { return LineBefore(QueuedKey(a), QueuedKey(b)); }

// What one job's dependencies say: doomed (with why), blocked (with why) or ready.
struct Verdict {
  std::optional<std::string> failed;
  std::optional<std::string> blocked;
};

// How a dependency that did not complete ended, for the reason of a job that will not start.
const char* DependencyEnd(DependencyState s) {
  switch (s) {
    case DependencyState::kCancelled: return "was cancelled";
    case DependencyState::kTimeout: return "timed out";
    default: return "failed";
  }
}

// The last failed and the last blocking dependency name the reason, --after-any's after --after's.
Verdict Judge(const QueuedJob& job, const DependencyLookup& lookup) {
  Verdict v;
  for (const JobRef& dep : job.after_ok) {
    const DependencyState s = lookup(dep);
    if (s == DependencyState::kUnfinished) v.blocked = StrCat("waiting for job ", JobRefText(dep));
    else if (s != DependencyState::kCompleted)
      v.failed = StrCat("its dependency job ", JobRefText(dep), " ", DependencyEnd(s), " (--after needs it to complete)");
  }
  for (const JobRef& dep : job.after_any)
    if (lookup(dep) == DependencyState::kUnfinished) v.blocked = StrCat("waiting for job ", JobRefText(dep), " to end");
  return v;
}

// Whether a ready GPU job that is not preemptible is left out of the lease line by the cap: then a
// job that gave way before is not launched (sched/preemption.h).
bool FirmJobLeftOut(const std::vector<QueuedJob>& queue, const DependencyLookup& lookup, const LaunchLimits& limits) {
  unsigned firm = limits.already_waiting;
  for (const QueuedJob& job : queue) {
    if (job.preemptible || job.cpu_only) continue;
    const Verdict v = Judge(job, lookup);
    if (!v.failed && !v.blocked && ++firm > limits.max_waiting) return true;
  }
  return false;
}

}  // namespace

LineKey QueuedKey(const QueuedJob& job) {
  return {job.priority, job.fair_priority, static_cast<std::uint64_t>(job.id), {}};
}

std::string JobRefText(const JobRef& ref) {
  return ref.task ? StrCat(ref.id, "_", *ref.task) : StrCat(ref.id);
}

const char* DependencyStateName(DependencyState state) {
  switch (state) {
    case DependencyState::kUnfinished: return "unfinished";
    case DependencyState::kCompleted: return "completed";
    case DependencyState::kFailed: return "failed";
    case DependencyState::kCancelled: return "cancelled";
    case DependencyState::kTimeout: return "timeout";
  }
  return "unfinished";
}

DependencyState ArrayDependencyState(const std::vector<DependencyState>& tasks) {
  DependencyState out = DependencyState::kCompleted;
  for (DependencyState t : tasks) {
    if (t == DependencyState::kUnfinished) return t;
    if (t != DependencyState::kCompleted) out = t;
  }
  return out;
}

unsigned DefaultMaxWaiting(unsigned gpu_count) { return std::max(4u, 2 * gpu_count); }

std::size_t LaunchLookahead(unsigned max_waiting) { return 4 * static_cast<std::size_t>(max_waiting) + 64; }

LaunchPlan PlanLaunches(std::vector<QueuedJob> queue, const DependencyLookup& lookup, const LaunchLimits& limits) {
  LaunchPlan plan;
  std::erase_if(queue, [](const QueuedJob& j) { return j.held; });
  if (queue.empty()) return plan;
  // Only the first few in line matter; ordering all of a long queue on every event would not scale.
  const std::size_t look = std::min(queue.size(), LaunchLookahead(limits.max_waiting));
  std::partial_sort(queue.begin(), queue.begin() + static_cast<std::ptrdiff_t>(look), queue.end(), InLineBefore);
  queue.resize(look);
  for (const QueuedJob& job : queue) plan.order.push_back(job.id);
  unsigned waiting = limits.already_waiting, waiting_preemptible = limits.already_waiting_preemptible;
  const bool firm_left_out = std::any_of(queue.begin(), queue.end(), [](const QueuedJob& j) { return j.preemptions > 0; }) &&
                             FirmJobLeftOut(queue, lookup, limits);
  for (const QueuedJob& job : queue) {
    if (job.preemptible && limits.max_preemptions_per_minute > 0 &&
        limits.preemptions_last_minute >= limits.max_preemptions_per_minute) {
      plan.blocked.push_back({job.id, StrCat(limits.preemptions_last_minute, " preemptions in the last minute, sched."
                                             "max_preemptions_per_minute allows ", limits.max_preemptions_per_minute,
                                             ": preemptible jobs start again once fewer")});
      continue;
    }
    if (job.preemptible && job.preemptions > 0 && firm_left_out) {
      plan.blocked.push_back({job.id, "gave way to another job before: starts again once the jobs waiting that are not "
                                      "preemptible are in the line for GPUs (daemon.max_waiting)"});
      continue;
    }
    // Dependencies first: a job that waits for another job says so (and one whose dependency
    // failed ends) whether or not the cap on waiting supervisors is reached; only a job that could
    // start waits for the cap.
    Verdict v = Judge(job, lookup);
    if (v.failed) plan.cancel.push_back({job.id, std::move(*v.failed)});
    else if (v.blocked) plan.blocked.push_back({job.id, std::move(*v.blocked)});
    else if (!job.cpu_only && (job.preemptible ? waiting_preemptible : waiting) >= limits.max_waiting) {
      if (!job.preemptible) plan.capped.push_back(job.id);
    }
    else {
      plan.launch.push_back(job.id);
      if (!job.cpu_only) ++(job.preemptible ? waiting_preemptible : waiting);
    }
  }
  return plan;
}

}  // namespace gpulane::sched
