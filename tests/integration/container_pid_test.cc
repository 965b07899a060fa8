// From replays of peers' bug reports (issue 23, item 11; docs/security.md, "Processes gpulane cannot
// see, and intruders"), through the real binary and the fake NVML:
//  (a) inside a container NVML reports the host's pids, which /proc does not show: a job's own
//      processes look like another PID namespace's. A second `--mem` job of the same user was
//      refused because its sibling's host pid looked foreign. Now such a pid on a GPU whose leases
//      show no process of their own is counted, unverified and said so, as theirs, up to their
//      declarations; beyond them, and on a GPU no lease holds, it is still foreign.
//  (b) without a daemon nobody was told of an intruder on a leased GPU: the lease owner's side
//      (gpulane run, a queued job's supervisor) now warns, once per process, of a process on its
//      GPU that is neither its job's nor another lease's of that GPU.
#include "integration/run_support.h"
#include "support/daemon_fixture.h"

namespace gpulane::test {
namespace {

constexpr const char* kFastChecks = "[run]\nstray_check = \"0.05s\"\n";
// This test machine is a host (kernel threads show in its /proc): it plays a container by saying so.
const Env kInContainer = {{"GPULANE_PID_NAMESPACE", "container"}};

// A job that writes its pid to `pid_file` and stays until `gate` exists.
std::vector<std::string> PidThenGate(const fs::path& pid_file, const Gate& gate) {
  return {"/bin/sh", "-c", "echo $$ > \"$0.tmp\"; mv \"$0.tmp\" \"$0\"; while [ ! -e \"$1\" ]; do sleep 0.02; done",
          pid_file.string(), gate.path()};
}

// A pid nobody has, below `above` (UnusedPid() gives the highest).
std::uint32_t UnusedPidBelow(std::uint32_t above) {
  for (std::uint32_t pid = above - 1; pid > 1000; --pid)
    if (kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) return pid;
  throw std::runtime_error("no unused pid");
}

// The lines of `err` that warn of a process on a GPU the job leased.
std::size_t Warnings(const std::string& err) {
  std::size_t n = 0;
  for (const std::string& line : Lines(err)) n += Contains(line, "gpulane: warning: ") && Contains(line, " leased: ");
  return n;
}

// The fake NVML lists `pid` on GPU `gpu` with `bytes`, and the GPU's used memory grows by as much.
void ListOn(FakeMachine& machine, unsigned gpu, std::uint32_t pid, std::uint64_t bytes) {
  json& device = machine.state()["devices"][gpu];
  AddProcess(device, pid, bytes);
  std::uint64_t used = 0;
  for (const json& p : device["processes"]) used += p.value("used_memory", std::uint64_t{0});
  SetUsedMemory(device, used);
  machine.Save();
}

TEST(ContainerPids, ASecondMemJobIsNotRefusedBecauseItsSiblingsHostPidIsNotVisibleHere) {
  FakeMachine machine(IdleMachine(1));
  std::ofstream(machine.dir() / "config.toml") << kFastChecks;
  const Gate gate(machine.dir() / "gate");
  const fs::path pid_file = machine.dir() / "first.pid";
  Child first = StartRun(machine, Concat({"--mem", "20GiB", "--"}, PidThenGate(pid_file, gate)), kInContainer);
  ASSERT_TRUE(Eventually([&] { return fs::exists(pid_file); }, 30)) << first.ErrSoFar();
  // NVML reports the first job's process by its host pid, which this PID namespace does not show.
  const std::uint32_t host_pid = UnusedPid();
  ListOn(machine, 0, host_pid, 18 * kGiB);

  // On a host every process shows, and an unseen pid is never a job of ours: foreign.
  EXPECT_TRUE(IsError(RunOn(machine, {"--mem", "20GiB", "--no-wait", "--", "true"}, {{"GPULANE_PID_NAMESPACE", "host"}}), 5,
                      fmt::format("in use by pid {} (not visible here)", host_pid)));
  RunResult second = RunOn(machine, {"--mem", "20GiB", "--no-wait", "--", "true"}, kInContainer);
  EXPECT_EQ(second.exit_code, 0) << "refused beside its sibling: " << second.err;
  // Unknown is not the job's silently: its owner is told.
  ASSERT_TRUE(Eventually([&] { return Contains(first.ErrSoFar(), fmt::format("pid {} on GPU0 is not visible here", host_pid)); }, 30))
      << first.ErrSoFar();
  EXPECT_TRUE(Contains(first.ErrSoFar(), fmt::format("counted as job r{}'s: gpulane cannot tell whether it is", first.pid())))
      << first.ErrSoFar();

  // More than the first job declared: what does not fit its declaration is foreign again.
  const std::uint32_t other_pid = UnusedPidBelow(host_pid);
  ListOn(machine, 0, other_pid, 30 * kGiB);
  RunResult third = RunOn(machine, {"--mem", "20GiB", "--no-wait", "--", "true"}, kInContainer);
  EXPECT_TRUE(IsError(third, 5, fmt::format("GPU0: in use by pid {} (not visible here)", other_pid))) << third.err;
  // And the first job is told of it as an intruder.
  ASSERT_TRUE(Eventually([&] { return Contains(first.ErrSoFar(), fmt::format("pid {} (not visible here) uses GPU0", other_pid)); }, 30))
      << first.ErrSoFar();

  gate.Open();
  auto done = first.Wait(30);
  ASSERT_TRUE(done);
  EXPECT_EQ(done->exit_code, 0) << done->err;
}

TEST(Intruder, RunWarnsOnceWhenAProcessOutsideItsJobUsesItsLeasedGpu) {
  FakeMachine machine(IdleMachine(2));
  std::ofstream(machine.dir() / "config.toml") << kFastChecks;
  const Gate gate(machine.dir() / "gate");
  const fs::path pid_file = machine.dir() / "job.pid";
  Child run = StartRun(machine, Concat({"--gpus", "0", "--"}, PidThenGate(pid_file, gate)));
  ASSERT_TRUE(Eventually([&] { return fs::exists(pid_file); }, 30)) << run.ErrSoFar();
  ListOn(machine, 0, static_cast<std::uint32_t>(std::stoi(ReadFile(pid_file))), kGiB);  // the job's own: no warning
  // A process of the same user, outside the job's tree, and one on the GPU the job did not lease.
  Child intruder = StartProcess({"/bin/sleep", "600"});
  Child elsewhere = StartProcess({"/bin/sleep", "600"});
  ListOn(machine, 0, static_cast<std::uint32_t>(intruder.pid()), 2 * kGiB);
  ListOn(machine, 1, static_cast<std::uint32_t>(elsewhere.pid()), 2 * kGiB);
  const std::string warning = fmt::format("(pid {}) uses GPU0, which job r{} leased: it is neither this job's process nor "
                                          "another lease's of that GPU",
                                          intruder.pid(), run.pid());
  ASSERT_TRUE(Eventually([&] { return Contains(run.ErrSoFar(), warning); }, 30)) << run.ErrSoFar();
  EXPECT_TRUE(Contains(run.ErrSoFar(), "gpulane: warning: ")) << run.ErrSoFar();
  EXPECT_FALSE(Contains(run.ErrSoFar(), fmt::format("(pid {})", elsewhere.pid()))) << "not on its GPU: " << run.ErrSoFar();
  gate.Open();
  auto r = run.Wait(30);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->exit_code, 0) << r->err;
  const std::size_t first = r->err.find(warning);
  EXPECT_EQ(r->err.find(warning, first + 1), std::string::npos) << "warned once: " << r->err;
  EXPECT_EQ(Warnings(r->err), 1u) << "nothing about the job's own process: " << r->err;
}

TEST(Intruder, ANeighbourSharingTheGpuThroughItsOwnLeaseIsNoIntruder) {
  FakeMachine machine(IdleMachine(1));
  std::ofstream(machine.dir() / "config.toml") << kFastChecks;
  const Gate gate(machine.dir() / "gate");
  const fs::path pid_a = machine.dir() / "a.pid", pid_b = machine.dir() / "b.pid";
  Child a = StartRun(machine, Concat({"--mem", "10GiB", "--"}, PidThenGate(pid_a, gate)));
  Child b = StartRun(machine, Concat({"--mem", "10GiB", "--"}, PidThenGate(pid_b, gate)));
  ASSERT_TRUE(Eventually([&] { return fs::exists(pid_a) && fs::exists(pid_b); }, 30)) << a.ErrSoFar() << b.ErrSoFar();
  ListOn(machine, 0, static_cast<std::uint32_t>(std::stoi(ReadFile(pid_a))), 5 * kGiB);
  ListOn(machine, 0, static_cast<std::uint32_t>(std::stoi(ReadFile(pid_b))), 5 * kGiB);
  // Then an intruder: once both have warned of it, both have looked at the neighbour as well.
  Child intruder = StartProcess({"/bin/sleep", "600"});
  ListOn(machine, 0, static_cast<std::uint32_t>(intruder.pid()), kGiB);
  const std::string of_intruder = fmt::format("(pid {}) uses GPU0", intruder.pid());
  ASSERT_TRUE(Eventually([&] { return Contains(a.ErrSoFar(), of_intruder) && Contains(b.ErrSoFar(), of_intruder); }, 30))
      << a.ErrSoFar() << b.ErrSoFar();
  EXPECT_EQ(Warnings(a.ErrSoFar()), 1u) << "nothing about the neighbour: " << a.ErrSoFar();
  EXPECT_EQ(Warnings(b.ErrSoFar()), 1u) << "nothing about the neighbour: " << b.ErrSoFar();
  gate.Open();
  ASSERT_TRUE(a.Wait(30));
  ASSERT_TRUE(b.Wait(30));
}

TEST(Intruder, AQueuedJobIsWarnedInItsLog) {
  TestDaemon d({.config = kFastChecks});
  const fs::path pid_file = d.work() / "job.pid";
  const Gate gate(d.work() / "gate");
  const std::int64_t id = d.Submit(Concat({"--gpus", "1", "--"}, PidThenGate(pid_file, gate)));
  ASSERT_TRUE(Eventually([&] { return fs::exists(pid_file); }, 30));
  Child intruder = StartProcess({"/bin/sleep", "600"});
  ListOn(d.machine(), 1, static_cast<std::uint32_t>(intruder.pid()), kGiB);
  const std::string warning = fmt::format("(pid {}) uses GPU1, which job {} leased", intruder.pid(), id);
  ASSERT_TRUE(Eventually([&] { return Contains(d.Gpulane({"logs", std::to_string(id)}).out, warning); }, 30))
      << d.Gpulane({"logs", std::to_string(id)}).out;
  gate.Open();
  EXPECT_EQ(d.Gpulane({"wait", std::to_string(id)}).exit_code, 0);
}

}  // namespace
}  // namespace gpulane::test
