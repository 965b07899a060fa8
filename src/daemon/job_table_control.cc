// The job table's events that people cause: a cancel, hold or release in parts (the daemon keeps the
// parts' queue, cancel_slices.cc and hold_slices.cc; issue 23, item 8) and the telemetry's idle
// cancel. Each part is stored in one transaction before anything of it changes in the table, is
// logged or signalled (job_table.h, invariant 3); a refused part leaves every job as it was.
#include <signal.h>

#include <fmt/format.h>

#include "daemon/job_files.h"
#include "daemon/job_table.h"
#include "store/job_id.h"

namespace gpulane::daemon {

using store::Job;
using store::JobState;

void JobTable::SignalSupervisor(const Job& job, int signal) {
  if (job.supervisor_pid) launcher_.Signal(job.id, *job.supervisor_pid, signal);
}

Status JobTable::StoreRows(const std::vector<Job>& rows) {
  std::vector<const Job*> stored;
  stored.reserve(rows.size());
  for (const Job& row : rows) stored.push_back(&row);
  Status s = store_.Update(stored);
  NoteWrite(s);
  return s;
}

void JobTable::LogPart(PartsOp op, const std::string& by, const std::vector<std::int64_t>& ids,
                       const std::set<std::string>& owners) {
  if (ids.empty()) return;
  std::string whose;
  for (const std::string& user : owners) whose += (whose.empty() ? "" : ",") + user;
  log_(fmt::format("{} by {}: {} job{} of {}: {}", PastOf(op), by, ids.size(), ids.size() == 1 ? "" : "s", whose,
                   store::FormatJobIdRanges(ids)));
}

void JobTable::BeginParts(PartsOp op, std::span<const std::int64_t> ids) {
  if (op == PartsOp::kRelease) return;  // held jobs: never launched anyway
  auto& kept = op == PartsOp::kCancel ? cancel_requested_ : kept_from_launch_;
  for (std::int64_t id : ids)
    if (auto it = active_.find(id); it != active_.end() && it->second.state == JobState::kPending) kept.insert(id);
}

void JobTable::EndParts(PartsOp op, std::span<const std::int64_t> ids) {
  for (std::int64_t id : ids) {
    if (op == PartsOp::kHold) kept_from_launch_.erase(id);
    if (op != PartsOp::kCancel) continue;
    if (auto it = active_.find(id); it != active_.end() && it->second.state == JobState::kPending)
      cancel_requested_.erase(id);
  }
}

// Launching `job`, whose supervisor was just sent a cancel's SIGTERM: true only when its command
// is known never to run. A launching job may have been granted its GPUs (and started) a moment
// before the daemon reads its "running", so the table's state is not enough: its supervisor, known
// by its pid (so signalled above), must still report "waiting" now, after the signal. It records
// "running" before it starts the command and looks for a stop once more after that record
// (exec/leased_job.h, on_granted): a record read as "waiting" here was not written before the
// signal came, so the supervisor sees the signal and never starts the command. A CPU-only job
// starts at once.
bool JobTable::NeverStarts(const Job& job) const {
  if (job.state != JobState::kLaunching || job.spec.request.count == 0 || !job.supervisor_pid) return false;
  const auto status = JobFiles(files_, jobs_dir_, job.id).ReadStatus();
  return status && status->phase == "waiting" && status->pid == *job.supervisor_pid;
}

PartResult JobTable::CancelPart(std::span<const std::int64_t> ids, const std::string& by) {
  PartResult result;
  std::vector<Job> rows;    // pending and held jobs as they are stored: cancelled
  std::vector<Job*> stops;  // launching and running ones: their supervisors are asked to stop
  const std::string reason = fmt::format("cancelled by {}", by);
  const double now = Now();
  for (std::int64_t id : ids) {
    auto it = active_.find(id);
    if (it == active_.end() || store::IsFinished(it->second.state)) continue;  // ended meanwhile
    Job& job = it->second;
    if (job.state != JobState::kPending && job.state != JobState::kHeld) {
      stops.push_back(&job);
      continue;
    }
    Job row = job;
    row.state = JobState::kCancelled;
    row.exit_code.reset();
    row.reason = reason;
    row.end_time = now;
    rows.push_back(std::move(row));
  }
  if (!rows.empty()) {
    if (Status s = StoreRows(rows); !s.ok()) {
      EndParts(PartsOp::kCancel, ids);  // as they were: its pending jobs may start again
      result.refused = s.error();
      result.refused_jobs = rows.size() + stops.size();
      return result;
    }
  }
  for (Job* job : stops) {
    cancel_requested_.insert(job->id);
    job->reason = fmt::format("cancelling (by {})", by);
    SignalSupervisor(*job, SIGTERM);
    result.changed.push_back({job->id, store::JobIdText(*job), true, NeverStarts(*job)});
  }
  if (rows.empty()) return result;
  // Jobs that never ran seldom have files (a requeued launch keeps its lock file): one listing of
  // the folder, not five unlinks a job (they were most of a part's time).
  const auto with_files = JobIdsWithFiles(files_, jobs_dir_);
  // One log line for the part's jobs, not one a job (a single job's cancel logs its own line).
  const bool one = rows.size() == 1;
  std::vector<std::int64_t> done;
  std::set<std::string> owners;
  for (const Job& row : rows) {
    result.changed.push_back({row.id, store::JobIdText(row), false});
    done.push_back(row.id);
    owners.insert(row.user());
    Finish(active_.at(row.id), JobState::kCancelled, std::nullopt, row.reason, row.end_time, /*stored=*/true,
           /*files=*/!with_files || with_files->count(row.id) > 0, /*log=*/one);
  }
  if (!one) LogPart(PartsOp::kCancel, by, done, owners);
  return result;
}

PartResult JobTable::HoldPart(std::span<const std::int64_t> ids, const std::string& by, bool hold) {
  PartResult result;
  std::vector<Job> rows;      // the part's jobs as they are stored: held (or pending again)
  std::vector<Job*> leaving;  // waiting for GPUs under their supervisors: asked to leave the line
  for (std::int64_t id : ids) {
    if (hold) kept_from_launch_.erase(id);
    auto it = active_.find(id);
    if (it == active_.end()) continue;  // ended meanwhile
    Job& job = it->second;
    // A running job is never stopped by hold; one that starts before its supervisor leaves the
    // line runs on.
    if (hold && job.state == JobState::kLaunching && !hold_requested_.count(id)) {
      leaving.push_back(&job);
      continue;
    }
    if (job.state != (hold ? JobState::kPending : JobState::kHeld)) continue;  // changed meanwhile
    Job row = job;
    row.state = hold ? JobState::kHeld : JobState::kPending;
    row.reason = hold ? fmt::format("held by {}", by) : "";
    rows.push_back(std::move(row));
  }
  if (!rows.empty()) {
    if (Status s = StoreRows(rows); !s.ok()) {
      result.refused = s.error();
      result.refused_jobs = rows.size() + leaving.size();
      return result;
    }
  }
  for (Job* job : leaving) {
    hold_requested_.insert(job->id);
    job->reason = fmt::format("holding (by {})", by);
    SignalSupervisor(*job, HoldSignal());
    result.changed.push_back({job->id, store::JobIdText(*job), true});
  }
  std::vector<std::int64_t> done;
  std::set<std::string> owners;
  for (const Job& row : rows) {
    Job& job = active_.at(row.id);
    job.state = row.state;
    job.reason = row.reason;
    dirty_.erase(job.id);  // stored just now
    Index(job);
    result.changed.push_back({row.id, store::JobIdText(job), false});
    done.push_back(row.id);
    owners.insert(row.user());
  }
  LogPart(hold ? PartsOp::kHold : PartsOp::kRelease, by, done, owners);
  return result;
}

bool JobTable::CancelIdle(std::int64_t id, const std::string& message) {
  auto it = active_.find(id);
  if (it == active_.end() || (it->second.state != JobState::kLaunching && it->second.state != JobState::kRunning))
    return false;
  Job& job = it->second;
  job.reason = message;
  Status s = store_.Update({&job});
  NoteWrite(s);
  if (!s.ok()) {
    // Signalled once FlushDirty has stored the reason (a restart then still knows why it ends).
    MarkDirty(job);
    signal_when_stored_.insert(id);
    return true;
  }
  dirty_.erase(id);
  cancel_requested_.insert(id);
  SignalSupervisor(job, SIGTERM);
  return true;
}

void JobTable::SignalStoredIdleCancels() {
  for (std::int64_t id : std::exchange(signal_when_stored_, {})) {
    auto it = active_.find(id);
    if (it == active_.end() || store::IsFinished(it->second.state) || cancel_requested_.count(id)) continue;
    cancel_requested_.insert(id);
    SignalSupervisor(it->second, SIGTERM);
  }
}

}  // namespace gpulane::daemon
