// Large cancels in parts (issue 23, item 8: `cancel --user` of 300,000 held tasks froze the daemon
// 11.5 s for everyone). A cancel names its jobs at once (ops::Cancel), then cancels them
// kCancelPartJobs at a time, each part one transaction: a part's pending and held jobs are stored
// as cancelled, and only once that is durable are they taken out of the job table and counted as
// done; its launching and running ones get SIGTERM through their supervisors as before. Other
// clients are served between the turns' parts; the cancelling client is answered once the last
// part is stored, so "cancelled job 12" is never printed before job 12's end is durable. A daemon
// killed mid-cancel leaves whole parts cancelled and the rest as they were (its client gets no
// answer, so nothing unstored was ever reported), and the restarted daemon shows just that.
// A job whose state changed between the request and its part is cancelled as it is then (one
// launched meanwhile gets SIGTERM; one that ended is left out of the reply).
// Holds and releases go through the same parts (hold_slices.cc: Daemon::HoldPart), in one line
// with the cancels, in the order they were asked for.
#include <signal.h>

#include <set>
#include <string>

#include <fmt/format.h>

#include "daemon/daemon.h"
#include "store/job_id.h"

namespace gpulane::daemon {

using nlohmann::json;
using store::Job;
using store::JobState;

namespace {

// The pending jobs of a cancel (or hold) from ids[from] on are no longer being cancelled (held):
// they may start again.
void LetTheRestStart(JobTable& jobs, const JobsInParts& k, std::size_t from) {
  for (std::size_t i = from; i < k.ids.size(); ++i) {
    if (k.op == PartsOp::kHold) jobs.LetLaunch(k.ids[i]);
    if (k.op != PartsOp::kCancel) continue;
    if (auto it = jobs.active().find(k.ids[i]); it != jobs.active().end() && it->second.state == JobState::kPending)
      jobs.ForgetCancel(k.ids[i]);
  }
}

const char* Doing(PartsOp op) {
  return op == PartsOp::kCancel ? "cancelling" : op == PartsOp::kHold ? "holding" : "releasing";
}

}  // namespace

bool Daemon::CancelPart(JobsInParts& k) {
  const std::size_t first = k.next, end = std::min(k.ids.size(), k.next + kCancelPartJobs);
  std::vector<Job> rows;  // pending and held jobs as they are stored: cancelled
  const std::string reason = fmt::format("cancelled by {}", k.by);
  const double now = clock_.WallS();
  for (std::size_t i = first; i < end; ++i) {
    auto it = jobs_->active().find(k.ids[i]);
    if (it == jobs_->active().end() || store::IsFinished(it->second.state)) continue;  // ended meanwhile
    Job& job = it->second;
    if (job.state == JobState::kPending || job.state == JobState::kHeld) {
      Job row = job;
      row.state = JobState::kCancelled;
      row.exit_code.reset();
      row.reason = reason;
      row.end_time = now;
      rows.push_back(std::move(row));
      continue;
    }
    jobs_->RequestCancel(job.id);
    job.reason = fmt::format("cancelling (by {})", k.by);
    if (job.supervisor_pid) kill(*job.supervisor_pid, SIGTERM);
    k.out.InProgress(job);
    k.out.Done(job);
  }
  if (!rows.empty()) {
    Status s = StorePart(rows);
    if (!s.ok()) {
      // Nothing of this part is cancelled (the table holds its jobs as they were), nor anything
      // after it: its pending jobs may start again.
      LetTheRestStart(*jobs_, k, first);
      const std::size_t left = k.ids.size() - first;
      Log(fmt::format("cannot store the cancellation of {} job(s) by {}: {}", left, k.by, s.error().message));
      k.out.Failed(s.error().kind, fmt::format("{} job{}", left, left == 1 ? "" : "s"),
                   fmt::format("the job store refused to record the cancellation of {} job{} ({}): they are not "
                               "cancelled; try again",
                               left, left == 1 ? "" : "s", s.error().message));
      k.next = k.ids.size();
      return false;
    }
    // Jobs that never ran seldom have files (a requeued launch keeps its lock file): one listing
    // of the folder, not five unlinks a job (they were most of a part's time).
    const auto with_files = JobIdsWithFiles(jobs_dir_);
    // One log line for the part's jobs, not one a job (a single job's cancel logs its own line).
    const bool one = rows.size() == 1;
    std::vector<std::int64_t> ids;
    std::set<std::string> owners;
    for (Job& row : rows) {
      auto it = jobs_->active().find(row.id);
      if (it == jobs_->active().end()) continue;
      Finish(it->second, JobState::kCancelled, std::nullopt, row.reason, row.end_time, /*stored=*/true,
             /*files=*/!with_files || with_files->count(row.id) > 0, /*log=*/one);
      k.out.Done(row);
      ids.push_back(row.id);
      owners.insert(row.user);
    }
    if (!one) LogPart(k, ids, owners);
  }
  k.next = end;
  return true;
}

Status Daemon::StorePart(const std::vector<Job>& rows) {
  std::vector<const Job*> stored;
  stored.reserve(rows.size());
  for (const Job& row : rows) stored.push_back(&row);
  Status s = store_->Update(stored);
  jobs_->NoteWrite(s);
  return s;
}

void Daemon::LogPart(const JobsInParts& k, const std::vector<std::int64_t>& ids, const std::set<std::string>& owners) {
  if (ids.empty()) return;
  std::string whose;
  for (const std::string& user : owners) whose += (whose.empty() ? "" : ",") + user;
  Log(fmt::format("{} by {}: {} job{} of {}: {}", PastOf(k.op), k.by, ids.size(), ids.size() == 1 ? "" : "s", whose,
                  store::FormatJobIdRanges(ids)));
}

bool Daemon::CancelParts(JobsInParts& k, double budget_s) {
  const double start = clock_.MonotonicS();
  while (k.next < k.ids.size()) {
    if (!(k.op == PartsOp::kCancel ? CancelPart(k) : HoldPart(k))) return true;
    if (clock_.MonotonicS() - start >= budget_s) break;
  }
  return k.next == k.ids.size();
}

void Daemon::CancelSlices(double budget_s) {
  const double start = clock_.MonotonicS();
  while (!cancels_.empty()) {
    JobsInParts& k = cancels_.front();
    const double left_s = budget_s - (clock_.MonotonicS() - start);
    if (!CancelParts(k, left_s)) return;  // the budget is spent; the next turn goes on
    PartsDone(k);
    AnswerConnection(k.fd, k.serial, k.out.Reply(DoneField(k.op)));
    ResumeAfterArray(k.fd, k.serial);
    cancels_.pop_front();
    if (clock_.MonotonicS() - start >= budget_s) return;
  }
}

void Daemon::FailCancels() {
  if (cancels_.empty()) return;
  JobsInParts& k = cancels_.front();
  LetTheRestStart(*jobs_, k, k.next);
  PartsDone(k);
  json error = proto::ErrorResponse(
      ErrorKind::kInternal, fmt::format("the daemon failed while {} (see its log): {} of the {} jobs are {}, the "
                                        "others are as they were; {} again",
                                        Doing(k.op), k.out.done(), k.ids.size(), PastOf(k.op), VerbOf(k.op)));
  AnswerConnection(k.fd, k.serial, error);
  ResumeAfterArray(k.fd, k.serial);
  cancels_.pop_front();
}

}  // namespace gpulane::daemon
