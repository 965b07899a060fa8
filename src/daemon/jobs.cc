// Which queued jobs get a supervisor: the job table gathers the queue and the dependencies' states,
// sched::PlanLaunches decides, and the table applies the decision (durably marking jobs launching
// before any supervisor exists).

#include "daemon/job_files.h"
#include "daemon/job_table.h"
#include "sched/user_limits.h"
#include "util/strings.h"

#include <fmt/format.h>

namespace gpulane::daemon {

using store::Job;
using store::JobState;
using sched::DependencyState;

DependencyState AsDependencyState(JobState state) {
  switch (state) {
    case JobState::kCompleted: return DependencyState::kCompleted;
    case JobState::kFailed: return DependencyState::kFailed;
    case JobState::kCancelled: return DependencyState::kCancelled;
    case JobState::kTimeout: return DependencyState::kTimeout;
    case JobState::kPending:
    case JobState::kHeld:
    case JobState::kLaunching:
    case JobState::kRunning: return DependencyState::kUnfinished;
  }
  return DependencyState::kUnfinished;
}

std::optional<std::int64_t> JobTable::TaskJobId(const sched::JobRef& ref) {
  if (!ref.task) return std::nullopt;
  // Task ids never change: found once by an index lookup, then remembered.
  const std::pair<std::int64_t, int> key{ref.id, *ref.task};
  auto known = task_ids_.find(key);
  if (known == task_ids_.end()) {
    auto id = store_.TaskId(ref.id, *ref.task);
    if (!id || !*id) return std::nullopt;
    if (task_ids_.size() >= kTaskIdsKept) task_ids_.clear();
    known = task_ids_.emplace(key, **id).first;
  }
  return known->second;
}

std::optional<JobState> JobTable::TaskState(const sched::JobRef& ref) {
  const std::optional<std::int64_t> id = TaskJobId(ref);
  if (!id) return std::nullopt;
  if (auto it = active_.find(*id); it != active_.end()) return it->second.state;
  auto head = store_.Head(*id);
  return head && *head ? std::optional<JobState>((*head)->state) : std::nullopt;
}

// A dependency on an array's id means every task of the array: it has ended when no task is still
// queued or running, and succeeded when every task completed. A task ("12_3") is that task alone.
// Each answer takes a few map look-ups (and a store read the first time a finished job is asked
// about), never a walk over the table: it is asked for every dependency of every job in line.
DependencyState JobTable::DependencyStateOf(const sched::JobRef& ref) {
  if (ref.task) {
    auto state = TaskState(ref);
    return state ? AsDependencyState(*state) : DependencyState::kUnfinished;
  }
  const std::int64_t dep = ref.id;
  // The job itself, or (an array's id) the first of its unfinished tasks, which take consecutive
  // ids from the array's id on.
  if (auto it = active_.lower_bound(dep);
      it != active_.end() && (it->first == dep || (it->second.array_job_id && *it->second.array_job_id == dep)))
    return AsDependencyState(it->second.state);
  if (auto cached = finished_.find(dep); cached != finished_.end()) return cached->second;
  auto stored = store_.Head(dep);
  if (!stored || !*stored) return DependencyState::kUnfinished;  // unknown: keep waiting
  DependencyState state = AsDependencyState((*stored)->state);
  if ((*stored)->array_job_id && *(*stored)->array_job_id == dep) {  // an array (no task is active)
    std::vector<DependencyState> tasks = {state};
    if (auto ended = store_.FinishedArrayStates(dep))
      for (JobState t : *ended) tasks.push_back(AsDependencyState(t));
    state = sched::ArrayDependencyState(tasks);
  }
  if (state != DependencyState::kUnfinished) finished_[dep] = state;
  return state;
}

// Pending jobs' reason while the store takes no writes (no launch can be recorded).
constexpr const char* kStoreUnavailableReason = "not started: the job store is unavailable";

// What one launch decision gathers from the table for sched::PlanLaunches.
struct JobTable::LaunchRound {
  sched::LaunchLimits limits;
  // limits.max_gpus: GPUs each user's launched jobs hold or wait for (gpulane run's leases are
  // counted in the lease line itself, sched::Schedule).
  std::map<std::uint32_t, unsigned> gpus_of_uid;
  double now_s = 0;
  // Within a --priority class, jobs go by their fair-share priority (sched/fairshare.h): the
  // user's factor (one per user) and the job's age.
  std::map<std::string, sched::UserShare> shares;
  // limits.max_gpu_hours_per_day: users whose queued jobs used that much in the last 24 hours.
  std::map<std::string, std::string> over_gpu_hours;
  std::vector<sched::QueuedJob> queue;

  double FactorOf(const std::string& user) const {
    auto it = shares.find(user);
    return it == shares.end() ? 1.0 : it->second.factor;
  }
};

void JobTable::LaunchEligible() {
  if (LaunchesWaitForStore()) return;
  LaunchRound round = GatherLaunchRound();
  std::vector<std::int64_t> in_line;
  in_line.reserve(round.queue.size());
  for (const sched::QueuedJob& q : round.queue) in_line.push_back(q.id);
  sched::LaunchPlan plan =
      sched::PlanLaunches(std::move(round.queue), [this](const sched::JobRef& dep) { return DependencyStateOf(dep); }, round.limits);
  AddPastCap(plan);
  NoteWhyWaiting(plan, in_line, round.now_s, round.shares);
  for (const auto& [id, reason] : plan.blocked) active_.at(id).reason = reason;
  for (const auto& [id, reason] : plan.cancel) Finish(active_.at(id), JobState::kCancelled, std::nullopt, reason, Now());
  if (plan.launch.empty()) return;
  // Durably mark them launching before any supervisor exists, so a crash in between only ever
  // leads to a re-launch of a job that has not run.
  const std::vector<Job*> to_launch = MarkLaunching(plan, round.gpus_of_uid);
  if (to_launch.empty()) return;
  StoreAndLaunch(to_launch);
}

void JobTable::AddPastCap(sched::LaunchPlan& plan) {
  if (plan.capped.empty() || !limits_.line_now) return;
  std::vector<sched::CappedJob> capped;
  for (std::int64_t id : plan.capped)
    if (const sched::Request& r = active_.at(id).spec.request; sched::MayLaunchPastCap(r)) capped.push_back({id, r});
  if (capped.empty()) return;
  std::optional<LineSeen> seen = limits_.line_now();
  if (!seen) return;  // unknown is not free
  // Jobs handed to supervisors (or about to be) that have not joined the line yet will: the
  // candidates go behind them too. A running job whose lease is not there holds GPUs the line does
  // not show: unknown, so nothing starts past the cap.
  std::vector<sched::Request>& line = seen->line.line;
  bool unseen_running = false;
  ForEachUnheld([&](std::int64_t, const Job& job) {
    if (job.spec.request.count == 0 || seen->joined.count({job.uid(), store::JobIdText(job)})) return;
    if (job.state == JobState::kLaunching) line.push_back(job.spec.request);
    unseen_running = unseen_running || job.state == JobState::kRunning;
  });
  if (unseen_running) return;
  for (std::int64_t id : plan.launch)
    if (const Job& job = active_.at(id); job.spec.request.count > 0) line.push_back(job.spec.request);
  for (std::int64_t id : sched::LaunchPastCap(seen->line, capped)) plan.launch.push_back(id);
}

bool JobTable::LaunchesWaitForStore() {
  if (unstored_ends_.empty() && RetryDue()) return false;
  // The store failed the last write (FlushDirty tries again): ended jobs are stored before
  // anything new starts, and a launch is tried at most every retry_interval_s. (While nothing
  // waits, the launch's own write finds out whether the store takes writes again.)
  ForEachUnheld([](std::int64_t, Job& job) {
    if (job.state == JobState::kPending) job.reason = kStoreUnavailableReason;
  });
  return true;
}

JobTable::LaunchRound JobTable::GatherLaunchRound() {
  LaunchRound round;
  round.limits = {limits_.max_waiting, 0};
  if (limits_.max_gpus_of)
    ForEachUnheld([&](std::int64_t, const Job& job) {
      if (job.state == JobState::kLaunching || job.state == JobState::kRunning) round.gpus_of_uid[job.uid()] += job.spec.request.count;
    });
  round.now_s = Now();
  round.shares = FairShareAt(round.now_s);
  round.over_gpu_hours = GpuHoursHeldBack(round.now_s);
  round.limits.max_preemptions_per_minute = limits_.max_preemptions_per_minute;
  ForEachUnheld([&](std::int64_t id, Job& job) { ConsiderForLaunch(id, job, round); });
  return round;
}

void JobTable::ConsiderForLaunch(std::int64_t id, Job& job, LaunchRound& round) {
  sched::LaunchLimits& limits = round.limits;
  const double now = round.now_s;
  // sched.max_preemptions_per_minute: the machine's preemptions in the last 60 s.
  for (auto a = job.attempts.rbegin(); limits.max_preemptions_per_minute && a != job.attempts.rend(); ++a) {
    if (!a->end_time || *a->end_time < now - 60) break;
    if (a->preempted) ++limits.preemptions_last_minute;
  }
  const bool cpu_only = job.spec.request.count == 0;  // -g 0: waits for no GPU, uses no GPU-hours
  if (job.state == JobState::kLaunching && !cpu_only)
    ++(job.spec.request.preemptible != sched::Preemptible::kNo ? limits.already_waiting_preemptible : limits.already_waiting);
  // Held jobs are left out rather than passed as held (and not even walked: unheld_); so are those a cancel or hold in parts will reach.
  if (job.state != JobState::kPending || cancel_requested_.count(id) || kept_from_launch_.count(id)) return;
  if (job.reason == kStoreUnavailableReason) job.reason.clear();
  const sched::FairShareSettings& fs = limits_.fair_share;
  if (cpu_only) {
    round.queue.push_back({id, job.spec.request.priority, false, job.spec.after_ok, job.spec.after_any,
                           sched::PriorityOf(round.FactorOf(job.user()), now - job.submit_time_s(), fs).value, false, true});
    return;
  }
  if (limits_.max_gpus_of) {
    const unsigned held = round.gpus_of_uid[job.uid()];
    if (auto why = sched::GpuLimitReason(LimitsConfig{limits_.max_gpus_of(job.uid(), job.user()), {}, {}, {}}, job.user(), held,
                                         job.spec.request.count)) {
      job.reason = *why;
      return;
    }
  }
  if (auto over = round.over_gpu_hours.find(job.user()); over != round.over_gpu_hours.end()) {
    job.reason = over->second;
    return;
  }
  const double priority = sched::PriorityOf(round.FactorOf(job.user()), now - job.submit_time_s(), fs).value;
  round.queue.push_back({id, job.spec.request.priority, false, job.spec.after_ok, job.spec.after_any, priority,
                         job.spec.request.preemptible != sched::Preemptible::kNo});
  round.queue.back().preemptions = static_cast<unsigned>(store::Preemptions(job));
}

std::vector<Job*> JobTable::MarkLaunching(const sched::LaunchPlan& plan, std::map<std::uint32_t, unsigned>& gpus_of_uid) {
  std::vector<Job*> to_launch;
  for (std::int64_t id : plan.launch) {
    Job& job = active_.at(id);
    // Two jobs of one user near its limits.max_gpus: only as many as fit are launched; the rest
    // stay pending (the next round, which counts these as launched, leaves them out).
    if (limits_.max_gpus_of && job.spec.request.count > 0) {
      unsigned& held = gpus_of_uid[job.uid()];
      if (auto why = sched::GpuLimitReason(LimitsConfig{limits_.max_gpus_of(job.uid(), job.user()), {}, {}, {}}, job.user(), held,
                                           job.spec.request.count)) {
        job.reason = *why;
        schedule_needed_ = true;
        continue;
      }
      held += job.spec.request.count;
    }
    job.state = JobState::kLaunching;
    job.reason = job.spec.request.count == 0 ? "starting" : "joining the line for GPUs (its supervisor is starting)";
    to_launch.push_back(&job);
  }
  return to_launch;
}

void JobTable::StoreAndLaunch(const std::vector<Job*>& to_launch) {
  Status s = store_.Update(std::vector<const Job*>(to_launch.begin(), to_launch.end()));
  NoteWrite(s);
  if (!s.ok()) {
    // Not launched: back to pending as they were, tried again once the store takes writes.
    log_("cannot mark jobs launching: " + s.error().message);
    for (Job* job : to_launch) {
      job->state = JobState::kPending;
      job->reason = kStoreUnavailableReason;
    }
    return;
  }
  for (Job* job : to_launch) launched_at_[job->id] = clock_.MonotonicS();
  for (Job* job : to_launch) Launch(*job);
}

void JobTable::NoteWhyWaiting(const sched::LaunchPlan& plan, const std::vector<std::int64_t>& in_line, double now_s,
                              const std::map<std::string, sched::UserShare>& shares) {
  const sched::FairShareSettings& fs = limits_.fair_share;
  std::set<std::int64_t> decided(plan.launch.begin(), plan.launch.end());
  for (const auto& r : plan.blocked) decided.insert(r.id);
  for (const auto& r : plan.cancel) decided.insert(r.id);
  std::optional<sched::JobAhead> ahead;
  // A job the plan looked at and did not decide was left out by the cap (its own for preemptible
  // jobs: sched/launch.h): it says so first, and its place among those that join next.
  unsigned firm_left = 0, preemptible_left = 0;
  for (std::int64_t id : plan.order) {
    Job& job = active_.at(id);
    auto share = shares.find(job.user());
    const sched::UserShare user_share = share == shares.end() ? sched::UserShare{} : share->second;
    const sched::JobPriority p = sched::PriorityOf(user_share.factor, now_s - job.submit_time_s(), fs);
    if (!decided.count(id)) {
      const bool preemptible = job.spec.request.preemptible != sched::Preemptible::kNo;
      const unsigned place = ++(preemptible ? preemptible_left : firm_left);
      job.reason = fmt::format("{} to join the line for GPUs when a place frees (daemon.max_waiting: {} {}jobs wait "
                               "there at once); {}", Ordinal(place), limits_.max_waiting, preemptible ? "preemptible " : "",
                               sched::WaitReason(job.user(), user_share, p, ahead, fs.half_life_s));
      if (job.spec.request.priority != 0) job.reason = fmt::format("--priority {}, {}", job.spec.request.priority, job.reason);
    }
    ahead = sched::JobAhead{job.user(), store::JobIdText(job), p.value};  // "12_0", never the array's id
  }
  // The plan orders only the head of a long line (sched::LaunchLookahead): every job behind it is
  // behind all of those, and its exact place is not worked out (never a blank WHY for a waiting job).
  if (in_line.size() <= plan.order.size()) return;
  const std::set<std::int64_t> looked_at(plan.order.begin(), plan.order.end());
  const std::string behind = fmt::format("behind at least {} jobs in line", plan.order.size());
  for (std::int64_t id : in_line)
    if (!looked_at.count(id)) {
      Job& job = active_.at(id);
      if (job.reason != behind) job.reason = behind;
    }
}

void JobTable::Launch(Job& job) {
  JobFiles files(files_, jobs_dir_, job.id);
  // A retry's earlier supervisor left its "done" status if the daemon stopped between storing the
  // retry and removing the files: it is that attempt's, and would stop the new supervisor. (Its
  // lock stays, as for any requeued job.)
  if (auto old = job.attempts.empty() ? std::nullopt : files.ReadStatus(); old && old->phase == "done") files.RemoveStatus();
  if (Status s = files.WriteSpec(job); !s.ok()) {
    Finish(job, JobState::kFailed, std::nullopt, s.error().message, Now());
    return;
  }
  // A supervisor that could not be started is a lost launch: requeued after the grace.
  if (Status s = launcher_.Start(job.id); !s.ok()) log_(s.error().message);
}

}  // namespace gpulane::daemon
