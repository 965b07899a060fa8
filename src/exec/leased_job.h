#pragma once
// The one lease-and-run lifecycle, shared by `gpulane run` and the supervisor of a queued job:
//
//   take a place in line -> wait -> lease -> run -> clean up the process tree -> release -> check
//
// The lease is released as soon as the job's last process has gone, before the check that the
// driver has let go of the job's GPU memory (a warning only), so the next job's hand-over does not
// wait for the driver's teardown. Stop signals (SIGINT, SIGTERM, SIGHUP, and the caller's extra
// ones) are blocked for the whole lifecycle and taken in turn by the waiter (signalfd) and the job
// runner (sigtimedwait, forwarding them to the job): one mechanism, no signal lost in between.
#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "exec/job_runner.h"
#include "gpu/backend.h"
#include "lease/lease_dir.h"
#include "lease/waiter.h"
#include "os/env.h"
#include "telemetry/job_usage.h"
#include "telemetry/memory_guard.h"
#include "util/result.h"

namespace gpulane::exec {

/// What to run once its GPUs are leased.
struct LeasedJob {
  lease::WaitRequest wait;     ///< the request, its place in line and how long it may wait
  std::string job_id;          ///< "r<pid>" for `gpulane run`, the queued job's id
  /// What the world-readable lease file calls the job (LeaseRecord::label): a queued job's name;
  /// "" = its program's name (lease::ProgramLabel). Never its arguments.
  std::string label;
  JobSpec job;                 ///< argv, base environment, directory, logs, user, kill grace, time limit
  bool uuids_in_env = false;   ///< CUDA_VISIBLE_DEVICES as GPU UUIDs instead of indices
  std::vector<std::string> extra_env;  ///< added to the job's environment ("GPULANE_ARRAY_INDEX=3")
  /// How often, while the job runs, to look for its processes on GPUs it did not lease (a library
  /// that touches device 0 whatever CUDA_VISIBLE_DEVICES says); 0: never.
  double stray_check_s = 5;
  /// A preemptible job (wait.request.preemptible): how often, while it runs, to ask whether a
  /// waiting job needs its GPUs (lease/preemption.h), seconds; it is then stopped (SIGTERM, its
  /// kill grace, SIGKILL). The hand-over to the waiting job takes up to this long plus the job's
  /// own exit.
  double preempt_check_s = 1;
  /// How often, while the job runs, LeasedJobHooks::on_running is called (seconds; 0: never).
  double running_hook_s = 0;
  /// How often the job meters its own use of its GPUs (seconds; 0: never): `gpulane run` when no
  /// daemon's sampler does (LeasedJobOutcome::usage).
  double meter_usage_s = 0;
  /// A job that declared its memory (wait.request.mem_bytes): how often, while it runs, it reads
  /// its processes' memory on its GPUs (exec/memory_watch.h; seconds, 0: never), and the rule
  /// (lease.memory_margin, anomaly.overuse_grace) that warns it and stops it (SIGTERM, its kill
  /// grace, SIGKILL) when it holds more than it declared.
  double memory_check_s = 1;
  telemetry::MemoryGuardSettings memory_guard;
  /// [run] isolate / isolate_required: the job sees only its GPUs' device nodes
  /// (exec/device_isolation.h) when the spawner runs as root; else advice-only (CUDA_VISIBLE_DEVICES),
  /// which fails the start when isolation is required.
  IsolationSetting isolation;
};

/// Where the caller hears of progress.
struct LeasedJobHooks {
  /// The one-line waiting status each time it changes ("" when the wait is over).
  std::function<void(const std::string&)> on_waiting;
  /// The GPUs are leased and the job is about to start; an error keeps it from starting (a
  /// supervisor that cannot record "running" durably must not run the job). A stop signal that
  /// came before it returned still keeps the job from starting (interrupted_by_signal).
  std::function<Status(const lease::Grant&)> on_granted;
  /// The job's process group, once the job runs.
  std::function<void(pid_t)> on_started;
  /// The log files the job opened.
  std::function<void(const OpenedLogs&)> on_logs;
  /// A warning for the job's owner, one line (a process of the job on a GPU it did not lease).
  std::function<void(const std::string&)> on_warning;
  /// Called every LeasedJob::running_hook_s while the job runs (the supervisor's anomaly
  /// notifications); it must return quickly (the job runner's loop waits meanwhile).
  std::function<void()> on_running;
  /// What isolation this job was given, in words for `show` (IsolationRecord), called once its
  /// start is known (before on_logs): "devices: GPU1 only (...)", "off", "advice-only (...)",
  /// "not applied, started with a warning: ...", "not applied, not started: ...".
  std::function<void(const std::string&)> on_isolation;
  /// The job's last process has ended and its outcome is known (`job` set; release_s and
  /// gpus_released not yet): called BEFORE the GPUs' lease is released, so that the end is
  /// recorded (the supervisor's "done") before the next job can take the GPUs — nobody sees an
  /// ended job still running on a GPU another job now runs on. It must not take long: the GPUs
  /// wait for it.
  std::function<void(const struct LeasedJobOutcome&)> on_ended;
};

/// How it went. Timings in seconds on the monotonic clock.
struct LeasedJobOutcome {
  int interrupted_by_signal = 0;   ///< a stop (or extra) signal came before the job started: nothing ran
  std::vector<unsigned> gpus;      ///< the leased GPUs, PCI-order indices
  std::vector<std::string> gpu_uuids;
  std::string lease_name;          ///< the lease's file name: what the daemon's sampler meters it by
  GpuSnapshot snapshot;            ///< the snapshot the GPUs were chosen from
  double waited_s = 0;             ///< from the start of the wait to the lease
  std::optional<JobOutcome> job;   ///< set once the job was started (also when its exec failed)
  double job_s = 0;                ///< from the start to the end of the job's last process
  double release_s = 0;            ///< from the end of the job's last process to the lease's release
  bool gpus_released = true;       ///< false: the driver still listed a job process a second later
  /// The job was stopped because its partition closed (job->stopped): why, and whether a queued
  /// job goes back in line (lease::Grant::partition_stop).
  std::optional<sched::PartitionStop> partition_stop;
  /// The job was preempted (job->stopped): why ("preempted: alice's job 12 (1st in line) needs GPU1").
  std::optional<std::string> preempted;
  /// The job was stopped for holding more memory than it declared (job->stopped): the one-line
  /// reason ("memory over declaration: held 46080 MiB on GPU 0, over its limit of ...": telemetry::OveruseStop).
  std::optional<std::string> memory_overuse;
  /// What isolation the job was given (the words of LeasedJobHooks::on_isolation); "" when it never
  /// came to a start.
  std::string isolation;
  /// With LeasedJob::meter_usage_s: what the job used, from its own samples (nullopt: none taken).
  std::optional<telemetry::JobUsage> usage;
};

/// Runs `job` through the whole lifecycle on the GPUs of `backend` and the lease directory `dir`,
/// with the time and /proc of `env` (main()'s; a test's fakes).
/// A request for 0 GPUs (-g 0) is run by RunWithoutGpus, touching neither `backend` nor `dir`.
/// Errors: those of LeaseWaiter::Acquire (the wait failed: kInvalidArgument, kNotEnoughGpus,
/// kTimeout, kNotFound, kNvml, kIo), of `hooks.on_granted`, and kIo when the job cannot be forked.
Result<LeasedJobOutcome> RunLeasedJob(const os::Env& env, GpuBackend& backend, const lease::LeaseDir& dir,
                                      const LeasedJob& job, const LeasedJobHooks& hooks);

/// The lifecycle of a CPU-only job (-g 0: job.wait.request.count is 0): no place in line, no
/// wait, no lease, no GPU read; the job starts at once with CUDA_VISIBLE_DEVICES empty (and
/// CUDA_DEVICE_ORDER, GPULANE_JOB_ID as any job; no GPULANE_LEASE_FD). The hooks are called as for
/// any job, on_granted with a grant of no GPUs and no lease; stop signals are handled the same way.
/// Errors: those of `hooks.on_granted`, and kIo when the job cannot be forked.
Result<LeasedJobOutcome> RunWithoutGpus(const os::Env& env, const LeasedJob& job, const LeasedJobHooks& hooks);

}  // namespace gpulane::exec
