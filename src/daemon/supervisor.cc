#include "daemon/supervisor.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string_view>
#include <thread>
#include <fmt/format.h>

#include "daemon/job_files.h"
#include "exec/job_env.h"
#include "daemon/paths.h"
#include "exec/job_log.h"
#include "exec/leased_job.h"
#include "os/env.h"
#include "daemon/job_notify.h"
#include "os/user_file.h"
#include "proto/snapshot_source.h"
#include "proto/telemetry_json.h"
#include "telemetry/job_usage.h"
#include "util/config.h"
#include "util/exit_codes.h"
#include "util/say.h"
#include "util/units.h"

namespace gpulane::daemon {
namespace {

// What the supervisor sets aside for recording its job's end (a "done" status is under 64 KiB but
// for a reason quoting a long path, and usually under 1 KiB).
constexpr std::uint64_t kEndReserveBytes = 64 * 1024;

lease::WaitRequest MakeRequest(const store::Job& job, const Config& config) {
  lease::WaitRequest w;
  w.request = job.spec.request;
  w.request.preemptions = static_cast<unsigned>(store::Preemptions(job));  // the store's count, not the spec's word
  // Its place in line: the submission time, with the id's last digits apart for jobs submitted in
  // the same nanosecond's rounding.
  w.seq = static_cast<std::uint64_t>(std::llround(job.submit_time_s() * 1e9)) + static_cast<std::uint64_t>(job.id % 1000);
  w.inherited = InheritedGpusFrom([&](const char* name) { return exec::EnvValue(job.spec.env, name); });
  lease::ApplyConfig(config, w);
  if (geteuid() == 0) {
    w.owner_uid = job.uid();
    w.owner_gid = job.gid;
  }
  return w;
}

// The size of the job's log `path` when it is a regular file of the job's user, looked at with
// that user's rights (never through a symlink: os/user_file.h), or none.
std::optional<std::uint64_t> LogSize(const std::string& path, const store::Job& job) {
  auto file = os::OpenAsUser(path, os::ActingFor(job.uid(), job.gid), {.access = os::UserFileAccess::kStat});
  if (!file) return std::nullopt;
  return file->size_bytes();
}

// A progress note (waiting, the job's logs): when it cannot be written the daemon keeps showing the
// last one; said in the supervisor's log.
void Note(const JobFiles& files, const SupervisorStatus& status) {
  if (Status s = files.WriteStatus(status); !s.ok())
    Say("gpulane _supervise: cannot record progress: {}\n", s.error().message);
}

// Finish's first try: "done" written once (the reserve given up for it if need be).
Status FinishOnce(const JobFiles& files, SupervisorStatus& status, const Clock& clock) {
  status.phase = "done";
  status.end_time = clock.WallS();
  return files.WriteStatusReserved(status);
}

// Whether the jobs folder `files` lives in was removed (an admin's rm -rf, a cleaner of /tmp): then
// no daemon can read what this supervisor would write, nor see its lock. Unknown is not gone.
bool JobsFolderGone(const JobFiles& files, os::FileSystem& fs) {
  auto info = fs.Stat(std::filesystem::path(files.status_path()).parent_path().string(), os::Links::kFollow);
  return info && !*info;
}

// Records the outcome ("done"). It exists nowhere else until written: when the state folder filled
// up while the job ran, the reserve set aside at the start is given up for it (JobFiles::
// WriteStatusReserved); should even that fail, the write is tried again, every second at most,
// until it succeeds, the supervisor keeping its lock meanwhile, so the daemon shows the job running
// (and a restarted one adopts it) instead of taking it for lost. Returns 0 once written; 1 when the
// jobs folder itself was removed (nothing could ever read the end: retrying would keep this
// process alive forever).
int Finish(const JobFiles& files, SupervisorStatus status, const os::Env& env) {
  status.phase = "done";
  status.end_time = env.clock.WallS();
  double wait_s = 0.05;
  for (int attempt = 0;; ++attempt) {
    Status written = files.WriteStatusReserved(status);
    if (written.ok()) {
      if (attempt > 0) Say("gpulane _supervise: recorded the job's end after {} attempts\n", attempt + 1);
      return 0;
    }
    if (JobsFolderGone(files, env.files)) {
      Say("gpulane _supervise: cannot record the job's end: its jobs folder was removed while it ran ({}); "
          "giving up\n", written.error().message);
      return 1;
    }
    if (attempt == 0)
      Say("gpulane _supervise: cannot record the job's end: {}; trying again until it can\n",
          written.error().message);
    // A retry's pause, not a synchronisation.
    std::this_thread::sleep_for(std::chrono::duration<double>(wait_s));
    wait_s = std::min(wait_s * 2, 1.0);
  }
}

// The test fault point (docs/security.md, "The supervisor window"): with
// GPULANE_TEST_SUPERVISOR_DIES="<point>:<file>" in its environment, a supervisor kills itself with
// SIGKILL at `point` ("running": its job recorded running, before the fork; "forked": right after
// the fork, before the child's exec is confirmed; "started": once the exec is confirmed;
// "released": the job ended and its GPUs' lease released, before anything after that) if it can
// remove <file>: once per file, whichever supervisor comes first. For tests only.
void MaybeDieAt(std::string_view point) {
  const char* fault = std::getenv("GPULANE_TEST_SUPERVISOR_DIES");
  if (!fault) return;
  const std::string_view spec(fault);
  const auto colon = spec.find(':');
  if (colon == std::string_view::npos || spec.substr(0, colon) != point) return;
  const std::string token(spec.substr(colon + 1));
  if (!token.empty() && unlink(token.c_str()) == 0) kill(getpid(), SIGKILL);
}


// The job as the lifecycle runs it: its request, place in line, user, directory, logs.
exec::LeasedJob MakeLeasedJob(const store::Job& job, const Config& config) {
  exec::LeasedJob leased;
  leased.wait = MakeRequest(job, config);
  leased.wait.extra_signals = {HoldSignal()};
  // The job's own id, also for an array's task (GPULANE_JOB_ID is a number, as SLURM_JOB_ID: scripts
  // and a nested lease() inside the job match it); the lease names it for people as they write it
  // ("12_3"), as `status`, the line's reasons and usage show it: task 0's own id is the array's,
  // which means every task.
  leased.job_id = std::to_string(job.id);
  leased.wait.job_text = store::JobIdText(job);
  leased.label = job.spec.name;  // public (queue shows it); never the command line
  exec::JobSpec& spec = leased.job;
  spec.argv = job.spec.argv;
  spec.env = job.spec.env;
  spec.cwd = job.spec.cwd;
  spec.kill_grace_s = job.spec.kill_grace_s;
  leased.memory_guard = {config.memory_margin_bytes, config.anomaly_overuse_grace_s};
  spec.time_limit_s = job.spec.request.time_limit_s;
  spec.stdout_path = store::OutputPath(job);
  spec.stdout_new_file = store::HasDefaultOutputPath(job);  // never append to an older job's gpulane-<id>.out
  spec.stderr_path = store::ErrorPath(job);
  if (!job.attempts.empty() && !job.logs.stdout_path.empty()) {
    // A retry appends to the files its first attempt opened (a default name was chosen afresh then).
    spec.stdout_path = job.logs.stdout_path;
    spec.stdout_new_file = false;
    spec.stderr_path = job.logs.stderr_path.empty() ? job.logs.stdout_path : job.logs.stderr_path;
  }
  if (geteuid() == 0) {
    spec.uid = job.uid();
    spec.gid = job.gid;
  }
  if (job.array_index) leased.extra_env.push_back(fmt::format("GPULANE_ARRAY_INDEX={}", *job.array_index));
  leased.extra_env.push_back(fmt::format("GPULANE_RETRY={}", job.attempts.size()));  // 0: the first run
  // Restarted after giving way to another job (submit --preemptible): it may resume from a checkpoint.
  if (!job.attempts.empty() && job.attempts.back().preempted) leased.extra_env.push_back("GPULANE_PREEMPTED=1");
  return leased;
}

// "gpulane: job 12 used 2 GPUs for 1h 02m, 2.1 GPU-h, ..." at the end of the job's log (its
// stderr file, else its stdout file), from what the daemon's sampler metered of its lease; nothing
// when no daemon metered it (telemetry off). Asked as the lease ends ("ending": its GPUs are
// released right after), so the daemon's record ends here too and `show` says what the log says.
void AppendUsageLine(const store::Job& job, const store::JobLogs& logs, const std::string& lease_name) {
  if (lease_name.empty()) return;
  auto record = proto::AskUsage(SnapshotSockets(), {{"lease", lease_name}, {"ending", true}}, 5.0);
  const std::string& log = logs.stderr_path.empty() ? logs.stdout_path : logs.stderr_path;
  if (log.empty() || !record) return;
  const bool as_root = geteuid() == 0;
  const std::string line = "gpulane: " + telemetry::UsageLine(store::JobIdText(job), record->usage);
  Status appended = exec::AppendLineToLog(log, as_root ? std::optional(job.uid()) : std::nullopt,
                                          as_root ? std::optional(job.gid) : std::nullopt, line);
  if (!appended.ok())
    Say("gpulane _supervise: job {}: {} (not in its log: {})\n", job.id, line, appended.error().message);
}

// A retried job: "gpulane: attempt 2 of 4 (retry 1 of 3) after exit code 1" in its stderr log,
// before this attempt writes anything; into the first attempt's file (a default name was taken then).
void AppendRetryLine(const store::Job& job) {
  if (job.attempts.empty() || (job.logs.stderr_path.empty() && job.logs.stdout_path.empty())) return;
  const std::string& log = job.logs.stderr_path.empty() ? job.logs.stdout_path : job.logs.stderr_path;
  const bool as_root = geteuid() == 0;
  const std::string line =
      store::RetryLine(static_cast<int>(job.attempts.size()), job.spec.retries, job.attempts.back(), store::FailedAttempts(job));
  Status appended = exec::AppendLineToLog(log, as_root ? std::optional(job.uid()) : std::nullopt,
                                          as_root ? std::optional(job.gid) : std::nullopt, "gpulane: " + line);
  if (!appended.ok()) Say("gpulane _supervise: job {}: {} (not in its log: {})\n", job.id, line, appended.error().message);
}

// Whether a preempted job asks to go back in line (--preemptible=requeue; =cancel ends it).
bool RequeuedWhenPreempted(const store::Job& job) {
  return job.spec.request.preemptible == sched::Preemptible::kRequeue;
}

// Why the lifecycle stopped the job itself (exec::LeasedJobOutcome: its memory, a preemption, its
// partition's close), with the recorded reason and, for the last two, whether the job goes back in
// line and by which setting (the daemon puts it back unless it was cancelled: job_table.cc); ""
// when it did not.
std::string LifecycleStopWords(const store::Job& job, const exec::LeasedJobOutcome& ended) {
  if (ended.memory_overuse) return fmt::format("stopped after {:.1f} s: {}", ended.job_s, *ended.memory_overuse);
  if (ended.preempted)
    return fmt::format("stopped after {:.1f} s: {}; {}", ended.job_s, *ended.preempted,
                       RequeuedWhenPreempted(job) ? "it goes back in line (--preemptible=requeue)"
                                                  : "it does not go back in line (--preemptible=cancel)");
  if (ended.partition_stop)
    return fmt::format("stopped after {:.1f} s: {}; {}", ended.job_s, ended.partition_stop->reason,
                       ended.partition_stop->requeue ? "it goes back in line, to start when the partition opens again"
                                                     : "it does not go back in line");
  return "";
}

// Why the job's command ended, when gpulane ended it (its time limit, a stop of its lifecycle:
// LifecycleStopWords) or on a stop signal (a cancel's SIGTERM, marked by the daemon:
// exec::kCancelSignalValue); "" otherwise. For its log ("gpulane: ..."); a time limit's words are
// also its recorded reason.
std::string EndWords(const store::Job& job, const exec::LeasedJobOutcome& ended) {
  const exec::JobOutcome& ran = *ended.job;
  if (ran.exec_failed) return "";
  const char* name = ran.stop_signal == SIGINT ? "INT" : ran.stop_signal == SIGHUP ? "HUP" : "TERM";
  if (ran.stop_signal_cancel)  // first, as the daemon takes it (a cancel, whatever came after)
    return fmt::format("job {} cancelled after {:.1f} s: SIG{} sent to its process group (who cancelled it: gpulane "
                       "show {})", store::JobIdText(job), ended.job_s, name, store::JobIdText(job));
  if (std::string words = LifecycleStopWords(job, ended); !words.empty()) return words;
  if (ran.timed_out && job.spec.request.time_limit_s)
    return fmt::format("stopped by its time limit ({}) after {:.1f} s", FormatSeconds(*job.spec.request.time_limit_s),
                       ended.job_s);
  if (!ran.stop_signal) return "";
  return fmt::format("stopped after {:.1f} s by SIG{}, sent to its supervisor by process {} and forwarded to its "
                     "process group", ended.job_s, name, ran.stop_signal_sender);
}

// EndWords appended to the job's log (its stderr file, else its stdout file), once.
void AppendEndLine(const store::Job& job, const std::string& log, const std::string& words) {
  if (words.empty() || log.empty()) return;
  const bool as_root = geteuid() == 0;
  Status appended = exec::AppendLineToLog(log, as_root ? std::optional(job.uid()) : std::nullopt,
                                          as_root ? std::optional(job.gid) : std::nullopt, "gpulane: " + words);
  if (!appended.ok()) Say("gpulane _supervise: job {}: {} (not in its log: {})\n", job.id, words, appended.error().message);
}

// The job as its notifications name it.
NotifiedJob NotifiedOf(const store::Job& job, const store::JobLogs& logs) {
  NotifiedJob n;
  n.id = store::JobIdText(job);
  n.name = job.spec.name;
  n.user = job.user();
  n.log_path = logs.stderr_path.empty() ? logs.stdout_path : logs.stderr_path;
  if (geteuid() == 0) n.uid = job.uid(), n.gid = job.gid;
  n.env = job.spec.env;
  n.target = *job.spec.notify;
  return n;
}

// Records how the lifecycle ended in `status` (the caller writes it as "done").
void RecordOutcome(const exec::LeasedJobOutcome* outcome, const store::Job& job, SupervisorStatus& status);

void RecordOutcome(const Result<exec::LeasedJobOutcome>& outcome, const store::Job& job, SupervisorStatus& status) {
  if (!outcome) {
    status.reason = outcome.error().message;
    status.start_failed = true;
    return;
  }
  RecordOutcome(&*outcome, job, status);
}

void RecordOutcome(const exec::LeasedJobOutcome* outcome, const store::Job& job, SupervisorStatus& status) {
  if (outcome->interrupted_by_signal) {
    status.interrupted = true;
    status.held = outcome->interrupted_by_signal == HoldSignal();
    status.reason = status.held ? "held while waiting for GPUs" : "cancelled while waiting for GPUs";
    status.start_time.reset();  // recorded "running" before the stop was seen: its command never ran
    status.gpu_uuids.clear();
    return;
  }
  const exec::JobOutcome& ran = *outcome->job;
  status.logs.stdout_end = LogSize(status.logs.stdout_path, job);  // this job's part of an appended file ends here
  status.logs.stderr_end = LogSize(status.logs.stderr_path, job);
  status.exit_code = ran.exit_code;
  status.timed_out = ran.timed_out;
  status.start_failed = ran.exec_failed;
  if (outcome->partition_stop) {
    status.partition_stopped = true;
    status.requeue = outcome->partition_stop->requeue;
    status.reason = outcome->partition_stop->reason;
  }
  if (outcome->preempted) {
    status.preempted = true;
    status.requeue = RequeuedWhenPreempted(job);
    status.reason = *outcome->preempted;
  }
  if (outcome->memory_overuse) {  // failed, with gpulane's code for it: the job's own status is a SIGTERM's
    status.exit_code = kExitMemoryOveruse;
    status.reason = *outcome->memory_overuse;
  }
  if (ran.exec_failed) status.reason = ran.exec_error;
  else if (!outcome->memory_overuse && ran.leftovers_terminated) status.reason = fmt::format("ended {} leftover process(es)", ran.leftovers_terminated);
  // Its time limit, in the words its log ends with (`show` says what `logs` says).
  if (const std::string words = ran.timed_out && !ran.stop_signal_cancel ? EndWords(job, *outcome) : ""; !words.empty())
    status.reason = status.reason.empty() ? words : words + "; " + status.reason;
}

// Stop signals (a cancel's SIGTERM) and the hold signal stay blocked for the supervisor's whole
// life: the lifecycle takes them in turn (exec/leased_job.h), none is lost or kills it half-way.
void BlockStopSignals() {
  sigset_t stops;
  sigemptyset(&stops);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, HoldSignal()}) sigaddset(&stops, sig);
  sigprocmask(SIG_BLOCK, &stops, nullptr);
}

// Takes the job's lock, held (its descriptor open) for the supervisor's whole life; false when
// another supervisor holds it. On POSIX, not os::FileSystem: the descriptor is shared with the job's
// child across its fork until the exec (job_files.h).
bool LockJob(const JobFiles& files) {
  int lock_fd = open(files.lock_path().c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  return lock_fd >= 0 && flock(lock_fd, LOCK_EX | LOCK_NB) == 0;
}

// A failure before the job's start, recorded as its end.
int FinishStartFailed(const JobFiles& files, SupervisorStatus& status, const Error& error, const os::Env& env) {
  status.reason = error.message;
  status.start_failed = true;
  return Finish(files, status, env);
}

// One supervision's state, which the lifecycle's hooks update (they hold it by reference).
struct Supervision {
  const JobFiles& files;
  const store::Job& job;
  const os::Env& env;
  SupervisorStatus& status;
  bool running_recorded = false;
  bool end_recorded = false;
  bool end_line_written = false;  ///< EndWords is in the job's log (on_ended or Conclude, not both)
  std::optional<AnomalyNotifier> anomalies;
};

// The GPUs are leased: "running" recorded with them; not recorded, the job must not start.
Status RecordRunning(Supervision& s, const lease::Grant& grant) {
  SupervisorStatus& status = s.status;
  status.phase = "running";
  status.reason.clear();
  status.start_time = s.env.clock.WallS();
  for (unsigned i : grant.gpus) status.gpu_uuids.push_back(grant.mig_uuid.value_or(grant.snapshot.devices[i].uuid));
  Status written = s.files.WriteStatus(status);
  s.running_recorded = written.ok();
  if (s.running_recorded) MaybeDieAt("running");
  return written;
}

// A warning about the job's start, appended to its log (said in ours when it cannot be).
void AppendWarning(const store::Job& job, const store::JobLogs& logs, const std::string& line) {
  const std::string& log = logs.stderr_path.empty() ? logs.stdout_path : logs.stderr_path;
  const bool as_root = geteuid() == 0;
  Status appended = exec::AppendWarningToLog(log, as_root ? std::optional(job.uid()) : std::nullopt,
                                             as_root ? std::optional(job.gid) : std::nullopt, line);
  if (!appended.ok())
    Say("gpulane _supervise: job {}: {} (warning not in its log: {})\n", job.id, line, appended.error().message);
}

// The job ended (its outcome known, before it is recorded): EndWords in its log.
void NoteEnd(Supervision& s, const exec::LeasedJobOutcome& ended) {
  if (s.end_line_written || !ended.job) return;
  s.end_line_written = true;
  const std::string words = EndWords(s.job, ended);
  const store::JobLogs& logs = s.status.logs;
  AppendEndLine(s.job, logs.stderr_path.empty() ? logs.stdout_path : logs.stderr_path, words);
}

exec::LeasedJobHooks HooksOf(Supervision& s) {
  exec::LeasedJobHooks hooks;
  hooks.on_waiting = [&s](const std::string& line) {
    if (line.empty() || line == s.status.reason) return;
    s.status.reason = line;
    Note(s.files, s.status);
  };
  hooks.on_granted = [&s](const lease::Grant& grant) { return RecordRunning(s, grant); };
  hooks.on_started = [](pid_t) { MaybeDieAt("started"); };
  // Before on_logs, whose note carries it: what isolation the job was given, for `show`.
  hooks.on_isolation = [&s](const std::string& words) { s.status.isolation = words; };
  hooks.on_logs = [&s](const exec::OpenedLogs& logs) {
    // Where the output really goes (a default name may have been taken), for `gpulane logs/show`.
    s.status.logs = {logs.stdout_path, logs.stderr_path, logs.stdout_offset, logs.stderr_offset};
    Note(s.files, s.status);
  };
  hooks.on_warning = [&s](const std::string& line) { AppendWarning(s.job, s.status.logs, line); };
  // --notify anomaly: the daemon's anomalies of this job, asked for every few seconds while it runs.
  if (s.job.spec.notify && Wants(*s.job.spec.notify, "anomaly")) {
    s.anomalies.emplace(s.env.spawner, NotifiedOf(s.job, s.job.logs), s.env.clock.WallS() - 60);
    hooks.on_running = [&s] {
      s.anomalies->SetLog(NotifiedOf(s.job, s.status.logs).log_path);
      s.anomalies->Poll();
    };
  }
  // The end is recorded before the GPUs' lease is released (a new user saw ten ended jobs listed
  // as running on GPU0 beside the one running there): one try; should the state folder refuse
  // it, the lease is released anyway and the end written after, as long as it takes (Finish).
  hooks.on_ended = [&s](const exec::LeasedJobOutcome& ended) {
    NoteEnd(s, ended);
    if (!ended.job->exec_failed) AppendUsageLine(s.job, s.status.logs, ended.lease_name);
    RecordOutcome(&ended, s.job, s.status);
    s.end_recorded = FinishOnce(s.files, s.status, s.env.clock).ok();
  };
  return hooks;
}

// After the lifecycle: the end recorded (if on_ended could not), and notified. Returns the
// supervisor's exit code.
int Conclude(Supervision& s, const Result<exec::LeasedJobOutcome>& outcome) {
  SupervisorStatus& status = s.status;
  // "running" was not recorded: nothing ran, and the status says "waiting" (requeued). Once it was,
  // a failure before the job's start (no fork) is recorded as this job's failure to start.
  if (!outcome && status.phase == "running" && !s.running_recorded) return 1;
  if (outcome) NoteEnd(s, *outcome);  // a CPU-only job's (RunWithoutGpus calls no on_ended)
  if (!s.end_recorded) RecordOutcome(outcome, s.job, status);
  const int rc = s.end_recorded ? 0 : Finish(s.files, status, s.env);
  if (s.job.spec.notify && outcome && outcome->job) {
    exec::JobOutcome ended = *outcome->job;
    if (outcome->memory_overuse) ended.exit_code = kExitMemoryOveruse;  // as recorded
    NotifyJobEnd(s.env.spawner, NotifiedOf(s.job, status.logs), ended, status.partition_stopped || status.preempted, status.reason);
  }
  return rc;
}

// The job's lifecycle (exec/leased_job.h) from its wait for GPUs to its end, recorded.
int SuperviseLeased(Supervision& s, const Config& config, const lease::LeaseDir& dir, int exec_mark_fd) {
  // GPU snapshots from the daemon, which holds NVML open; NVML itself only while none answers.
  proto::SnapshotSource backend(SnapshotSockets(), s.env.clock, s.env.gpus);
  AppendRetryLine(s.job);
  const exec::LeasedJobHooks hooks = HooksOf(s);
  exec::LeasedJob leased = MakeLeasedJob(s.job, config);
  if (hooks.on_running) leased.running_hook_s = kAnomalyPollS;
  leased.stray_check_s = config.stray_check_s;
  leased.isolation = exec::IsolationOf(config);
  leased.job.exec_mark_fd = exec_mark_fd;
  leased.job.on_forked = [](pid_t) { MaybeDieAt("forked"); };
  auto outcome = exec::RunLeasedJob(s.env, backend, dir, leased, hooks);
  if (outcome && outcome->job) MaybeDieAt("released");
  return Conclude(s, outcome);
}

}  // namespace

int RunSupervisor(const std::string& jobs_dir, std::int64_t id, const os::Env& env) {
  BlockStopSignals();
  JobFiles files(env.files, jobs_dir, id);
  if (!LockJob(files)) return 0;  // someone else supervises it
  SupervisorStatus status;
  status.pid = getpid();
  if (auto previous = files.ReadStatus(); previous && previous->phase != "waiting") return 0;  // never run twice
  auto job = files.ReadSpec();
  if (!job) {
    status.reason = job.error().message;
    return Finish(files, status, env);
  }
  // The exec mark, reset: this supervisor's child sets it just before its exec (job_files.h).
  auto exec_mark = files.OpenExecMark();
  if (!exec_mark) {
    // Nothing recorded, nothing run: the daemon puts the job back in line after the grace.
    Say("gpulane _supervise: job {}: {}; not started\n", id, exec_mark.error().message);
    return 1;
  }
  status.marks_exec = true;
  // Room for the job's end on a state folder that fills up meanwhile; without it (a folder full
  // already) the end is recorded once there is room again.
  if (Status reserved = files.Reserve(kEndReserveBytes); !reserved.ok())
    Say("gpulane _supervise: job {}: {}; going on without a reserve\n", id, reserved.error().message);
  Note(files, status);
  auto config = LoadConfig();
  if (!config) return FinishStartFailed(files, status, config.error(), env);
  auto dir = lease::LeaseDir::Open(lease::LeaseDir::DefaultPath(config->lease_dir), env.clock);
  if (!dir) return FinishStartFailed(files, status, dir.error(), env);
  Supervision supervision{files, *job, env, status};
  return SuperviseLeased(supervision, *config, *dir, *exec_mark);
}

}  // namespace gpulane::daemon
