// Retention of finished jobs (retention.h): the daemon's slices of store::JobStore::PruneFinished.
#include "daemon/retention.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "daemon/daemon.h"
#include "store/job_id.h"

namespace gpulane::daemon {

std::string KeepText(double keep_s) {
  auto plural = [](double n, const char* unit) {
    return fmt::format("{:g} {}{}", n, unit, n == 1 ? "" : "s");
  };
  if (keep_s >= 86400 && std::fmod(keep_s, 86400) == 0) return plural(keep_s / 86400, "day");
  if (keep_s >= 3600 && std::fmod(keep_s, 3600) == 0) return plural(keep_s / 3600, "hour");
  if (keep_s >= 60 && std::fmod(keep_s, 60) == 0) return plural(keep_s / 60, "minute");
  return fmt::format("{:g} s", keep_s);
}

bool WasPruned(store::JobStore& store, std::int64_t id) {
  auto pruned = store.PrunedAfter(id);
  return pruned && pruned->has_value();
}

std::string NoJobMessage(store::JobStore& store, std::int64_t id, const std::string& text) {
  auto pruned = store.PrunedAfter(id);
  if (!pruned || !*pruned) return fmt::format("no job {}", text);
  return fmt::format("job {} is no longer kept: it ended more than {} ago, and finished jobs are removed from the "
                     "daemon's records then (daemon.keep_finished); its log files, if any, are where they were",
                     text, KeepText(**pruned));
}

// The ids unfinished jobs wait for: each job named, an array's every possible id (kMaxArrayTasks
// from its id) when it names an array or one of its tasks. Looked up once a round.
std::vector<std::pair<std::int64_t, std::int64_t>> Daemon::SparedByDependencies() {
  std::set<std::int64_t> singles, arrays;
  for (const auto& [id, job] : jobs_->active()) {
    for (const auto* list : {&job.spec.after_ok, &job.spec.after_any})
      for (const auto& ref : *list) {
        if (ref.task) {
          arrays.insert(ref.id);
          continue;
        }
        if (singles.count(ref.id) || arrays.count(ref.id)) continue;
        auto head = store_->Head(ref.id);
        const bool array = head && *head && (*head)->array_job_id && *(*head)->array_job_id == ref.id;
        (array ? arrays : singles).insert(ref.id);
      }
  }
  std::vector<std::pair<std::int64_t, std::int64_t>> ranges;
  for (std::int64_t id : singles) ranges.emplace_back(id, id);
  for (std::int64_t id : arrays) ranges.emplace_back(id, id + static_cast<std::int64_t>(store::kMaxArrayTasks) - 1);
  std::sort(ranges.begin(), ranges.end());
  std::vector<std::pair<std::int64_t, std::int64_t>> merged;
  for (const auto& range : ranges) {
    if (!merged.empty() && range.first <= merged.back().second + 1) merged.back().second = std::max(merged.back().second, range.second);
    else merged.push_back(range);
  }
  return merged;
}

// One slice a turn while the last one was full; otherwise a look every kPruneCheckEveryS (or half
// the setting, when that is shorter).
void Daemon::PruneFinished() {
  const double keep_s = config_.daemon_keep_finished_s;
  if (keep_s <= 0) return;  // "forever"
  const double now_mono = clock_.MonotonicS();
  if (!retention_.more) {
    if (now_mono < retention_.next_check_mono_s) return;
    retention_.next_check_mono_s = now_mono + std::min(kPruneCheckEveryS, std::max(keep_s / 2, settings_.tick_s));
    retention_.spared = SparedByDependencies();
  }
  auto slice = store_->PruneFinished(clock_.WallS() - keep_s, kPruneSliceJobs, keep_s, retention_.spared);
  if (!slice) {
    retention_.more = false;  // tried again at the next look
    if (slice.error().message != retention_.last_error)
      Log(fmt::format("cannot remove finished jobs older than daemon.keep_finished: {}", retention_.last_error = slice.error().message));
    return;
  }
  retention_.last_error.clear();
  retention_.more = slice->more;
  retention_.removed += slice->jobs;
  if (!retention_.more && retention_.removed > 0) {
    Log(fmt::format("removed {} finished job{} that ended more than {} ago (daemon.keep_finished)", retention_.removed,
                    retention_.removed == 1 ? "" : "s", KeepText(keep_s)));
    retention_.removed = 0;
  }
}

}  // namespace gpulane::daemon
