// Large cancels in parts (issue 23, item 8: `cancel --user` of 300,000 held tasks froze the daemon
// 11.5 s for everyone). A cancel names its jobs at once (ops::Cancel), then cancels them
// kCancelPartJobs at a time, each part one transaction (JobTable::CancelPart, which owns the jobs):
// a part's pending and held jobs are stored as cancelled, and only once that is durable are they
// taken out of the job table and counted as done, and its launching and running ones get SIGTERM
// through their supervisors. Other
// clients are served between the turns' parts; the cancelling client is answered once the last
// part is stored, so "cancelled job 12" is never printed before job 12's end is durable. A daemon
// killed mid-cancel leaves whole parts cancelled and the rest as they were (its client gets no
// answer, so nothing unstored was ever reported), and the restarted daemon shows just that.
// A job whose state changed between the request and its part is cancelled as it is then (one
// launched meanwhile gets SIGTERM; one that ended is left out of the reply).
// Holds and releases go through the same parts (JobTable::HoldPart; hold_slices.cc), in one line
// with the cancels, in the order they were asked for. This file keeps the queue of parts, the
// replies and the connections; it changes no job itself.
#include <span>
#include <string>

#include <fmt/format.h>

#include "daemon/daemon.h"

namespace gpulane::daemon {

using nlohmann::json;

namespace {

const char* Doing(PartsOp op) {
  return op == PartsOp::kCancel ? "cancelling" : op == PartsOp::kHold ? "holding" : "releasing";
}

// The ids of `k` from ids[from] on.
std::span<const std::int64_t> From(const JobsInParts& k, std::size_t from) {
  return std::span<const std::int64_t>(k.ids).subspan(std::min(from, k.ids.size()));
}

}  // namespace

bool Daemon::ChangePart(JobsInParts& k) {
  const std::size_t first = k.next, end = std::min(k.ids.size(), k.next + kCancelPartJobs);
  const auto part = From(k, first).first(end - first);
  const PartResult r = k.op == PartsOp::kCancel ? jobs_->CancelPart(part, k.by)
                                                 : jobs_->HoldPart(part, k.by, k.op == PartsOp::kHold);
  if (r.refused) {
    // Nothing of this part is changed (the table holds its jobs as they were), nor anything after
    // it: the pending jobs the change had kept back may start again.
    jobs_->EndParts(k.op, From(k, end));
    const std::size_t left = k.op == PartsOp::kCancel ? k.ids.size() - first : r.refused_jobs + (k.ids.size() - end);
    const std::string what = k.op == PartsOp::kCancel ? "cancellation" : VerbOf(k.op);
    Log(fmt::format("cannot store the {} of {} job(s) by {}: {}", what, left, k.by, r.refused->message));
    k.out.Failed(r.refused->kind, fmt::format("{} job{}", left, left == 1 ? "" : "s"),
                 fmt::format("the job store refused to record the {} of {} job{} ({}): they are not {}; try again", what,
                             left, left == 1 ? "" : "s", r.refused->message, PastOf(k.op)));
    k.next = k.ids.size();
    return false;
  }
  for (const PartResult::Changed& job : r.changed) {
    if (job.before_start) k.out.BeforeStart(job.text);
    else if (job.in_progress) k.out.InProgress(job.text);
    k.out.Done(job.id, job.text);
  }
  k.next = end;
  return true;
}

bool Daemon::CancelParts(JobsInParts& k, double budget_s) {
  const double start = clock_.MonotonicS();
  while (k.next < k.ids.size()) {
    if (!ChangePart(k)) return true;
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
  jobs_->EndParts(k.op, From(k, k.next));
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
