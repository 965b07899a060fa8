// No holder keeps what it does not use (issue 23, item 3), through the real binary and the fake
// NVML. Before: a ticket first in line for 2 GPUs whose holder never claimed them (a `gpulane run`
// stopped with Ctrl-Z while it waited) made another `run --timeout 15m` wait the full 15 minutes
// while `status` showed both GPUs free; with sched.max_reserve_idle at 1 minute another user
// still waited 187 s, as the bound restarted with each resubmission.
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <iterator>

#include "run_support.h"
#include "support/daemon_fixture.h"

namespace gpulane::test {
namespace {

double MonoS() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

void WriteConfig(const FakeMachine& machine, const std::string& text) { std::ofstream(machine.dir() / "config.toml") << text; }

char ProcessState(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const auto paren = text.rfind(')');
  return paren == std::string::npos || paren + 2 >= text.size() ? '?' : text[paren + 2];
}

// SIGSTOP (unlike Ctrl-Z's SIGTSTP, which the lock holds back) can land while the run holds the
// lease directory's lock, and would then stop the line itself, not model a stopped run: it is sent
// while this test holds the lock, and the lock let go once the run is seen stopped.
void StopOutsideTheDirectoryLock(const fs::path& machine_dir, Child& run) {
  const int fd = open((machine_dir / "leases").c_str(), O_RDONLY | O_DIRECTORY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(flock(fd, LOCK_EX), 0);
  run.Kill(SIGSTOP);
  const bool stopped = Eventually([&] { return ProcessState(run.pid()) == 'T'; }, 20);
  flock(fd, LOCK_UN);
  close(fd);
  ASSERT_TRUE(stopped) << "state " << ProcessState(run.pid());
}

TEST(UnclaimedGrant, AStoppedRunFirstInLineLosesItsPlaceAndTheRunBehindItStartsWithinMaxUnclaimed) {
  FakeMachine machine(IdleMachine(2));
  WriteConfig(machine, "[sched]\nmax_unclaimed = \"2s\"\n");
  const Gate gate(machine.dir() / "gate");
  const std::string log = (machine.dir() / "jobs.log").string();
  std::vector<std::string> args = {"-g", "2", "--"};
  for (const std::string& a : HeldJob("holder", log, gate)) args.push_back(a);
  Child holder = StartRun(machine, args);
  ASSERT_TRUE(Eventually([&] { return CountEvents(log, "start") == 1; }, 20)) << holder.ErrSoFar();
  // First in line for both GPUs, then stopped (Ctrl-Z would do the same) while it waits.
  Child stopped = StartRun(machine, {"-g", "2", "--", "true"});
  ASSERT_TRUE(Eventually([&] { return SaysWaiting(stopped); }, 20)) << stopped.ErrSoFar();
  StopOutsideTheDirectoryLock(machine.dir(), stopped);
  // Its job holds the GPU 3 s, so the stopped run stays stopped well past max_unclaimed.
  Child behind = StartRun(machine, {"-g", "1", "--timeout", "60s", "--", "sh", "-c", "echo started; sleep 3"});
  ASSERT_TRUE(Eventually([&] { return SaysWaiting(behind); }, 20)) << behind.ErrSoFar();
  // Both GPUs free: the line gives them to the stopped run, which never takes them.
  const double freed_s = MonoS();
  gate.Open();
  ASSERT_TRUE(holder.Wait(20));
  ASSERT_TRUE(Eventually([&] { return behind.OutSoFar() == "started\n"; }, 30))
      << "the run behind the unclaimed grant still waits " << MonoS() - freed_s << " s after the GPUs were freed: "
      << LastStatus(behind);
  const double waited_s = MonoS() - freed_s;
  EXPECT_GE(waited_s, 1.9) << "the grant was the stopped run's for max_unclaimed first";
  EXPECT_LT(waited_s, 15.0) << "max_unclaimed (2 s) and a wake-up, with room for a loaded machine";
  auto done = behind.Wait(30);
  ASSERT_TRUE(done);
  EXPECT_EQ(done->exit_code, 0) << done->err;
  // Resumed, the stopped run is told why the line went on without it, and runs once GPUs are free.
  stopped.Kill(SIGCONT);
  auto resumed = stopped.Wait(30);
  ASSERT_TRUE(resumed);
  EXPECT_EQ(resumed->exit_code, 0) << resumed->err;
  EXPECT_TRUE(Contains(resumed->err, "gpulane: warning: this request did not run for ")) << resumed->err;
  EXPECT_TRUE(Contains(resumed->err, "loses its place to the requests behind it")) << resumed->err;
}

// GPU 0 is leased with no time limit, so a 2-GPU request's start cannot be known and GPU 1, idle,
// is held for it at most max_reserve_idle (3 s). The 2-GPU job (priority 5: ahead of the line, as
// a lighter fair-share user's would be) is submitted again and the older one cancelled every
// second, so a job of it always stands first; a `run -g 1` behind gets GPU 1 within the bound of
// its first look all the same.
TEST(UnclaimedGrant, ResubmittingDoesNotRestartMaxReserveIdleForAnIdleGpu) {
  DaemonOptions options;
  options.config = "[sched]\nmax_reserve_idle = \"3s\"\n";
  TestDaemon d(options);
  const fs::path gate = d.dir() / "gate";
  Child holder = d.StartGpulane({"run", "--gpus", "0", "--", "sh", "-c", "while [ ! -e " + gate.string() + " ]; do sleep 0.02; done"});
  ASSERT_TRUE(Eventually([&] { return d.Gpulane({"pick", "--gpus", "0"}).exit_code == 5; }, 20)) << holder.ErrSoFar();
  std::int64_t head = d.Submit({"-g", "2", "--priority", "5", "--", "true"});
  ASSERT_TRUE(Eventually([&] { return Contains(d.Show(head).value("reason", ""), "GPU0"); }, 20)) << d.Show(head).dump();
  const double first_look_s = MonoS();
  Child behind = d.StartGpulane({"run", "-g", "1", "--timeout", "60s", "--", "echo", "started"});
  std::optional<RunResult> done;
  while (!(done = behind.Wait(1.0)) && MonoS() - first_look_s < 40) {
    const std::int64_t next = d.Submit({"-g", "2", "--priority", "5", "--", "true"});  // in line before the old one goes
    ASSERT_TRUE(Eventually([&] { return Contains(d.Show(next).value("reason", ""), "GPU"); }, 20)) << d.Show(next).dump();
    ASSERT_EQ(d.Gpulane({"cancel", std::to_string(head)}).exit_code, 0);
    head = next;
  }
  const double waited_s = MonoS() - first_look_s;
  ASSERT_TRUE(done) << "the 1-GPU run still waits after " << waited_s << " s: " << behind.ErrSoFar();
  EXPECT_EQ(done->exit_code, 0) << done->err;
  EXPECT_EQ(done->out, "started\n");
  EXPECT_LT(waited_s, 15.0) << "max_reserve_idle (3 s) from its first look, whatever the head resubmits";
  Touch(gate);
  ASSERT_TRUE(holder.Wait(20));
}

// Aimed at one GPU held by a preemptible job: a `gpulane run` for it makes the job give way, and is
// stopped before it takes the GPU. Before, the preemptible job waited for ever behind the unclaimed
// grant (or, before the hysteresis of item 5, was preempted 58 times a minute); now it runs again
// once the grant is max_unclaimed old, and is not preempted for that ticket again.
TEST(UnclaimedGrant, AStoppedRunAimedAtAPreemptibleJobsGpuMakesItGiveWayOnceNotForEver) {
  DaemonOptions options;
  options.config = "[sched]\nmax_unclaimed = \"2s\"\n";
  TestDaemon d(options);
  // The job ignores SIGTERM, so GPU 0 stays its own for the 5 s kill grace after it is told to give
  // way: the run is stopped well before the GPU is free, however slowly this test sees "preempting"
  // (with a job that ended at once, a loaded machine let the run take the GPU before it was stopped).
  const std::int64_t preemptible =
      d.Submit({"--preemptible", "--gpus", "0", "--kill-grace", "5s", "--", "sh", "-c", "trap '' TERM; sleep 120"});
  ASSERT_TRUE(d.WaitForState(preemptible, "running", 30)) << d.Log();
  Child aimed = d.StartGpulane({"run", "--gpus", "0", "--", "true"});
  ASSERT_TRUE(Eventually([&] { return Contains(aimed.ErrSoFar(), "preempting"); }, 30)) << aimed.ErrSoFar();
  StopOutsideTheDirectoryLock(d.dir(), aimed);
  nlohmann::json job;
  ASSERT_TRUE(Eventually([&] {
    job = d.Show(preemptible);
    return job["attempts"].size() == 2u && job["state"] == "running";
  }, 30)) << "the preemptible job runs again once the grant is unclaimed for max_unclaimed: " << job.dump() << "\n" << d.Log();
  EXPECT_EQ(job["attempts"][0]["preempted"], true);
  // Several of its holder's looks (one a second) later, it still runs: the stopped ticket, having
  // lost its place, makes it give way no more.
  const double until_s = MonoS() + 4;
  while (MonoS() < until_s) {
    job = d.Show(preemptible);
    ASSERT_EQ(job["state"], "running") << job.dump();
    ASSERT_EQ(job["preemptions"], 1) << job.dump();
    d.Barrier();
  }
  aimed.Kill(SIGKILL);
  EXPECT_EQ(d.Gpulane({"cancel", std::to_string(preemptible)}).exit_code, 0);
}

}  // namespace
}  // namespace gpulane::test
