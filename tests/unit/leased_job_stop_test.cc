// How a job's lifecycle hears of a stop, for what its log and a cancel's reply say (a new user's
// "truth on the user's path" findings): exec::RunJob records the stop signal it forwarded and
// whether the daemon marked it as a cancel (exec::kCancelSignalValue), so the supervisor's last
// line in the job's log can say "cancelled"; and exec::RunLeasedJob looks for a stop once more
// after on_granted (the supervisor's "running" record), so a daemon that signalled the supervisor
// and then still read it "waiting" may say the command never ran.
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <optional>

#include "support/fixed_gpus.h"
#include "exec/job_runner.h"
#include "exec/leased_job.h"
#include "lease/lease_dir.h"
#include "os/env.h"

namespace gpulane::exec {
namespace {

namespace fs = std::filesystem;

// The calling thread's signal mask, put back at the end of a test (RunLeasedJob leaves the stop
// signals blocked for the process's life, as the supervisor and `gpulane run` want).
class KeptSignalMask {
 public:
  KeptSignalMask() { sigprocmask(SIG_SETMASK, nullptr, &old_); }
  ~KeptSignalMask() { sigprocmask(SIG_SETMASK, &old_, nullptr); }

 private:
  sigset_t old_;
};

TEST(JobRunnerStop, ACancelsMarkedSigtermIsRecordedAsACancelAndAPlainOneWithItsSender) {
  KeptSignalMask mask;
  for (const bool marked : {true, false}) {
    JobSpec spec;
    spec.argv = {"/bin/sleep", "30"};
    spec.env = {"PATH=/usr/bin:/bin"};
    spec.kill_grace_s = 1;
    const SystemClock clock;
    ProcfsProcessTable processes;
    os::SystemSpawner spawner;
    test::NoGpus gpus;
    os::SystemFileSystem files;
    // Sent to this process once the job runs, as the daemon (sigqueue) or a person (kill) would.
    auto ran = RunJob(spec, os::Env{clock, processes, spawner, gpus, files}, [marked](pid_t) {
      sigval mark{};
      mark.sival_int = kCancelSignalValue;
      if (marked) sigqueue(getpid(), SIGTERM, mark);
      else kill(getpid(), SIGTERM);
    });
    ASSERT_TRUE(ran.ok()) << ran.error().message;
    EXPECT_EQ(ran->exit_code, 128 + SIGTERM) << "the job got the SIGTERM";
    EXPECT_EQ(ran->stop_signal, SIGTERM);
    EXPECT_EQ(ran->stop_signal_sender, getpid());
    EXPECT_EQ(ran->stop_signal_cancel, marked) << (marked ? "the daemon's mark was not seen" : "a plain kill is no cancel");
  }
}

// One idle GPU, always.
class OneIdleGpu : public GpuBackend {
 public:
  Result<GpuSnapshot> Read(const ReadOptions&) override {
    GpuSnapshot s;
    GpuDevice d;
    d.pci_index = d.nvml_index = 0;
    d.uuid = "GPU-00000000-0000-0000-0000-000000000000";
    d.pci_bus_id = "00000000:01:00.0";
    d.memory_total_bytes = d.memory_free_bytes = 80ULL << 30;
    d.utilization_gpu_pct = 0;
    d.processes = std::vector<GpuProcess>{};
    s.devices.push_back(d);
    return s;
  }
  using GpuBackend::Read;
};

// A cancel's SIGTERM that comes while the supervisor records the job "running" (on_granted) keeps
// the command from starting: nothing ran, the outcome says interrupted.
TEST(LeasedJobStop, AStopThatComesWhileRunningIsRecordedKeepsTheCommandFromStarting) {
  KeptSignalMask mask;
  char tmpl[] = "/tmp/gpulane-leased-stop-XXXXXX";
  const fs::path root = mkdtemp(tmpl);
  const SystemClock clock;
  ProcfsProcessTable processes;
  os::SystemSpawner spawner;
  test::NoGpus gpus;
  os::SystemFileSystem files;
  const os::Env env{clock, processes, spawner, gpus, files};
  {
    auto dir = lease::LeaseDir::Open((root / "leases").string(), clock);
    ASSERT_TRUE(dir.ok()) << dir.error().message;
    OneIdleGpu gpus;
    LeasedJob job;
    job.wait.request.count = 1;
    job.wait.quiet = true;
    job.wait.margin_bytes = 0;
    job.job_id = "r1";
    job.stray_check_s = 0;
    job.preempt_check_s = 0;
    job.memory_check_s = 0;
    const fs::path ran_mark = root / "ran";
    job.job.argv = {"/bin/sh", "-c", "touch '" + ran_mark.string() + "'"};
    job.job.env = {"PATH=/usr/bin:/bin"};
    LeasedJobHooks hooks;
    bool granted = false;
    hooks.on_granted = [&](const lease::Grant&) {
      granted = true;
      raise(SIGTERM);  // blocked by RunLeasedJob: pending, as the daemon's would be
      return Status::Ok();
    };
    auto outcome = RunLeasedJob(env, gpus, *dir, job, hooks);
    ASSERT_TRUE(outcome.ok()) << outcome.error().message;
    EXPECT_TRUE(granted);
    EXPECT_EQ(outcome->interrupted_by_signal, SIGTERM);
    EXPECT_FALSE(outcome->job.has_value()) << "the command was started after the stop had come";
    EXPECT_FALSE(fs::exists(ran_mark));
  }
  fs::remove_all(root);
}

}  // namespace
}  // namespace gpulane::exec
