#include "exec/leased_job.h"

#include <signal.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <utility>

#include "exec/job_env.h"
#include "exec/memory_watch.h"
#include "lease/job_observation.h"
#include "lease/occupancy.h"
#include "lease/preemption.h"
#include "sched/preemption.h"
#include "os/process_table.h"
#include "util/strings.h"
#include "util/terminal_text.h"

namespace gpulane::exec {
namespace {

sigset_t StopSignals(const std::vector<int>& extra) {
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&set, s);
  for (int s : extra) sigaddset(&set, s);
  return set;
}

// A signal of `set` that is pending now (taken, so it is acted on once), or 0.
int TakePending(const sigset_t& set) {
  sigset_t pending;
  if (sigpending(&pending) != 0) return 0;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (!sigismember(&set, sig) || !sigismember(&pending, sig)) continue;
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    timespec now{0, 0};
    if (sigtimedwait(&one, nullptr, &now) == sig) return sig;
  }
  return 0;
}

// Looks, now and then, at the job's GPUs and the others: warns once for each process of the job on
// a GPU it did not lease (it counts as foreign there: lease/occupancy.h), each process on one of
// its GPUs that is neither the job's nor another lease's of that GPU (an intruder: with no daemon
// running nobody else would tell), and each process of another PID namespace counted as the job's
// without proof. What lease/occupancy judges, so the warning and every decision agree.
class GpuWatch {
 public:
  GpuWatch(GpuBackend& backend, ProcessTable& processes, const lease::LeaseDir& dir, std::string lease_name,
           std::string job_id, std::function<void(const std::string&)> warn)
      : backend_(backend),
        processes_(processes),
        dir_(dir),
        lease_(std::move(lease_name)),
        job_id_(std::move(job_id)),
        warn_(std::move(warn)) {}

  void Check() {
    if (!warn_) return;
    auto snapshot = backend_.Read(ReadOptions{false, false, false});
    if (!snapshot) return;
    AnnotateProcesses(*snapshot, processes_);
    const lease::DirContents contents = dir_.Read();
    const lease::Occupancy occupancy = lease::BuildOccupancy(*snapshot, contents.leases, processes_);
    for (const lease::StrayProcess& stray : occupancy.strays) {
      if (stray.lease != lease_ || !warned_.insert({stray.gpu, stray.pid}).second) continue;
      warn_(fmt::format("process {} of job {} runs on GPU{}, which the job did not lease: gpulane counts it as "
                        "foreign there (no other job gets that GPU while it runs); make the program use only "
                        "the GPUs in CUDA_VISIBLE_DEVICES",
                        stray.pid, job_id_, stray.gpu));
    }
    const std::set<unsigned> mine = LeasedIndices(*snapshot, contents.leases);
    for (const lease::OutsideProcess& o : occupancy.outside) {
      if (!mine.count(o.gpu) || (!o.counted_as.empty() && o.counted_as != lease_)) continue;
      if (!warned_.insert({o.gpu, o.pid}).second) continue;
      if (o.counted_as.empty())
        warn_(fmt::format("{} uses GPU{}, which job {} leased: it is neither this job's process nor another lease's "
                          "of that GPU (an intruder: its memory and compute are taken from the job)",
                          o.words, o.gpu, job_id_));
      else
        warn_(fmt::format("pid {} on GPU{} is not visible here (another PID namespace, as in a container) and is "
                          "counted as job {}'s: gpulane cannot tell whether it is (the job's own processes are not "
                          "visible here either)",
                          o.pid, o.gpu, job_id_));
    }
  }

 private:
  // The PCI-order indices of the whole GPUs this job's lease holds.
  std::set<unsigned> LeasedIndices(const GpuSnapshot& snapshot, const std::vector<lease::LeaseRecord>& leases) const {
    std::set<unsigned> out;
    for (const lease::LeaseRecord& l : leases)
      if (lease::IsNamed(l, lease_))
        for (const GpuDevice& d : snapshot.devices)
          if (lease::HoldsGpu(l, d.uuid)) out.insert(d.pci_index);
    return out;
  }

  GpuBackend& backend_;
  ProcessTable& processes_;
  const lease::LeaseDir& dir_;
  std::string lease_, job_id_;
  std::function<void(const std::string&)> warn_;
  std::set<std::pair<unsigned, std::uint32_t>> warned_;
};

// Asks, for a preemptible job, whether a waiting job needs its GPUs (lease/preemption.h).
class PreemptWatch {
 public:
  PreemptWatch(const os::Env& env, GpuBackend& backend, const lease::LeaseDir& dir, std::string lease_name,
               const lease::WaitRequest& wait, sched::LineMemory unclaimed)
      : env_(env),
        backend_(backend),
        dir_(dir),
        lease_(std::move(lease_name)),
        wait_(wait),
        unclaimed_(std::move(unclaimed)) {}

  /// True (once, with reason()) when the job must give way now.
  bool Check() {
    const lease::DirContents contents = dir_.Read();
    if (lease::TicketsOfLine(contents.tickets, "").empty()) return false;  // nobody waits: no need to read the GPUs
    auto snapshot = backend_.Read(lease::DecisionReadOptions(wait_.request));
    if (!snapshot) return false;  // unknown: it keeps running, and the next look decides
    AnnotateProcesses(*snapshot, env_.processes);
    reason_ = lease::PreemptionOf(contents, *snapshot, env_.processes, lease_, wait_, env_.clock.WallS(), free_since_s_,
                                  unclaimed_);
    return reason_.has_value();
  }
  const std::optional<std::string>& reason() const { return reason_; }

 private:
  const os::Env& env_;
  GpuBackend& backend_;
  const lease::LeaseDir& dir_;
  std::string lease_;
  const lease::WaitRequest& wait_;
  std::map<std::string, double> free_since_s_;
  sched::LineMemory unclaimed_;  ///< the waiter's memory of grants nobody claimed, kept up
  std::optional<std::string> reason_;
};

// Meters the job's use of its GPUs itself, for `gpulane run` when no daemon does (its usage line):
// the same view of the lease as the daemon's sampler (lease/job_observation.h).
class UsageWatch {
 public:
  UsageWatch() = default;

  /// One sample of the lease's GPUs (ViewOwnLease).
  void Observe(const std::vector<lease::LeaseGpuView>& views) {
    if (!meter_) {
      std::vector<double> shares;
      for (const auto& v : views) shares.push_back(v.share);
      meter_.emplace(std::move(shares));
    }
    std::vector<telemetry::JobGpuObservation> observed;
    for (const auto& v : views) observed.push_back(v.observed);
    meter_->Observe(observed);
  }
  /// The usage of a job that ran from `start_s` to `end_s` (wall clock), nullopt before a sample.
  std::optional<telemetry::JobUsage> Summary(double start_s, double end_s, double wait_s) const {
    if (!meter_) return std::nullopt;
    return meter_->Summary(start_s, end_s, wait_s);
  }

 private:
  std::optional<telemetry::JobMeter> meter_;
};

// Sets up the device isolation of a job granted `granted` (none: -g 0) in `spec`: a plan the
// forked child carries out, or why there can be none (a warning, or a failed start if required).
void PrepareIsolation(const Clock& clock, const LeasedJob& job, const LeasedJobHooks& hooks,
                      const std::vector<GrantedDevice>& granted, JobSpec& spec) {
  if (!job.isolation.devices) return;
  spec.isolation_required = job.isolation.required;
  spec.on_warning = hooks.on_warning;
  if (geteuid() != 0) {  // per-user mode: advice-only, unless isolation is required
    if (job.isolation.required)
      spec.isolation_failure = "isolate the job's GPUs: jobs started by a user other than root cannot have a mount "
                               "namespace of their own (submit it to the system daemon, or set [run] isolate_required = false)";
    return;
  }
  const double planning_s = clock.MonotonicS();
  auto plan = PlanIsolation(granted, IsolationRoots::FromEnvironment());
  spec.isolation_plan_us = std::llround((clock.MonotonicS() - planning_s) * 1e6);
  if (!plan) spec.isolation_failure = plan.error().message;
  else if (!plan->empty()) spec.isolation = std::move(plan).value();  // else nothing to hide: no namespace
}

// What isolation the job was given, in words for `show` (LeasedJobHooks::on_isolation).
std::string IsolationRecord(const LeasedJob& job, const JobSpec& spec, bool applied, const std::string& not_applied) {
  if (!job.isolation.devices) return "off";
  if (!not_applied.empty())
    return fmt::format("{}: {}", spec.isolation_required ? "not applied, not started ([run] isolate_required)"
                                                         : "not applied, started with a warning", not_applied);
  if (geteuid() != 0) return "advice-only (not started as root: CUDA_VISIBLE_DEVICES only)";
  if (applied && spec.isolation) return spec.isolation->summary;
  return "devices: nothing to hide (no GPU device node or driver entry here)";
}

// Has `spec` tell the hooks (and `outcome`) what isolation the job was given.
void RecordIsolation(const LeasedJob& job, const LeasedJobHooks& hooks, JobSpec& spec, LeasedJobOutcome& outcome) {
  spec.on_isolated = [&job, &hooks, &spec, &outcome](bool applied, const std::string& not_applied) {
    outcome.isolation = IsolationRecord(job, spec, applied, not_applied);
    if (hooks.on_isolation) hooks.on_isolation(outcome.isolation);
  };
}

}  // namespace

Result<LeasedJobOutcome> RunWithoutGpus(const os::Env& env, const LeasedJob& job, const LeasedJobHooks& hooks) {
  const sigset_t stops = StopSignals(job.wait.extra_signals);
  sigprocmask(SIG_BLOCK, &stops, nullptr);
  LeasedJobOutcome outcome;
  if (int sig = TakePending(stops)) {
    outcome.interrupted_by_signal = sig;
    return outcome;
  }
  const lease::Grant none;
  if (hooks.on_granted)
    if (Status s = hooks.on_granted(none); !s.ok()) return s.error();
  JobSpec spec = job.job;
  spec.env = JobEnvironment(job.job.env, GpuSnapshot{}, {}, false, job.job_id, std::nullopt, /*lease_fd=*/-1);
  spec.env.insert(spec.env.end(), job.extra_env.begin(), job.extra_env.end());
  PrepareIsolation(env.clock, job, hooks, {}, spec);
  RecordIsolation(job, hooks, spec, outcome);
  if (hooks.on_running && job.running_hook_s > 0) {
    spec.tick_s = job.running_hook_s;
    spec.on_tick = [&hooks] {
      hooks.on_running();
      return false;  // never stops the job
    };
  }
  const double start = env.clock.MonotonicS();
  auto ran = RunJob(
      spec, env, [&](pid_t pgid) { if (hooks.on_started) hooks.on_started(pgid); }, hooks.on_logs);
  outcome.job_s = env.clock.MonotonicS() - start;
  if (!ran) return ran.error();
  outcome.job = std::move(ran).value();
  return outcome;
}

namespace {

// What the outcome says of the grant: the GPUs (PCI-order indices, UUIDs), the wait, the lease.
void RecordGrant(const lease::Grant& grant, LeasedJobOutcome& outcome) {
  outcome.gpus = grant.gpus;
  for (unsigned i : grant.gpus) outcome.gpu_uuids.push_back(grant.mig_uuid.value_or(grant.snapshot.devices[i].uuid));
  outcome.waited_s = grant.waited_s;
  outcome.lease_name = grant.lease.name();
}

// The job's share of the grant: the lease's descriptor kept open in it, and its environment
// (CUDA_VISIBLE_DEVICES and the rest, job_env.h).
void GiveGrant(const LeasedJob& job, const lease::Grant& grant, JobSpec& spec) {
  spec.keep_fds.push_back(grant.lease.fd());
  spec.env = JobEnvironment(job.job.env, grant.snapshot, grant.gpus, job.uuids_in_env, job.job_id,
                            job.wait.request.mem_bytes, grant.lease.fd(), grant.mig_uuid);
  spec.env.insert(spec.env.end(), job.extra_env.begin(), job.extra_env.end());
}

// The job's spec once granted (`spec`, a copy of job.job, stays where it is: its on_isolated hook
// holds it and `outcome` by reference): its stop, its grant, its isolation. `granted_s`: when the
// grant came (monotonic).
void PrepareGranted(const os::Env& env, const LeasedJob& job, const LeasedJobHooks& hooks, const lease::Grant& grant,
                    double granted_s, JobSpec& spec, LeasedJobOutcome& outcome) {
  // From the grant: what the hooks took since is not the job's.
  if (grant.partition_stop) spec.stop_in_s = std::max(0.0, grant.partition_stop->in_s - (env.clock.MonotonicS() - granted_s));
  GiveGrant(job, grant, spec);
  PrepareIsolation(env.clock, job, hooks, GrantedDevices(grant.snapshot, grant.gpus, grant.mig_uuid), spec);
  RecordIsolation(job, hooks, spec, outcome);
}

// Its warnings name the job as people do ("12_3": an array task's job id may be the array's).
const std::string& LeasedJobText(const LeasedJob& job) { return job.wait.job_text.empty() ? job.job_id : job.wait.job_text; }

// The looks at a running job, each at its own period, from the job runner's tick: its processes on
// GPUs it did not lease (GpuWatch), whether it must give way (PreemptWatch), its use of its GPUs
// (UsageWatch) and its memory against its declaration (MemoryWatch), the last two from one read.
class RunningLooks {
 public:
  RunningLooks(const os::Env& env, GpuBackend& backend, const lease::LeaseDir& dir, const LeasedJob& job,
               const LeasedJobHooks& hooks, const lease::Grant& grant)
      : env_(env),
        backend_(backend),
        dir_(dir),
        job_(job),
        hooks_(hooks),
        grant_(grant),
        strays_(backend, env.processes, dir, grant.lease.name(), LeasedJobText(job), hooks.on_warning),
        preemption_(env, backend, dir, grant.lease.name(), job.wait, grant.unclaimed),
        memory_(LeasedJobText(job), job.wait.request.mem_bytes, job.memory_guard, hooks.on_warning),
        check_strays_(hooks.on_warning && job.stray_check_s > 0),
        check_preemption_(sched::GivesWay(job.wait.request, job.wait.limits_config.max_preemptions_per_job) &&
                          job.preempt_check_s > 0),
        call_running_(hooks.on_running && job.running_hook_s > 0),
        meter_(job.meter_usage_s > 0),
        guard_(memory_.active() && job.memory_check_s > 0) {}
  RunningLooks(const RunningLooks&) = delete;
  RunningLooks& operator=(const RunningLooks&) = delete;

  // Has `spec` tick (holding this) as often as the most frequent look needs; no tick without one.
  void Arm(JobSpec& spec) {
    if (!(check_strays_ || check_preemption_ || call_running_ || meter_ || guard_)) return;
    spec.tick_s = 1e9;
    if (meter_) spec.tick_s = std::min(spec.tick_s, job_.meter_usage_s);
    if (guard_) spec.tick_s = std::min(spec.tick_s, job_.memory_check_s);
    if (check_strays_) spec.tick_s = std::min(spec.tick_s, job_.stray_check_s);
    if (check_preemption_) spec.tick_s = std::min(spec.tick_s, job_.preempt_check_s);
    if (call_running_) spec.tick_s = std::min(spec.tick_s, job_.running_hook_s);
    const double now_s = env_.clock.MonotonicS();
    next_stray_s_ = now_s + job_.stray_check_s;
    next_running_s_ = now_s + job_.running_hook_s;
    spec.on_tick = [this] { return Tick(); };
  }

  // What the looks say of the ended job `ran`, started at `started_wall_s`: its usage, and why it
  // was stopped (its memory, a preemption, else its partition's close).
  void RecordEnd(const JobOutcome& ran, double started_wall_s, LeasedJobOutcome& outcome) const {
    if (meter_) outcome.usage = usage_.Summary(started_wall_s, env_.clock.WallS(), outcome.waited_s);
    if (ran.stopped && memory_.reason()) outcome.memory_overuse = memory_.reason();
    else if (ran.stopped && preemption_.reason()) outcome.preempted = preemption_.reason();
    else if (ran.stopped) outcome.partition_stop = grant_.partition_stop;
  }

 private:
  // One tick: the looks that are due; true when the job must stop now (its memory, or giving way).
  bool Tick() {
    bool stop_for_memory = false;
    if (meter_ || guard_) {  // one read of the GPUs for both
      ReadOptions sample_options{false, false, false, meter_};  // the meter's figures need the telemetry fields
      if (meter_) sample_options.utilization = sample_options.sensors = true;
      ViewOwnLease(backend_, env_.processes, sample_options, dir_, grant_.lease.name(), [&](const std::vector<lease::LeaseGpuView>& views) {
        if (meter_) usage_.Observe(views);
        if (guard_) stop_for_memory = memory_.Observe(env_.clock.MonotonicS(), views);
      });
    }
    if (check_strays_ && env_.clock.MonotonicS() >= next_stray_s_) {
      strays_.Check();
      next_stray_s_ = env_.clock.MonotonicS() + job_.stray_check_s;
    }
    if (call_running_ && env_.clock.MonotonicS() >= next_running_s_) {
      hooks_.on_running();
      next_running_s_ = env_.clock.MonotonicS() + job_.running_hook_s;
    }
    return stop_for_memory || (check_preemption_ && !preemption_.reason() && preemption_.Check());
  }

  const os::Env& env_;
  GpuBackend& backend_;
  const lease::LeaseDir& dir_;
  const LeasedJob& job_;
  const LeasedJobHooks& hooks_;
  const lease::Grant& grant_;
  GpuWatch strays_;
  PreemptWatch preemption_;
  UsageWatch usage_;
  MemoryWatch memory_;
  const bool check_strays_, check_preemption_, call_running_, meter_, guard_;
  double next_stray_s_ = 0, next_running_s_ = 0;
};

}  // namespace

Result<LeasedJobOutcome> RunLeasedJob(const os::Env& env, GpuBackend& backend, const lease::LeaseDir& dir,
                                      const LeasedJob& job, const LeasedJobHooks& hooks) {
  // Blocked from here to the process's end: the waiter and the job runner take them in turn, and
  // one that comes in between stays pending instead of killing gpulane with its job half-started.
  if (job.wait.request.count == 0) return RunWithoutGpus(env, job, hooks);
  const sigset_t stops = StopSignals(job.wait.extra_signals);
  sigprocmask(SIG_BLOCK, &stops, nullptr);
  // The lease's label is for people, its file JSON: bytes made visible (util/terminal_text.h), UTF-8.
  const std::string label = job.label.empty() ? lease::ProgramLabel(job.job.argv) : job.label;
  lease::PollWaitEnv wait_env(env.clock);
  lease::LeaseWaiter waiter(backend, dir, job.wait, job.job_id, EscapeForTerminal(label), hooks.on_waiting, wait_env, env.processes);
  // In line before the GPUs are read (NVML starts in tens of ms): an earlier request decides first.
  if (Status joined = waiter.JoinLine(); !joined.ok()) return joined.error();
  LeasedJobOutcome outcome;
  const double start = env.clock.MonotonicS();
  auto grant = waiter.Acquire();
  const double granted_s = env.clock.MonotonicS();
  if (!grant) return grant.error();
  if (grant->interrupted_by_signal) {
    outcome.interrupted_by_signal = grant->interrupted_by_signal;
    return outcome;
  }
  if (int sig = TakePending(stops)) {  // stopped (or held) just as the GPUs came: nothing starts
    outcome.interrupted_by_signal = sig;
    return outcome;  // the lease ends with `grant`
  }
  RecordGrant(*grant, outcome);
  if (hooks.on_granted)
    if (Status s = hooks.on_granted(*grant); !s.ok()) return s.error();
  // Once more after on_granted (the supervisor's "running"): a stop sent before that record was
  // written keeps the command from starting, so that a daemon that signalled the supervisor and
  // then still read it waiting knows the command never ran (its cancel says "before it started").
  if (int sig = TakePending(stops)) {
    outcome.interrupted_by_signal = sig;
    return outcome;
  }

  JobSpec spec = job.job;
  PrepareGranted(env, job, hooks, *grant, granted_s, spec, outcome);
  RunningLooks looks(env, backend, dir, job, hooks, *grant);
  const double started_wall_s = env.clock.WallS();
  looks.Arm(spec);
  auto ran = RunJob(
      spec, env,
      [&](pid_t pgid) {
        waiter.RecordProcessGroup(grant->lease, pgid);
        if (hooks.on_started) hooks.on_started(pgid);
      },
      hooks.on_logs);
  const double ended = env.clock.MonotonicS();
  outcome.job_s = ended - start - outcome.waited_s;
  if (!ran) {
    grant->lease.Release();
    return ran.error();
  }
  looks.RecordEnd(*ran, started_wall_s, outcome);
  outcome.job = std::move(ran).value();
  if (hooks.on_ended) hooks.on_ended(outcome);  // the end recorded while the GPUs are still this job's
  grant->lease.Release();  // the next job may start now; the driver's teardown is checked below
  outcome.release_s = env.clock.MonotonicS() - ended;
  outcome.snapshot = std::move(grant->snapshot);
  outcome.gpus_released = waiter.CheckGpusReleased(outcome.gpus, outcome.job->pids);
  return outcome;
}

}  // namespace gpulane::exec
