#pragma once
// Retention of finished jobs (daemon.keep_finished, docs/config.md "Retention"): the daemon removes
// finished jobs from the job store once they ended longer ago than the setting, a slice of at most
// kPruneSliceJobs a turn of its loop (store::JobStore::PruneFinished), never a job that an
// unfinished job still waits for; and a removed job's id is answered as "no longer kept", never as
// one that never was.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "store/job_store.h"

namespace gpulane::daemon {

/// Finished jobs removed in one slice (one transaction) at most: a few milliseconds.
inline constexpr std::size_t kPruneSliceJobs = 1000;
/// How often the daemon looks for finished jobs old enough (seconds; shorter for a shorter setting).
inline constexpr double kPruneCheckEveryS = 60;

/// The daemon's progress through the jobs old enough to go.
struct Retention {
  bool more = false;              ///< the last slice was full: the next turn takes another
  double next_check_mono_s = 0;   ///< when to look again while !more
  std::size_t removed = 0;        ///< jobs removed in this round (logged when it ends)
  std::vector<std::pair<std::int64_t, std::int64_t>> spared;  ///< ids unfinished jobs wait for, this round
  std::string last_error;         ///< the last failure logged (each new one is logged once)
};

/// "30 days", "12 hours", "2 s": daemon.keep_finished for people.
std::string KeepText(double keep_s);

/// Whether job `id` was removed by retention (an array's id: its first task), as far as the store
/// can tell (a read error: no).
bool WasPruned(store::JobStore& store, std::int64_t id);

/// What `show`, `wait`, `logs`, `cancel` ... answer for `text` (job `id`, or a task of array `id`)
/// when the store has no such job: that it is no longer kept (removed after daemon.keep_finished),
/// or "no job TEXT" when it never was one.
std::string NoJobMessage(store::JobStore& store, std::int64_t id, const std::string& text);

}  // namespace gpulane::daemon
