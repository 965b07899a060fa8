// A job's process on a GPU the job did not lease (a library that touches device 0 whatever
// CUDA_VISIBLE_DEVICES says): the job's owner is warned, in gpulane run's stderr or in a queued
// job's log, and the GPU is not handed to another job meanwhile.
#include "integration/run_support.h"
#include "support/daemon_fixture.h"

namespace gpulane::test {
namespace {

// A job that writes its pid to `pid_file` and stays until `gate` exists.
std::vector<std::string> PidThenGate(const fs::path& pid_file, const fs::path& gate) {
  return {"/bin/sh", "-c", "echo $$ > \"$0.tmp\"; mv \"$0.tmp\" \"$0\"; while [ ! -e \"$1\" ]; do sleep 0.02; done",
          pid_file.string(), gate.string()};
}

// The fake NVML lists `pid` on GPU `gpu` as well.
void ListOn(FakeMachine& machine, unsigned gpu, pid_t pid) {
  AddProcess(machine.state()["devices"][gpu], static_cast<std::uint32_t>(pid), 512ULL << 20);
  machine.Save();
}

TEST(RunStray, RunWarnsOnceWhenItsJobRunsOnAGpuItDidNotLease) {
  FakeMachine machine(IdleMachine(2));
  std::ofstream(machine.dir() / "config.toml") << "[run]\nstray_check = \"0.05s\"\n";
  const fs::path pid_file = machine.dir() / "job.pid", gate = machine.dir() / "gate";
  std::vector<std::string> args = {"--gpus", "1", "--"};
  for (const auto& a : PidThenGate(pid_file, gate)) args.push_back(a);
  Child job = StartRun(machine, args);
  ASSERT_TRUE(Eventually([&] { return fs::exists(pid_file); }, 30)) << job.ErrSoFar();
  const pid_t pid = std::stoi(ReadFile(pid_file));
  ListOn(machine, 1, pid);
  ListOn(machine, 0, pid);  // the same process also holds a context on GPU 0
  ASSERT_TRUE(Eventually([&] { return Contains(job.ErrSoFar(), "runs on GPU0, which the job did not lease"); }, 30))
      << job.ErrSoFar();
  EXPECT_TRUE(Contains(job.ErrSoFar(), fmt::format("gpulane: warning: process {} of job r", pid))) << job.ErrSoFar();

  // Meanwhile GPU 0 is not free for anyone else: it runs another job's process.
  RunResult pick = RunGpulane({"pick"}, RunEnv(machine));
  EXPECT_EQ(pick.exit_code, 5) << pick.out << pick.err;
  EXPECT_TRUE(Contains(pick.err, "GPU0: in use by")) << pick.err;
  EXPECT_TRUE(Contains(pick.err, "which did not lease this GPU")) << pick.err;

  std::ofstream(gate).put('x');
  auto r = job.Wait(30);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->exit_code, 0) << r->err;
  std::size_t first = r->err.find("runs on GPU0");
  EXPECT_EQ(r->err.find("runs on GPU0", first + 1), std::string::npos) << "warned once: " << r->err;
}

TEST(RunStray, AQueuedJobGetsTheWarningInItsLog) {
  TestDaemon d({.config = "[run]\nstray_check = \"0.05s\"\n"});
  const fs::path pid_file = d.work() / "job.pid", gate = d.work() / "gate";
  std::vector<std::string> args = {"--gpus", "1", "--"};
  for (const auto& a : PidThenGate(pid_file, gate)) args.push_back(a);
  const std::int64_t id = d.Submit(args);
  ASSERT_TRUE(Eventually([&] { return fs::exists(pid_file); }, 30));
  const pid_t pid = std::stoi(ReadFile(pid_file));
  ListOn(d.machine(), 0, pid);
  ASSERT_TRUE(Eventually([&] {
    return Contains(d.Gpulane({"logs", std::to_string(id)}).out, "runs on GPU0, which the job did not lease");
  }, 30)) << d.Gpulane({"logs", std::to_string(id)}).out;
  std::ofstream(gate).put('x');
  EXPECT_EQ(d.Gpulane({"wait", std::to_string(id)}).exit_code, 0);
}

}  // namespace
}  // namespace gpulane::test
