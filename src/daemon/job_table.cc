// The job table's bookkeeping, its store writes and what supervisors' status files say (the launch
// decision is in jobs.cc, submissions in job_table_submit.cc, cancels and holds in
// job_table_control.cc, GPU use and fair share in job_table_usage.cc, loading at start in
// job_table_load.cc).
#include "daemon/job_table.h"

#include <signal.h>

#include <algorithm>
#include <ctime>
#include <exception>
#include <string_view>
#include <fmt/format.h>

#include "daemon/job_files.h"

namespace gpulane::daemon {

using store::Job;
using store::JobState;

namespace {

// "14:02": the local time of `wall_s` (seconds since the epoch), for people.
std::string ClockTime(double wall_s) {
  const std::time_t t = static_cast<std::time_t>(wall_s);
  std::tm tm{};
  localtime_r(&t, &tm);
  char text[16];
  std::strftime(text, sizeof text, "%H:%M", &tm);
  return text;
}

}  // namespace

JobTable::JobTable(store::JobStore& store, std::string jobs_dir, const Clock& clock, os::FileSystem& files,
                   SupervisorLauncher& launcher, JobTableLimits limits, LogSink log)
    : store_(store),
      jobs_dir_(std::move(jobs_dir)),
      clock_(clock),
      files_(files),
      launcher_(launcher),
      limits_(limits),
      log_(std::move(log)) {
  store_.SetBusyTimeout(limits_.busy_timeout_ms);
}

void JobTable::Index(const Job& job) {
  if (job.state == JobState::kHeld) unheld_.erase(job.id);
  else unheld_.insert(job.id);
}

std::map<std::string, std::uint64_t> JobTable::CountByState() {
  std::map<std::string, std::uint64_t> counts;
  for (auto state : {JobState::kPending, JobState::kLaunching, JobState::kRunning, JobState::kHeld})
    counts[store::StateName(state)] = 0;
  ForEachUnheld([&](std::int64_t, const Job& job) {
    if (!store::IsFinished(job.state)) ++counts[store::StateName(job.state)];
  });
  counts[store::StateName(JobState::kHeld)] = active_.size() - unheld_.size();
  return counts;
}

void JobTable::CountUser(const Job& job, int change) {
  ActiveUser& u = active_users_[job.user()];
  if (change > 0) {
    if (u.jobs++ == 0) u.uid = job.uid(), u.gid = job.gid;
    auto& ids = ids_of_uid_[job.uid()];
    ids.emplace_hint(ids.end(), job.id);  // ids grow: usually the end
  } else {
    if (--u.jobs == 0) active_users_.erase(job.user());
    if (auto it = ids_of_uid_.find(job.uid()); it != ids_of_uid_.end() && it->second.erase(job.id) && it->second.empty())
      ids_of_uid_.erase(it);
  }
}

const std::set<std::int64_t>& JobTable::IdsOfUid(std::uint32_t uid) const {
  static const std::set<std::int64_t> none;
  auto it = ids_of_uid_.find(uid);
  return it == ids_of_uid_.end() ? none : it->second;
}

void JobTable::Add(Job job) {
  if (job.state != JobState::kHeld) schedule_needed_ = true;
  Index(job);
  CountUser(job, +1);
  const std::int64_t id = job.id;
  active_.emplace_hint(active_.end(), id, std::move(job));  // ids grow: usually the end
}

void JobTable::AddAll(std::map<std::int64_t, Job>& jobs) {
  for (const auto& [id, job] : jobs) {
    if (active_.count(id)) continue;  // stays in `jobs`
    if (job.state != JobState::kHeld) schedule_needed_ = true;
    Index(job);
    CountUser(job, +1);
  }
  active_.merge(jobs);
}

std::optional<Job> JobTable::Find(std::int64_t id) {
  auto it = active_.find(id);
  if (it != active_.end()) return it->second;
  auto stored = store_.Get(id);
  if (stored && *stored) return **stored;
  return std::nullopt;
}

void JobTable::Finish(Job& job, JobState state, std::optional<int> exit_code, const std::string& reason,
                      std::optional<double> end_time, bool stored, bool files, bool log) {
  job.state = state;
  job.exit_code = exit_code;
  job.reason = reason;
  job.end_time = end_time;
  schedule_needed_ = true;
  const std::int64_t id = job.id;
  if (!job.array_job_id) finished_[id] = AsDependencyState(state);  // arrays: answered from the store once all tasks ended
  cancel_requested_.erase(id);
  hold_requested_.erase(id);
  kept_from_launch_.erase(id);
  signal_when_stored_.erase(id);
  launched_at_.erase(id);
  RecordUsage(job);
  if (!stored) {
    Status s = store_.Update({&job});
    NoteWrite(s);
    if (!s.ok()) {
      // Kept, files and all, until FlushDirty has stored it: a restart collects it again.
      unstored_ends_.insert(id);
      dirty_.erase(id);
      log_(fmt::format("cannot store the end of job {} ({}): {}; its files are kept and the write is retried", id,
                       store::StateName(state), s.error().message));
      return;
    }
  }
  Forget(job, files, log);
}

void JobTable::Forget(Job& job, bool files, bool log) {
  const std::int64_t id = job.id;
  dirty_.erase(id);
  unstored_ends_.erase(id);
  if (files) JobFiles(files_, jobs_dir_, id).Remove();
  if (log)
    log_(fmt::format("job {} ({}) {}{}{}", id, job.user(), store::StateName(job.state),
                     job.exit_code ? fmt::format(" with exit code {}", *job.exit_code) : "",
                     job.reason.empty() ? "" : ": " + job.reason));
  unheld_.erase(id);
  CountUser(job, -1);
  active_.erase(id);
}

bool JobTable::RetryDue() const { return !trouble_ || clock_.MonotonicS() - failed_at_s_ >= limits_.retry_interval_s; }

void JobTable::FlushDirty() {
  if (!RetryDue()) return;
  std::vector<const Job*> jobs;
  for (const auto* ids : {&dirty_, &unstored_ends_})
    for (auto id : *ids) {
      auto it = active_.find(id);
      if (it != active_.end()) jobs.push_back(&it->second);
    }
  if (jobs.empty()) {
    dirty_.clear();
    unstored_ends_.clear();
    if (trouble_) NoteWrite(store_.CheckWritable());  // a failed submission or cancellation: is it over?
    return;
  }
  Status s = store_.Update(jobs);
  NoteWrite(s);
  if (!s.ok()) return;  // all kept for the next turn
  dirty_.clear();
  SignalStoredIdleCancels();
  const std::set<std::int64_t> ended = std::exchange(unstored_ends_, {});
  for (auto id : ended)
    if (auto it = active_.find(id); it != active_.end()) Forget(it->second);
}

void JobTable::NoteWrite(const Status& written) {
  if (written.ok()) {
    if (!trouble_) return;
    const std::size_t n = UnstoredUpdates();
    log_(fmt::format("the job store takes writes again (unavailable since {}); {} job update{} stored",
                     ClockTime(trouble_->since_wall_s), n, n == 1 ? "" : "s"));
    trouble_.reset();
    store_.SetBusyTimeout(limits_.busy_timeout_ms);
    schedule_needed_ = true;
    return;
  }
  failed_at_s_ = clock_.MonotonicS();
  if (!trouble_) {
    trouble_ = StoreTrouble{Now(), written.error().message};
    // Until it recovers, each turn tries again without waiting long for the lock.
    store_.SetBusyTimeout(limits_.retry_busy_timeout_ms);
    log_("the job store is unavailable: " + written.error().message +
         "; job updates are kept and written again on every tick, ended jobs keep their files until their end is "
         "stored, and nothing new starts meanwhile");
    return;
  }
  trouble_->error = written.error().message;
}

std::size_t JobTable::UnstoredUpdates() const {
  std::size_t n = unstored_ends_.size();
  for (auto id : dirty_) n += active_.count(id) && !unstored_ends_.count(id);
  return n;
}

std::string JobTable::StoreTroubleLine() const {
  if (!trouble_) return "";
  const std::string when = ClockTime(trouble_->since_wall_s);
  // The error as SQLite words it, after our own "database: update job: " prefix.
  std::string why = trouble_->error;
  if (auto colon = why.rfind(": "); colon != std::string::npos) why = why.substr(colon + 2);
  const std::size_t waiting = UnstoredUpdates();
  return fmt::format("the job store is unavailable since {}: {}; {} job update{} waiting", when, why, waiting,
                     waiting == 1 ? "" : "s");
}

void JobTable::CheckSupervisors() {
  std::vector<std::int64_t> ids;
  ForEachUnheld([&](std::int64_t id, const Job& job) {
    if (job.state == JobState::kLaunching || job.state == JobState::kRunning) ids.push_back(id);
  });
  // Each job's two files are read (its lock and its status): 10,000 running CPU-only jobs held
  // every tick for as long as that takes. A slice a tick, round robin: the ids after the last
  // slice's, then from the first.
  if (const std::size_t n = limits_.supervisor_checks_per_tick; n > 0 && ids.size() > n) {
    std::rotate(ids.begin(), std::upper_bound(ids.begin(), ids.end(), checked_up_to_), ids.end());
    ids.resize(n);
  }
  if (!ids.empty()) checked_up_to_ = ids.back();
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
    log_(fmt::format("cannot read the status of job {} ({}): {}; left as it was", id,
                     JobFiles(files_, jobs_dir_, id).status_path(), e.what()));
  }
}

void JobTable::ImportStatusOf(Job& job) {
  const std::int64_t id = job.id;
  JobFiles files(files_, jobs_dir_, id);
  // Liveness first, then the status: a supervisor found dead has written its last status already,
  // while one read the other way round may write "done" and exit between the two reads.
  const bool alive = files.SupervisorAlive();
  auto status = files.ReadStatus();
  if (status && status->pid && job.supervisor_pid != status->pid) {
    job.supervisor_pid = status->pid;
    // A cancel that came before the supervisor had reported itself: pass it on now.
    if (cancel_requested_.count(id)) SignalSupervisor(job, SIGTERM);
    else if (hold_requested_.count(id) && status->phase == "waiting") SignalSupervisor(job, HoldSignal());
  }
  if (status && status->phase == "done" && status->held && !cancel_requested_.count(id)) {
    // Left the line on `gpulane hold` without starting: held until released.
    hold_requested_.erase(id);
    launched_at_.erase(id);
    files.Remove();
    job.state = JobState::kHeld;
    job.start_time.reset();  // perhaps reported running before it saw the hold: it never started
    job.gpu_uuids.clear();
    job.reason = fmt::format("held: left the line for GPUs, starts again after gpulane release {}", store::JobIdText(job));
    job.supervisor_pid.reset();
    MarkDirty(job);
    schedule_needed_ = true;
    return;
  }
  if (status && status->phase == "done") return CollectEnd(job, *status);
  if (!alive) {
    // Nobody holds the lock: neither the supervisor nor its child before the exec is left, and
    // what the files say now is final (DecideLostSupervisor).
    const bool running = status && status->phase == "running";
    switch (DecideLostSupervisor(status, files.ExecMarked(), job.state == JobState::kRunning)) {
      case LostSupervisorAction::kCollect:  // "done" was collected above
        return;
      case LostSupervisorAction::kFail:  // it may have run: never start it again
        Finish(job, JobState::kFailed, std::nullopt,
               running ? "its supervisor ended without recording the job's end"
                       : "its supervisor and its record of the job's end are gone",
               Now());
        return;
      case LostSupervisorAction::kRequeue:
        RequeueNeverStarted(job, files);
        return;
      case LostSupervisorAction::kGrace:
        RequeueOrWait(job, status.has_value());
        return;
    }
    return;
  }
  if (status && status->phase == "running") return NoteRunning(job, *status);
  // Waiting for GPUs.
  if (status) job.reason = status->reason;
}

// `job`'s supervisor reported its end ("done"): retried, requeued, or ended as it says.
void JobTable::CollectEnd(Job& job, const SupervisorStatus& status) {
  const std::int64_t id = job.id;
  const store::AttemptEnd how = AttemptEndOf(status, cancel_requested_.count(id) > 0);
  // Its partition closed with ends = "requeue": back in line, to start when it opens again.
  // Or it gave way to a job that needed its GPUs (submit --preemptible, requeue).
  if ((status.partition_stopped || status.preempted) && status.requeue && !cancel_requested_.count(id)) {
    RetryJob(job, status, JobState::kCancelled);
    return;
  }
  if (store::ShouldRetry(how, store::FailedAttempts(job), job.spec.retries)) {
    RetryJob(job, status, JobState::kFailed);
    return;
  }
  hold_requested_.erase(id);
  if (status.interrupted) {  // stopped before its command started, though perhaps reported running
    job.start_time.reset();
    job.gpu_uuids.clear();
  }
  if (status.start_time) job.start_time = status.start_time;
  if (!status.gpu_uuids.empty()) job.gpu_uuids = status.gpu_uuids;
  if (!status.logs.stdout_path.empty() || !status.logs.stderr_path.empty())
    job.logs = LogsOfAttempt(job, status.logs);
  if (!status.isolation.empty()) job.isolation = status.isolation;
  JobState end = how == store::AttemptEnd::kCancelled ? JobState::kCancelled
                 : how == store::AttemptEnd::kTimeout ? JobState::kTimeout
                 : how == store::AttemptEnd::kCompleted ? JobState::kCompleted
                                                        : JobState::kFailed;
  Finish(job, end, status.exit_code, EndReason(job, end, status), status.end_time.value_or(Now()));
}

// The reason an ended job is stored with: its supervisor's, except for a cancel: the daemon's own
// words where the supervisor has none (the idle cancel says why), and for a launched job cancelled
// by a person, who did it, as for a pending one ("cancelled by alice"; its log's last line says
// when and how: supervisor.cc, EndWords), also while it waited for GPUs ("cancelled by alice while
// waiting for GPUs").
std::string JobTable::EndReason(const Job& job, JobState end, const SupervisorStatus& status) {
  constexpr std::string_view kCancelling = "cancelling (by ";
  if (end != JobState::kCancelled || job.reason.empty()) return status.reason;
  if (job.reason.rfind(kCancelling, 0) == 0 && job.reason.back() == ')') {
    const std::string by = job.reason.substr(kCancelling.size(), job.reason.size() - kCancelling.size() - 1);
    if (status.interrupted) return "cancelled by " + by + " while waiting for GPUs";
    return "cancelled by " + by + (status.reason.empty() ? "" : "; " + status.reason);
  }
  const bool keep = status.reason.empty() && job.reason.rfind("cancelling", 0) != 0;
  return keep ? job.reason : status.reason;
}

// `job`'s supervisor holds its lock and reported it "running": recorded as running, with its GPUs,
// and its log files and isolation once reported.
void JobTable::NoteRunning(Job& job, const SupervisorStatus& status) {
  if (job.state != JobState::kRunning) {
    job.state = JobState::kRunning;
    job.start_time = status.start_time;
    job.gpu_uuids = status.gpu_uuids;
    job.reason = status.reason;
    MarkDirty(job);
  }
  // The log files come in a second report, once the job's command has opened them.
  if (!status.logs.stdout_path.empty() || !status.logs.stderr_path.empty()) {
    if (store::JobLogs logs = LogsOfAttempt(job, status.logs); job.logs != logs) {
      job.logs = std::move(logs);
      MarkDirty(job);
    }
  }
  if (!status.isolation.empty() && job.isolation != status.isolation) {
    job.isolation = status.isolation;
    MarkDirty(job);
  }
}

// `job`'s supervisor recorded it running and is gone, and the job's command never started (no exec
// mark): back in line, as a lost launch is. Its status becomes "waiting" first, so the next
// supervisor may take the job, and so that a daemon restarted before the new state is stored finds
// a launch that was lost (requeued again, once) rather than a job that ran.
void JobTable::RequeueNeverStarted(Job& job, const JobFiles& files) {
  const std::int64_t id = job.id;
  if (cancel_requested_.count(id)) {
    Finish(job, JobState::kCancelled, std::nullopt, "cancelled before it started", Now());
    return;
  }
  SupervisorStatus waiting;
  waiting.reason = "requeued: its supervisor ended before the job's command started";
  if (Status s = files.WriteStatus(waiting); !s.ok()) {
    log_(fmt::format("cannot requeue job {}, whose supervisor ended before its command started: {}; tried again", id,
                     s.error().message));
    return;
  }
  job.state = JobState::kPending;
  job.reason = waiting.reason;
  job.start_time.reset();
  job.gpu_uuids.clear();
  job.logs = {};
  job.supervisor_pid.reset();
  launched_at_.erase(id);
  log_(fmt::format("job {} ({}) requeued: its supervisor ended after recording it running, before its command started",
                   id, job.user()));
  MarkDirty(job);
  schedule_needed_ = true;
}

store::AttemptEnd AttemptEndOf(const SupervisorStatus& status, bool cancel_requested) {
  if (cancel_requested || status.interrupted || status.partition_stopped || status.preempted)
    return store::AttemptEnd::kCancelled;
  if (status.timed_out) return store::AttemptEnd::kTimeout;
  if (status.start_failed || !status.exit_code) return store::AttemptEnd::kStartFailed;
  return *status.exit_code == 0 ? store::AttemptEnd::kCompleted : store::AttemptEnd::kFailedExit;
}

store::JobLogs LogsOfAttempt(const store::Job& job, store::JobLogs reported) {
  if (job.attempts.empty()) return reported;
  // A retry appends to the files of the first attempt: the job's part of them starts where that
  // attempt's did (its separator line and every attempt's output are the job's).
  if (!job.logs.stdout_path.empty() && job.logs.stdout_path == reported.stdout_path)
    reported.stdout_offset = std::min(reported.stdout_offset, job.logs.stdout_offset);
  if (!job.logs.stderr_path.empty() && job.logs.stderr_path == reported.stderr_path)
    reported.stderr_offset = std::min(reported.stderr_offset, job.logs.stderr_offset);
  return reported;
}

// Attempt job.attempts.size() of `job` ended in a failure that is retried: recorded as an earlier
// attempt and the job back in line. Stored before its files go, so that a crash in between
// collects the same end again (and decides the same); while the store takes no writes, the job
// stays as it is and the status is read again on the next tick.
void JobTable::RetryJob(Job& job, const SupervisorStatus& status, JobState attempt_state) {
  const std::int64_t id = job.id;
  const bool requeued = attempt_state != JobState::kFailed;  // stopped by its partition, not failed
  Job next = job;
  store::JobAttempt ended;
  ended.state = attempt_state;
  ended.reason = status.reason;
  ended.start_time = status.start_time ? status.start_time : job.start_time;
  ended.end_time = status.end_time.value_or(Now());
  ended.exit_code = status.exit_code;
  ended.gpu_uuids = status.gpu_uuids.empty() ? job.gpu_uuids : status.gpu_uuids;
  ended.preempted = status.preempted;
  if (!status.logs.stdout_path.empty() || !status.logs.stderr_path.empty()) next.logs = LogsOfAttempt(job, status.logs);
  next.logs.stdout_end.reset();  // the next attempt writes on
  next.logs.stderr_end.reset();
  next.attempts.push_back(ended);
  next.state = JobState::kPending;
  next.reason = requeued ? fmt::format("requeued: {}", ended.reason)
                         : fmt::format("retry {} of {} after {}", store::FailedAttempts(next), next.spec.retries,
                                       ended.exit_code ? fmt::format("exit code {}", *ended.exit_code)
                                                       : (ended.reason.empty() ? std::string("a failure") : ended.reason));
  next.start_time.reset();
  next.end_time.reset();
  next.exit_code.reset();
  next.gpu_uuids.clear();
  next.isolation.clear();  // the next attempt records its own
  next.supervisor_pid.reset();
  const bool in_trouble = trouble_.has_value();
  Status s = store_.Update({&next});
  NoteWrite(s);
  if (!s.ok()) {
    if (!in_trouble)  // said once; the store's trouble is logged (and shown) until it ends
      log_(fmt::format("cannot store the retry of job {}: {}; its status is read again on every tick", id,
                       s.error().message));
    return;
  }
  dirty_.erase(id);
  hold_requested_.erase(id);
  launched_at_.erase(id);
  JobFiles(files_, jobs_dir_, id).Remove();
  if (requeued)
    log_(fmt::format("job {} ({}) was stopped and is requeued: {}", id, job.user(), ended.reason));
  else
    log_(fmt::format("job {} ({}) failed{} and is retried ({} of {})", id, job.user(),
                     ended.exit_code ? fmt::format(" with exit code {}", *ended.exit_code) : "", store::FailedAttempts(next),
                     next.spec.retries));
  job = std::move(next);
  schedule_needed_ = true;
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
