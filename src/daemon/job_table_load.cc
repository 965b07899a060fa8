// The job table's start in parts (issue 23, item 8: a restart with 600,000 unfinished jobs
// answered nothing for 14 s): the unfinished jobs' ids are read once, their rows a part at a time
// (the daemon answers clients between parts, ping saying how far it is), and only once all are in
// are past use read and the handed-over jobs' status imported, as Recover always did.
#include <fmt/format.h>

#include "daemon/job_table.h"
#include "sched/user_limits.h"

namespace gpulane::daemon {

using store::Job;
using store::JobState;

Result<std::size_t> JobTable::Recover() {
  if (Status begun = BeginRecover(); !begun.ok()) return begun.error();
  while (true) {
    auto done = LoadRecoverPart(kRecoverPartRows);
    if (!done) return done.error();
    if (*done) break;
  }
  return FinishRecover();
}

Status JobTable::BeginRecover() {
  auto ids = store_.ListIds(store::JobFilter{});  // 600,000 ids: about 5 MB, read once
  if (!ids) return ids.error();
  recover_ = RecoverProgress{0, ids->size(), std::move(ids).value()};
  return Status::Ok();
}

Result<bool> JobTable::LoadRecoverPart(std::size_t rows) {
  RecoverProgress& r = *recover_;
  if (r.loaded < r.ids.size()) {
    // The next `rows` ids, in one read of the store (a range of ids). Nothing writes the store's
    // jobs meanwhile: the daemon refuses submissions and changes until all are loaded.
    store::JobFilter part;
    part.min_id = r.ids[r.loaded];
    part.max_id = r.ids[std::min(r.loaded + rows, r.ids.size()) - 1];
    auto jobs = store_.List(part, &damaged_);
    if (!jobs) return jobs.error();
    for (auto& job : *jobs) {
      Index(job);
      CountUser(job, +1);
      active_.emplace_hint(active_.end(), job.id, std::move(job));  // ids grow
    }
    r.loaded = std::min(r.loaded + rows, r.ids.size());
  }
  return r.loaded == r.ids.size();
}

Result<std::size_t> JobTable::FinishRecover() {
  recover_.reset();
  if (Status odd = store_.AddUnknownStates(&damaged_); !odd.ok()) return odd.error();
  for (const auto& row : damaged_)
    log_(fmt::format("job {} is damaged in the database ({}): kept there as it is and not run", row.id, row.why));
  // Past use for fair share (the ended jobs whose use has not decayed to nothing) and for
  // limits.max_gpu_hours_per_day (those of the last 24 hours).
  const double now = Now();
  const double fair_share_since = now - kUsageKeptHalfLives * limits_.fair_share.half_life_s;
  const double since = limits_.max_gpu_hours_of ? std::min(fair_share_since, now - sched::kGpuHoursWindowS) : fair_share_since;
  auto used = store_.UsageSince(since);
  if (!used) {
    log_("cannot read past GPU use for fair share: " + used.error().message + "; every user starts from none");
  } else {
    for (const auto& row : *used)
      AddEndedUsage({row.user, row.start_time, row.end_time,
                     sched::GpuShareOfRequest(row.gpus, row.mem_bytes, limits_.gpu_total_bytes)},
                    now);
  }
  // ImportStatus may finish a job (one that ended while no daemon ran), which erases it from
  // active_: collect the ids first.
  std::vector<std::int64_t> handed_over;
  ForEachUnheld([&](std::int64_t id, const Job& job) {
    if (job.state == JobState::kLaunching || job.state == JobState::kRunning) handed_over.push_back(id);
  });
  for (auto id : handed_over) ImportStatus(id);
  FlushDirty();
  schedule_needed_ = true;
  return handed_over.size();
}

}  // namespace gpulane::daemon
