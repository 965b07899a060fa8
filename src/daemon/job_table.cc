// The job table's bookkeeping and what supervisors' status files say (the launch decision is in
// jobs.cc).
#include "daemon/job_table.h"

#include <signal.h>

#include <exception>
#include <fmt/format.h>

#include "daemon/job_files.h"

namespace gpulane::daemon {

using store::Job;
using store::JobState;

JobTable::JobTable(store::JobStore& store, std::string jobs_dir, const Clock& clock, SupervisorLauncher& launcher,
                   JobTableLimits limits, LogSink log)
    : store_(store), jobs_dir_(std::move(jobs_dir)), clock_(clock), launcher_(launcher), limits_(limits), log_(std::move(log)) {}

Result<std::size_t> JobTable::Recover() {
  auto jobs = store_.LoadUnfinished();
  if (!jobs) return jobs.error();
  for (auto& job : *jobs) active_.emplace(job.id, std::move(job));
  // ImportStatus may finish a job (one that ended while no daemon ran), which erases it from
  // active_: collect the ids first.
  std::vector<std::int64_t> handed_over;
  for (auto& [id, job] : active_)
    if (job.state == JobState::kLaunching || job.state == JobState::kRunning) handed_over.push_back(id);
  for (auto id : handed_over) ImportStatus(id);
  FlushDirty();
  schedule_needed_ = true;
  return handed_over.size();
}

void JobTable::Add(Job job) {
  if (job.state != JobState::kHeld) schedule_needed_ = true;
  const std::int64_t id = job.id;
  active_.emplace(id, std::move(job));
}

std::optional<Job> JobTable::Find(std::int64_t id) {
  auto it = active_.find(id);
  if (it != active_.end()) return it->second;
  auto stored = store_.Get(id);
  if (stored && *stored) return **stored;
  return std::nullopt;
}

void JobTable::Finish(Job& job, JobState state, std::optional<int> exit_code, const std::string& reason,
                      std::optional<double> end_time, bool stored) {
  job.state = state;
  job.exit_code = exit_code;
  job.reason = reason;
  job.end_time = end_time;
  schedule_needed_ = true;
  if (!stored) {
    if (Status s = store_.Update({&job}); !s.ok()) log_(fmt::format("cannot store the end of job {}: {}", job.id, s.error().message));
  }
  const std::int64_t id = job.id;
  dirty_.erase(id);
  if (!job.array_job_id) finished_[id] = AsDependencyState(state);  // arrays: answered from the store once all tasks ended
  cancel_requested_.erase(id);
  hold_requested_.erase(id);
  launched_at_.erase(id);
  JobFiles(jobs_dir_, id).Remove();
  log_(fmt::format("job {} ({}) {}{}{}", id, job.user, store::StateName(state),
                   exit_code ? fmt::format(" with exit code {}", *exit_code) : "", reason.empty() ? "" : ": " + reason));
  active_.erase(id);
}

void JobTable::FlushDirty() {
  std::vector<const Job*> jobs;
  for (auto id : dirty_) {
    auto it = active_.find(id);
    if (it != active_.end()) jobs.push_back(&it->second);
  }
  if (!jobs.empty()) {
    Status s = store_.Update(jobs);
    if (!s.ok()) log_("cannot store job updates: " + s.error().message);
  }
  dirty_.clear();
}

void JobTable::CheckSupervisors() {
  std::vector<std::int64_t> ids;
  for (auto& [id, job] : active_)
    if (job.state == JobState::kLaunching || job.state == JobState::kRunning) ids.push_back(id);
  for (auto id : ids) ImportStatus(id);
}

void JobTable::ImportStatus(std::int64_t id) {
  auto it = active_.find(id);
  if (it == active_.end()) return;
  Job& job = it->second;
  if (job.state != JobState::kLaunching && job.state != JobState::kRunning) return;
  // One job's damaged status file (a value of the wrong type) must not stop the others' or the daemon.
  try {
    ImportStatusOf(job);
  } catch (const std::exception& e) {
    log_(fmt::format("cannot read the status of job {} ({}): {}; left as it was", id, JobFiles(jobs_dir_, id).status_path(),
                     e.what()));
  }
}

void JobTable::ImportStatusOf(Job& job) {
  const std::int64_t id = job.id;
  JobFiles files(jobs_dir_, id);
  // Liveness first, then the status: a supervisor found dead has written its last status already,
  // while one read the other way round may write "done" and exit between the two reads.
  const bool alive = files.SupervisorAlive();
  auto status = files.ReadStatus();
  if (status && status->pid && job.supervisor_pid != status->pid) {
    job.supervisor_pid = status->pid;
    // A cancel that came before the supervisor had reported itself: pass it on now.
    if (cancel_requested_.count(id)) kill(status->pid, SIGTERM);
    else if (hold_requested_.count(id) && status->phase == "waiting") kill(status->pid, HoldSignal());
  }
  if (status && status->phase == "done" && status->held && !cancel_requested_.count(id)) {
    // Left the line on `gpulane hold` without starting: held until released.
    hold_requested_.erase(id);
    launched_at_.erase(id);
    files.Remove();
    job.state = JobState::kHeld;
    job.reason = "held: left the line for GPUs, starts again after gpulane release";
    job.supervisor_pid.reset();
    MarkDirty(job);
    schedule_needed_ = true;
    return;
  }
  if (status && status->phase == "done") {
    hold_requested_.erase(id);
    if (status->start_time) job.start_time = status->start_time;
    if (!status->gpu_uuids.empty()) job.gpu_uuids = status->gpu_uuids;
    if (!status->logs.stdout_path.empty() || !status->logs.stderr_path.empty()) job.logs = status->logs;
    JobState end = cancel_requested_.count(id) || status->interrupted ? JobState::kCancelled
                   : status->timed_out                                 ? JobState::kTimeout
                   : status->exit_code && *status->exit_code == 0 && !status->start_failed ? JobState::kCompleted
                                                                                           : JobState::kFailed;
    Finish(job, end, status->exit_code, status->reason, status->end_time.value_or(Now()));
    return;
  }
  if (status && status->phase == "running") {
    if (!alive) {  // the supervisor died with the job: never start it again
      Finish(job, JobState::kFailed, std::nullopt, "its supervisor ended without recording the job's end", Now());
      return;
    }
    if (job.state != JobState::kRunning) {
      job.state = JobState::kRunning;
      job.start_time = status->start_time;
      job.gpu_uuids = status->gpu_uuids;
      job.reason = status->reason;
      MarkDirty(job);
    }
    // The log files come in a second report, once the job's command has opened them.
    if ((!status->logs.stdout_path.empty() || !status->logs.stderr_path.empty()) && job.logs != status->logs) {
      job.logs = status->logs;
      MarkDirty(job);
    }
    return;
  }
  // Waiting for GPUs, or not yet started.
  if (alive) {
    if (status) job.reason = status->reason;
    return;
  }
  RequeueOrWait(job, status.has_value());
}

// The supervisor of launched `job` holds no lock: either it has not taken it yet (just launched,
// or launched just before a daemon restart) or it is gone. A launch gets the grace before it
// counts as lost; one that has reported (`reported`: a status) without holding its lock now is
// gone for sure.
void JobTable::RequeueOrWait(Job& job, bool reported) {
  const std::int64_t id = job.id;
  auto launched = launched_at_.find(id);
  if (launched == launched_at_.end()) launched = launched_at_.emplace(id, clock_.MonotonicS()).first;
  const bool grace_over = clock_.MonotonicS() - launched->second >= limits_.requeue_grace_s;
  if ((reported || grace_over) && cancel_requested_.count(id)) {  // cancelled before it started: never back in line
    Finish(job, JobState::kCancelled, std::nullopt, "cancelled before it started", Now());
    return;
  }
  if (!grace_over) return;
  // The supervisor is gone and the job never ran: back in line. Its lock file stays, so if that
  // supervisor was only slow, it and a new one cannot both hold the job.
  job.state = JobState::kPending;
  job.reason = "requeued: its supervisor ended before the job started";
  job.supervisor_pid.reset();
  launched_at_.erase(launched);
  MarkDirty(job);
}

}  // namespace gpulane::daemon
