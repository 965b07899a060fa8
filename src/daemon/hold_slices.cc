// Large holds and releases in parts, like cancels (cancel_slices.cc; issue 23, item 8: a hold or
// release of 300,000 tasks changed them all in one turn and one transaction, and the daemon
// answered nobody meanwhile). ops::Hold names the jobs at once, and the job table keeps the pending
// ones it will hold from being launched (JobTable::BeginParts); then each part of kCancelPartJobs
// jobs is stored in one transaction (JobTable::HoldPart, cancel_slices.cc: Daemon::ChangePart),
// and only once that is durable are its jobs changed in the table and counted as done. A job
// waiting for GPUs under its supervisor is asked to leave the line at its part, as before. The
// client is answered once the last part is stored; a part the store refuses is reported as failed
// with everything after it (they are as they were), never as done. A job whose state changed
// between the request and its part is left out (one held, released, started or ended meanwhile).
#include "daemon/daemon.h"

namespace gpulane::daemon {

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
