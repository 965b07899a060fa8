// The daemon's side of running jobs: which queued jobs get a supervisor, and what their status
// files say. Recovery after a crash is the same code: a restarted daemon reads every supervisor's
// status and lock, so it re-adopts running jobs, collects results that arrived while it was down,
// and never starts a job twice (a job whose supervisor reported "running" is never started again).
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fmt/format.h>

#include "daemon/daemon.h"

namespace gpulane::daemon {
namespace {

using store::Job;
using store::JobState;

double Now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

std::optional<Job> Daemon::FindJob(std::int64_t id) {
  auto it = active_.find(id);
  if (it != active_.end()) return it->second;
  auto stored = store_->Get(id);
  if (stored && *stored) return **stored;
  return std::nullopt;
}

void Daemon::Finish(Job& job, JobState state, std::optional<int> exit_code, const std::string& reason,
                    std::optional<double> end_time, bool stored) {
  job.state = state;
  job.exit_code = exit_code;
  job.reason = reason;
  job.end_time = end_time;
  schedule_needed_ = true;
  if (!stored) store_->Update({&job});
  dirty_.erase(job.id);
  if (!job.array_job_id) finished_[job.id] = state;  // arrays: answered from the store once all tasks ended
  cancel_requested_.erase(job.id);
  hold_requested_.erase(job.id);
  launched_at_.erase(job.id);
  JobFiles(jobs_dir_, job.id).Remove();
  Log(fmt::format("job {} ({}) {}{}{}", job.id, job.user, store::StateName(state),
                  exit_code ? fmt::format(" with exit code {}", *exit_code) : "", reason.empty() ? "" : ": " + reason));
  active_.erase(job.id);
}

void Daemon::FlushDirty() {
  std::vector<const Job*> jobs;
  for (auto id : dirty_) {
    auto it = active_.find(id);
    if (it != active_.end()) jobs.push_back(&it->second);
  }
  if (!jobs.empty()) {
    Status s = store_->Update(jobs);
    if (!s.ok()) Log("cannot store job updates: " + s.error().message);
  }
  dirty_.clear();
}

void Daemon::ImportStatus(std::int64_t id) {
  auto it = active_.find(id);
  if (it == active_.end()) return;
  Job& job = it->second;
  if (job.state != JobState::kLaunching && job.state != JobState::kRunning) return;
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
  // Either the supervisor has not taken its lock yet (just launched, or launched just before a
  // daemon restart) or it is gone. Give a launch some seconds before treating it as lost; one that
  // has reported (a status) without holding its lock now is gone for sure.
  auto launched = launched_at_.find(id);
  if (launched == launched_at_.end()) launched = launched_at_.emplace(id, Now()).first;
  const bool gone = status.has_value() || Now() - launched->second >= 10;
  if (gone && cancel_requested_.count(id)) {  // cancelled before it started: never back in line
    Finish(job, JobState::kCancelled, std::nullopt, "cancelled before it started", Now());
    return;
  }
  if (Now() - launched->second < 10) return;
  // The supervisor is gone and the job never ran: back in line. Its lock file stays, so if that
  // supervisor was only slow, it and a new one cannot both hold the job.
  job.state = JobState::kPending;
  job.reason = "requeued: its supervisor ended before the job started";
  job.supervisor_pid.reset();
  launched_at_.erase(launched);
  MarkDirty(job);
}

void Daemon::CheckSupervisors() {
  std::vector<std::int64_t> ids;
  for (auto& [id, job] : active_)
    if (job.state == JobState::kLaunching || job.state == JobState::kRunning) ids.push_back(id);
  for (auto id : ids) ImportStatus(id);
}

void Daemon::LaunchEligible() {
  unsigned waiting = 0;
  std::vector<Job*> candidates;
  for (auto& [id, job] : active_) {
    if (job.state == JobState::kLaunching) ++waiting;
    if (job.state == JobState::kPending) candidates.push_back(&job);
  }
  const unsigned limit = config_.max_waiting_supervisors ? config_.max_waiting_supervisors : std::max(4u, 2 * gpu_count_);
  if (waiting >= limit || candidates.empty()) return;
  // Only the first few in line matter; ordering all of a long queue on every event would not scale.
  auto before = [](const Job* a, const Job* b) {
    if (a->spec.request.priority != b->spec.request.priority) return a->spec.request.priority > b->spec.request.priority;
    return a->id < b->id;
  };
  const std::size_t look = std::min<std::size_t>(candidates.size(), 4 * limit + 64);
  std::partial_sort(candidates.begin(), candidates.begin() + static_cast<std::ptrdiff_t>(look), candidates.end(), before);
  candidates.resize(look);
  std::vector<Job*> to_launch;
  std::vector<Job*> doomed;
  for (Job* job : candidates) {
    if (waiting + to_launch.size() >= limit) break;
    bool ready = true;
    std::string blocked, failed;
    // A dependency on an array's id means every task of the array: it has ended when no task is
    // still queued or running, and succeeded when every task completed. A task ("12_3") is that task alone.
    auto state_of = [&](const store::JobRef& ref) -> std::optional<JobState> {
      if (ref.task) return TaskState(ref);
      const std::int64_t dep = ref.id;
      for (auto& [other_id, other] : active_)
        if (other_id == dep || (other.array_job_id && *other.array_job_id == dep)) return other.state;
      auto cached = finished_.find(dep);
      if (cached != finished_.end()) return cached->second;
      auto stored = store_->Get(dep);
      if (!stored || !*stored) return std::nullopt;
      JobState state = (*stored)->state;
      if ((*stored)->array_job_id && *(*stored)->array_job_id == dep) {
        auto tasks = store_->FinishedArrayStates(dep);
        if (tasks)
          for (JobState t : *tasks)
            if (t != JobState::kCompleted) state = t;
      }
      return finished_[dep] = state;
    };
    for (auto dep : job->spec.after_ok) {
      auto s = state_of(dep);
      if (!s || !store::IsFinished(*s)) ready = false, blocked = fmt::format("waiting for job {}", dep);
      else if (*s != JobState::kCompleted) failed = fmt::format("job {} it depends on ended {}", dep, store::StateName(*s));
    }
    for (auto dep : job->spec.after_any) {
      auto s = state_of(dep);
      if (!s || !store::IsFinished(*s)) ready = false, blocked = fmt::format("waiting for job {} to end", dep);
    }
    if (!failed.empty()) {
      job->reason = failed;
      doomed.push_back(job);
      continue;
    }
    if (!ready) {
      if (job->reason != blocked) job->reason = blocked;
      continue;
    }
    to_launch.push_back(job);
  }
  for (Job* job : doomed) Finish(*job, JobState::kCancelled, std::nullopt, job->reason, Now());
  if (to_launch.empty()) return;
  // Durably mark them launching before any supervisor exists, so a crash in between only ever
  // leads to a re-launch of a job that has not run.
  std::vector<const Job*> marked;
  for (Job* job : to_launch) {
    job->state = JobState::kLaunching;
    launched_at_[job->id] = Now();
    job->reason = "waiting for GPUs";
    marked.push_back(job);
  }
  Status s = store_->Update(marked);
  if (!s.ok()) {
    Log("cannot mark jobs launching: " + s.error().message);
    return;
  }
  for (Job* job : to_launch) Launch(*job);
}

void Daemon::Launch(Job& job) {
  JobFiles files(jobs_dir_, job.id);
  Status s = files.WriteSpec(job);
  if (!s.ok()) {
    Finish(job, JobState::kFailed, std::nullopt, s.error().message, Now());
    return;
  }
  const std::string id = std::to_string(job.id);
  const std::string log = paths_.state_dir + "/supervisor.log";
  pid_t child = fork();
  if (child == 0) {
    // Let go of the daemon's lock and socket first: they are close-on-exec, but a copy held until
    // the exec would keep a daemon restarted after a kill -9 from taking its lock.
    close(lock_fd_);
    close(listen_fd_);
    // Detach twice so the supervisor outlives this daemon and is nobody's child but init's.
    setsid();
    if (fork() != 0) _exit(0);
    int null_fd = open("/dev/null", O_RDONLY);
    int log_fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    dup2(null_fd, 0);
    dup2(log_fd, 1);
    dup2(log_fd, 2);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    signal(SIGPIPE, SIG_DFL);
    execl(self_exe_.c_str(), "gpulane", "_supervise", jobs_dir_.c_str(), id.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  if (child > 0) waitpid(child, nullptr, 0);
}

}  // namespace gpulane::daemon
