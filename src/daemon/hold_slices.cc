// Large holds and releases in parts, like cancels (cancel_slices.cc; issue 23, item 8: a hold or
// release of 300,000 tasks changed them all in one turn and one transaction, and the daemon
// answered nobody meanwhile). ops::Hold names the jobs at once, keeping the pending ones it will
// hold from being launched; then each part of kCancelPartJobs jobs is stored in one transaction,
// and only once that is durable are its jobs changed in the table and counted as done. A job
// waiting for GPUs under its supervisor is asked to leave the line at its part, as before. The
// client is answered once the last part is stored; a part the store refuses is reported as failed
// with everything after it (they are as they were), never as done. A job whose state changed
// between the request and its part is left out (one held, released, started or ended meanwhile).
#include <signal.h>

#include <set>
#include <string>

#include <fmt/format.h>

#include "daemon/daemon.h"

namespace gpulane::daemon {

using store::Job;
using store::JobState;

bool Daemon::HoldPart(JobsInParts& k) {
  const bool hold = k.op == PartsOp::kHold;
  const std::size_t first = k.next, end = std::min(k.ids.size(), k.next + kCancelPartJobs);
  std::vector<Job> rows;  // the part's jobs as they are stored: held (or pending again)
  for (std::size_t i = first; i < end; ++i) {
    if (hold) jobs_->LetLaunch(k.ids[i]);
    auto it = jobs_->active().find(k.ids[i]);
    if (it == jobs_->active().end()) continue;  // ended meanwhile
    Job& job = it->second;
    if (hold && job.state == JobState::kLaunching && !jobs_->HoldRequested(job.id)) {
      // Waiting for GPUs under its supervisor: it leaves the line and becomes held (not if it
      // starts first: a running job is never stopped by hold).
      jobs_->RequestHold(job.id);
      job.reason = fmt::format("holding (by {})", k.by);
      if (job.supervisor_pid) kill(*job.supervisor_pid, HoldSignal());
      k.out.InProgress(job);
      k.out.Done(job);
      continue;
    }
    if (job.state != (hold ? JobState::kPending : JobState::kHeld)) continue;  // changed meanwhile
    Job row = job;
    row.state = hold ? JobState::kHeld : JobState::kPending;
    row.reason = hold ? fmt::format("held by {}", k.by) : "";
    rows.push_back(std::move(row));
  }
  k.next = end;
  if (rows.empty()) return true;
  Status s = StorePart(rows);
  if (!s.ok()) {
    // Nothing of this part is changed (the table holds its jobs as they were), nor anything after
    // it: the pending jobs a hold had kept back may start again.
    for (std::size_t i = end; hold && i < k.ids.size(); ++i) jobs_->LetLaunch(k.ids[i]);
    const std::size_t left = rows.size() + (k.ids.size() - end);
    const char* verb = VerbOf(k.op);
    Log(fmt::format("cannot store the {} of {} job(s) by {}: {}", verb, left, k.by, s.error().message));
    k.out.Failed(s.error().kind, fmt::format("{} job{}", left, left == 1 ? "" : "s"),
                 fmt::format("the job store refused to record the {} of {} job{} ({}): they are not {}; try again", verb,
                             left, left == 1 ? "" : "s", s.error().message, PastOf(k.op)));
    k.next = k.ids.size();
    return false;
  }
  std::vector<std::int64_t> ids;
  std::set<std::string> owners;
  for (const Job& row : rows) {
    auto it = jobs_->active().find(row.id);
    if (it == jobs_->active().end()) continue;
    it->second.state = row.state;
    it->second.reason = row.reason;
    jobs_->ChangedAndStored(it->second);
    k.out.Done(it->second);
    ids.push_back(row.id);
    owners.insert(row.user);
  }
  LogPart(k, ids, owners);  // one line a part (a hold logged nothing before)
  return true;
}

void Daemon::PartsDone(const JobsInParts& k) {
  // Released jobs may start: one launch decision for the whole release. (Once a part, it walked
  // every pending job each turn: a 300,000-task release took 16 s instead of 5, the released
  // jobs' decision growing with each part.) Jobs released in earlier parts start at the next
  // tick's decision at the latest.
  if (k.op == PartsOp::kRelease && k.out.done()) schedule_needed_ = true;
}

void Daemon::StartInParts(Connection& c, JobsInParts k) {
  if (CancelParts(k, kCancelTurnBudgetS)) {
    PartsDone(k);
    return Reply(c, k.out.Reply(DoneField(k.op)));
  }
  c.storing = true;
  cancels_.push_back(std::move(k));
}

}  // namespace gpulane::daemon
