#include "daemon/supervisor.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <fmt/format.h>

#include "daemon/job_files.h"
#include "exec/job_env.h"
#include "exec/job_runner.h"
#include "gpu/nvml_backend.h"
#include "lease/waiter.h"
#include "util/config.h"

namespace gpulane::daemon {
namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

lease::WaitRequest MakeRequest(const store::Job& job, const Config& config) {
  lease::WaitRequest w;
  w.request = job.spec.request;
  // Its place in line: the submission time, with the id's last digits apart for jobs submitted in
  // the same nanosecond's rounding.
  w.seq = static_cast<std::uint64_t>(std::llround(job.submit_time * 1e9)) + static_cast<std::uint64_t>(job.id % 1000);
  w.visible_devices = exec::EnvValue(job.spec.env, "CUDA_VISIBLE_DEVICES");
  w.nvml_poll_s = config.nvml_poll_s;
  w.margin_bytes = config.memory_margin_bytes;
  if (geteuid() == 0) {
    w.owner_uid = job.uid;
    w.owner_gid = job.gid;
  }
  return w;
}

// A stop signal (the daemon's SIGTERM for a cancel) that came while neither the lease waiter nor the
// job runner was watching for it: noted here, acted on at the next step, instead of the default
// action ending the supervisor with its job half-started.
volatile sig_atomic_t g_stop_signal = 0;
void NoteStopSignal(int sig) { g_stop_signal = sig; }
// The hold signal (HoldSignal()), noted the same way; it matters only before the job starts.
volatile sig_atomic_t g_hold = 0;
void NoteHold(int) { g_hold = 1; }

// NVML opened on the first read, so the supervisor can take its place in line before paying
// NVML's start-up (tens of milliseconds).
class LazyNvml : public GpuBackend {
 public:
  Result<GpuSnapshot> Read(const ReadOptions& options) override {
    if (!nvml_) {
      auto opened = NvmlBackend::Open();
      if (!opened) return opened.error();
      nvml_ = std::move(opened).value();
    }
    return nvml_->Read(options);
  }
  using GpuBackend::Read;

 private:
  std::unique_ptr<GpuBackend> nvml_;
};

// The size of the regular file `path` (never followed through a symlink), or none.
std::optional<std::uint64_t> FileSize(const std::string& path) {
  struct stat st {};
  if (path.empty() || lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  return static_cast<std::uint64_t>(st.st_size);
}

int Finish(const JobFiles& files, SupervisorStatus status) {
  status.phase = "done";
  status.end_time = Now();
  return files.WriteStatus(status).ok() ? 0 : 1;
}

}  // namespace

int RunSupervisor(const std::string& jobs_dir, std::int64_t id) {
  struct sigaction note {};
  note.sa_handler = NoteStopSignal;
  sigemptyset(&note.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &note, nullptr);
  struct sigaction hold {};
  hold.sa_handler = NoteHold;
  sigemptyset(&hold.sa_mask);
  sigaction(HoldSignal(), &hold, nullptr);
  JobFiles files(jobs_dir, id);
  int lock_fd = open(files.lock_path().c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (lock_fd < 0 || flock(lock_fd, LOCK_EX | LOCK_NB) != 0) return 0;  // someone else supervises it
  SupervisorStatus status;
  status.pid = getpid();
  if (auto previous = files.ReadStatus(); previous && previous->phase != "waiting") return 0;  // never run twice
  auto job = files.ReadSpec();
  if (!job) {
    status.reason = job.error().message;
    return Finish(files, status);
  }
  files.WriteStatus(status);
  auto config = LoadConfig();
  if (!config) {
    status.reason = config.error().message;
    status.start_failed = true;
    return Finish(files, status);
  }
  LazyNvml backend;
  auto dir = lease::LeaseDir::Open(lease::LeaseDir::DefaultPath(config->lease_dir));
  if (!dir) {
    status.reason = dir.error().message;
    status.start_failed = true;
    return Finish(files, status);
  }
  auto on_waiting = [&](const std::string& line) {
    if (line.empty() || line == status.reason) return;
    status.reason = line;
    files.WriteStatus(status);
  };
  lease::WaitRequest request = MakeRequest(*job, *config);
  request.extra_signals = {HoldSignal()};
  lease::LeaseWaiter waiter(backend, *dir, request, std::to_string(id),
                            fmt::format("{}", fmt::join(job->spec.argv, " ")), on_waiting);
  // In line first (ordered by submission time), then NVML: jobs launched in order stay in order.
  if (Status joined = waiter.JoinLine(); !joined.ok()) {
    status.reason = joined.error().message;
    status.start_failed = true;
    return Finish(files, status);
  }
  auto grant = g_stop_signal || g_hold ? Result<lease::Grant>(lease::Grant{}) : waiter.Acquire();
  if (grant && !grant->interrupted_by_signal && (g_stop_signal || g_hold)) {  // cancelled or held just as the GPUs came
    grant->interrupted_by_signal = g_stop_signal ? g_stop_signal : HoldSignal();
    grant->lease.Release();
  }
  if (grant && (grant->interrupted_by_signal == HoldSignal() || (g_hold && !g_stop_signal))) {
    status.reason = "held while waiting for GPUs";
    status.interrupted = true;
    status.held = true;
    return Finish(files, status);
  }
  if (!grant || grant->interrupted_by_signal) {
    status.reason = grant ? "cancelled while waiting for GPUs" : grant.error().message;
    status.interrupted = grant.ok();
    status.start_failed = !grant.ok();
    return Finish(files, status);
  }
  status.phase = "running";
  status.reason.clear();
  status.start_time = Now();
  for (unsigned i : grant->gpus) status.gpu_uuids.push_back(grant->snapshot.devices[i].uuid);
  if (!files.WriteStatus(status).ok()) return 1;  // not durable: do not start what we could not record

  exec::JobSpec spec;
  spec.argv = job->spec.argv;
  spec.cwd = job->spec.cwd;
  spec.kill_grace_s = job->spec.kill_grace_s;
  spec.time_limit_s = job->spec.request.time_limit_s;
  spec.keep_fds = {grant->lease.fd()};
  spec.stdout_path = store::OutputPath(*job);
  spec.stdout_new_file = store::HasDefaultOutputPath(*job);  // never append to an older job's gpulane-<id>.out
  spec.stderr_path = store::ErrorPath(*job);
  if (geteuid() == 0) {
    spec.uid = job->uid;
    spec.gid = job->gid;
  }
  spec.env = exec::JobEnvironment(job->spec.env, grant->snapshot, grant->gpus, false, std::to_string(id),
                                  job->spec.request.mem_bytes, grant->lease.fd());
  if (job->array_index) spec.env.push_back(fmt::format("GPULANE_ARRAY_INDEX={}", *job->array_index));
  auto record_logs = [&](const exec::OpenedLogs& logs) {
    // Where the output really goes (a default name may have been taken), for `gpulane logs/show`.
    status.logs = {logs.stdout_path, logs.stderr_path, logs.stdout_offset, logs.stderr_offset};
    files.WriteStatus(status);
  };
  auto outcome = exec::RunJob(
      spec,
      [&](pid_t pgid) {
        waiter.RecordProcessGroup(grant->lease, pgid);
        if (g_stop_signal) killpg(pgid, g_stop_signal);  // came before the job runner watched for it
      },
      record_logs);
  if (!outcome) {
    status.reason = outcome.error().message;
    status.start_failed = true;
    return Finish(files, status);
  }
  status.logs.stdout_end = FileSize(status.logs.stdout_path);  // this job's part of an appended file ends here
  status.logs.stderr_end = FileSize(status.logs.stderr_path);
  status.exit_code = outcome->exit_code;
  status.timed_out = outcome->timed_out;
  status.start_failed = outcome->exec_failed;
  if (outcome->exec_failed) status.reason = outcome->exec_error;
  else if (outcome->leftovers_terminated)
    status.reason = fmt::format("ended {} leftover process(es)", outcome->leftovers_terminated);
  waiter.CheckGpusReleased(grant->gpus, outcome->pids);
  grant->lease.Release();
  return Finish(files, status);
}

}  // namespace gpulane::daemon
