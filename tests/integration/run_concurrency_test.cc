// `gpulane run` with several jobs at once: leases never overlap, the line is first come first
// served, --mem jobs pack only as far as the memory goes, processes outside gpulane keep jobs off,
// and a waiting job says why it waits.
#include <signal.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "run_support.h"

namespace gpulane::test {
namespace {

// Walks the log in write order (every line is one O_APPEND write, made while the job holds its
// lease) and fails if a job starts on a GPU another job has not left yet. Returns the most jobs
// seen on one GPU at once when `shared` (--mem jobs), checking that no whole-GPU job met another.
::testing::AssertionResult NoOverlap(const fs::path& log, unsigned* most_at_once = nullptr) {
  std::map<std::string, std::set<std::string>> on_gpu;  // GPU -> jobs on it
  unsigned most = 0;
  for (const auto& e : LogEvents(log)) {
    if (e.size() < 3) return ::testing::AssertionFailure() << "short log line in:\n" << ReadFile(log);
    const std::string& tag = e[1];
    std::stringstream gpus(e[2]);
    for (std::string gpu; std::getline(gpus, gpu, ',');) {
      auto& jobs = on_gpu[gpu];
      if (e[0] == "start") {
        if (most_at_once == nullptr && !jobs.empty())
          return ::testing::AssertionFailure() << tag << " started on GPU" << gpu << " while " << *jobs.begin()
                                               << " was still on it:\n" << ReadFile(log);
        jobs.insert(tag);
        most = std::max<unsigned>(most, static_cast<unsigned>(jobs.size()));
      } else if (e[0] == "end") {
        if (!jobs.erase(tag)) return ::testing::AssertionFailure() << tag << " ended on GPU" << gpu << " it never started on";
      }
    }
  }
  if (most_at_once) *most_at_once = most;
  return ::testing::AssertionSuccess();
}

// ---- The line -------------------------------------------------------------------------------------

// A job for the line test. Besides its start and end lines it logs when its lease was granted,
// read from the lease it holds (GPULANE_LEASE_FD): two jobs granted a few milliseconds apart may
// write their start lines in either order, the grant times are what the line decided.
std::vector<std::string> TimedJob(int id, const fs::path& log) {
  return {"/bin/sh", "-c",
          R"(t=; n=0; while [ -z "$t" ] && [ $n -lt 1000 ]; do n=$((n+1)); )"
          R"(t=$(sed -n 's/.*"started_s":\([-0-9.eE+]*\).*/\1/p' "/proc/self/fd/$GPULANE_LEASE_FD"); done; )"
          R"(echo "start $0 $CUDA_VISIBLE_DEVICES $t" >> "$1"; sleep 0.3; echo "end $0 $CUDA_VISIBLE_DEVICES" >> "$1")",
          std::to_string(id), log.string()};
}

TEST(RunLine, EightJobsOnTwoGpusNeverOverlapAndStartInSubmissionOrder) {
  FakeMachine machine(IdleMachine(2));
  const fs::path log = machine.dir() / "jobs.log";
  std::vector<Child> runs;
  for (int i = 0; i < 8; ++i) {
    runs.push_back(StartRun(machine, Concat({"-q", "-g", "1", "--"}, TimedJob(i, log))));
    // The next one is started once this one is in line, so the submission order is known.
    const pid_t pid = runs.back().pid();
    ASSERT_TRUE(Eventually([&] { return HasTicketOrLease(machine, pid) || Started(log, std::to_string(i)); }, 30))
        << "run " << i << " did not join the line: " << runs.back().ErrSoFar();
  }
  for (int i = 0; i < 8; ++i) {
    auto r = runs[i].Wait(120);
    ASSERT_TRUE(r) << "run " << i << " still running";
    EXPECT_EQ(r->exit_code, 0) << i << ": " << r->err;
  }
  EXPECT_TRUE(NoOverlap(log));
  EXPECT_EQ(CountEvents(log, "start"), 8) << ReadFile(log);
  EXPECT_EQ(CountEvents(log, "end"), 8) << ReadFile(log);

  std::vector<std::pair<double, int>> granted;
  for (const auto& e : LogEvents(log)) {
    if (e[0] != "start") continue;
    ASSERT_EQ(e.size(), 4u) << "no grant time in: " << ReadFile(log);
    EXPECT_TRUE(e[2] == "0" || e[2] == "1") << "one GPU each: " << e[2];
    granted.emplace_back(std::stod(e[3]), std::stoi(e[1]));
  }
  std::sort(granted.begin(), granted.end());
  std::vector<int> order;
  for (const auto& g : granted) order.push_back(g.second);
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7})) << ReadFile(log);
}

// Started in the same instant: each GPU goes to exactly one of them.
TEST(RunLine, RunsStartedTogetherNeverGetTheSameGpu) {
  FakeMachine machine(IdleMachine(2));
  const fs::path log = machine.dir() / "jobs.log";
  const Gate gate(machine.dir() / "gate");
  std::vector<Child> runs;
  for (int i = 0; i < 4; ++i)
    runs.push_back(StartRun(machine, Concat({"-g", "1", "--"}, HeldJob(std::to_string(i), log.string(), gate))));
  ASSERT_TRUE(Eventually([&] {
    int waiting = 0;
    for (const auto& r : runs) waiting += SaysWaiting(r);
    return CountEvents(log, "start") == 2 && waiting == 2;
  }, 30)) << ReadFile(log);
  std::set<std::string> gpus;
  for (const auto& e : LogEvents(log)) gpus.insert(e[2]);
  EXPECT_EQ(gpus, (std::set<std::string>{"0", "1"})) << ReadFile(log);
  gate.Open();
  for (auto& run : runs) {
    auto r = run.Wait(120);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->exit_code, 0) << r->err;
  }
  EXPECT_TRUE(NoOverlap(log));
  EXPECT_EQ(CountEvents(log, "end"), 4);
}

// ---- Sharing by declared memory -------------------------------------------------------------------

// Starts `jobs` runs of `--mem mem` on a one-GPU machine, one after another; checks that exactly
// `fit` run at once while the rest wait, then lets them all finish.
void ExpectPacking(const FakeMachine& machine, const std::string& mem, unsigned jobs, unsigned fit) {
  static int round = 0;
  ++round;
  const fs::path log = machine.dir() / fmt::format("pack-{}.log", round);
  const Gate gate(machine.dir() / fmt::format("gate-{}", round));
  std::vector<Child> runs;
  for (unsigned i = 0; i < jobs; ++i) {
    runs.push_back(StartRun(machine, Concat({"--mem", mem, "--"}, HeldJob(std::to_string(i), log.string(), gate))));
    const pid_t pid = runs.back().pid();
    ASSERT_TRUE(Eventually([&] { return HasTicketOrLease(machine, pid); }, 30)) << runs.back().ErrSoFar();
  }
  // Those that fit start, the others say they wait: a state nothing changes until the gate opens.
  ASSERT_TRUE(Eventually([&] {
    for (unsigned i = fit; i < jobs; ++i)
      if (!SaysWaiting(runs[i])) return false;
    return CountEvents(log, "start") >= static_cast<long>(fit);
  }, 30)) << ReadFile(log);
  EXPECT_EQ(CountEvents(log, "start"), static_cast<long>(fit)) << ReadFile(log);
  for (unsigned i = 0; i < fit; ++i) EXPECT_TRUE(Started(log, std::to_string(i))) << "first come, first served";
  EXPECT_TRUE(Contains(LastStatus(runs[fit]), "declared")) << LastStatus(runs[fit]);
  EXPECT_TRUE(Contains(LastStatus(runs[fit]), "1st in line")) << LastStatus(runs[fit]);

  gate.Open();
  for (auto& run : runs) {
    auto r = run.Wait(120);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->exit_code, 0) << r->err;
  }
  unsigned most = 0;
  EXPECT_TRUE(NoOverlap(log, &most));
  EXPECT_EQ(most, fit) << ReadFile(log);
  EXPECT_EQ(CountEvents(log, "end"), static_cast<long>(jobs));
}

// 10 GiB GPU, default margin 1 GiB: 3 x 3 GiB fit (9 + 1 = 10), a fourth does not.
TEST(RunMem, JobsShareAGpuUpToItsMemoryMinusTheMargin) {
  FakeMachine machine(IdleMachine(1, 10 * kGiB));
  ExpectPacking(machine, "3GiB", 5, 3);
}

// The margin comes from the machine's configuration (or root's own file).
TEST(RunMem, TheMarginIsConfigurable) {
  if (geteuid() != 0) GTEST_SKIP() << "lease.memory_margin may only be set by root";
  FakeMachine machine(IdleMachine(1, 10 * kGiB));
  ExpectPacking(machine, "2.5GiB", 5, 3);  // default margin: 7.5 + 1 <= 10, 10 + 1 > 10
  std::ofstream(machine.dir() / "config.toml") << "[lease]\nmemory_margin = \"0\"\n";
  ExpectPacking(machine, "2.5GiB", 5, 4);
  std::ofstream(machine.dir() / "config.toml") << "[lease]\nmemory_margin = \"4GiB\"\n";
  ExpectPacking(machine, "2.5GiB", 4, 2);
}

TEST(RunMem, MemoryUsedOutsideGpulaneCountsToo) {
  const std::uint32_t outsider = UnusedPid();
  json state = IdleMachine(1, 10 * kGiB);
  AddProcess(state["devices"][0], outsider, 3 * kGiB);
  SetUsedMemory(state["devices"][0], 3 * kGiB);
  FakeMachine machine(state);
  // 10 GiB - 3 GiB used - 1 GiB margin = 6 GiB: two jobs of 3 GiB.
  EXPECT_TRUE(IsError(RunOn(machine, {"--no-wait", "--mem", "3GiB", "--", "true"}), 5, "in use by"))
      << "without --share-foreign the process keeps jobs off";
  const Gate gate(machine.dir() / "gate");
  const fs::path log = machine.dir() / "jobs.log";
  std::vector<Child> runs;
  for (int i = 0; i < 3; ++i) {
    runs.push_back(StartRun(machine, Concat({"--share-foreign", "--mem", "3GiB", "--"},
                                            HeldJob(std::to_string(i), log.string(), gate))));
    const pid_t pid = runs.back().pid();
    ASSERT_TRUE(Eventually([&] { return HasTicketOrLease(machine, pid); }, 30)) << runs.back().ErrSoFar();
  }
  ASSERT_TRUE(Eventually([&] { return SaysWaiting(runs[2]) && CountEvents(log, "start") >= 2; }, 30)) << ReadFile(log);
  EXPECT_EQ(CountEvents(log, "start"), 2) << ReadFile(log);
  EXPECT_TRUE(Contains(LastStatus(runs[2]), "GPU0: 0 MiB free < 3.0 GiB declared")) << LastStatus(runs[2]);
  gate.Open();
  for (auto& run : runs) {
    auto r = run.Wait(120);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->exit_code, 0) << r->err;
  }
}

TEST(RunMem, MoreThanTheGpuHoldsIsAUsageError) {
  FakeMachine machine(IdleMachine(2, 10 * kGiB));
  RunResult r = RunOn(machine, {"--mem", "9.5GiB", "--", "true"});
  EXPECT_TRUE(IsError(r, 2, "less memory"));
  EXPECT_TRUE(Contains(r.err, "margin")) << r.err;
}

// Whole-GPU jobs never share with --mem jobs, in either order.
TEST(RunMem, WholeGpuAndSharedJobsDoNotMix) {
  FakeMachine machine(IdleMachine(1));
  const fs::path log = machine.dir() / "jobs.log";
  const Gate shared_gate(machine.dir() / "shared-gate"), whole_gate(machine.dir() / "whole-gate");
  Child shared1 = StartRun(machine, Concat({"--mem", "1GiB", "--"}, HeldJob("shared1", log.string(), shared_gate)));
  ASSERT_TRUE(Eventually([&] { return Started(log, "shared1"); }, 30)) << shared1.ErrSoFar();
  Child shared2 = StartRun(machine, Concat({"--mem", "1GiB", "--"}, HeldJob("shared2", log.string(), shared_gate)));
  ASSERT_TRUE(Eventually([&] { return Started(log, "shared2"); }, 30)) << shared2.ErrSoFar();

  Child whole = StartRun(machine, Concat({"-g", "1", "--"}, HeldJob("whole", log.string(), whole_gate)));
  ASSERT_TRUE(Eventually([&] { return SaysWaiting(whole); }, 30)) << whole.ErrSoFar();
  EXPECT_TRUE(Contains(LastStatus(whole), "GPU0: shared by 2 gpulane jobs")) << LastStatus(whole);
  EXPECT_FALSE(Started(log, "whole"));

  shared_gate.Open();
  ASSERT_TRUE(Eventually([&] { return Started(log, "whole"); }, 30)) << whole.ErrSoFar();
  Child shared3 = StartRun(machine, Concat({"--mem", "1GiB", "--"}, HeldJob("shared3", log.string(), shared_gate)));
  ASSERT_TRUE(Eventually([&] { return SaysWaiting(shared3); }, 30)) << shared3.ErrSoFar();
  EXPECT_TRUE(Contains(LastStatus(shared3), fmt::format("GPU0: leased by {} (job r{})", UserName(geteuid()), whole.pid())))
      << LastStatus(shared3);
  EXPECT_FALSE(Started(log, "shared3"));

  whole_gate.Open();
  for (Child* run : {&shared1, &shared2, &whole, &shared3}) {
    auto r = run->Wait(120);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->exit_code, 0) << r->err;
  }
  // In the log: "whole" alone on the GPU.
  std::set<std::string> running;
  for (const auto& e : LogEvents(log)) {
    if (e[0] == "start") {
      EXPECT_TRUE(running.empty() || (e[1] != "whole" && !running.count("whole")))
          << e[1] << " started next to another job:\n" << ReadFile(log);
      running.insert(e[1]);
    } else {
      running.erase(e[1]);
    }
  }
  EXPECT_EQ(CountEvents(log, "end"), 4);
}

// ---- Processes outside gpulane ----------------------------------------------------------------------

TEST(RunForeign, AProcessOutsideGpulaneKeepsJobsOffItsGpuUnlessShareForeign) {
  ForeignProcess foreign;
  json state = IdleMachine(2);
  AddProcess(state["devices"][0], foreign.pid(), 2 * kGiB);
  SetUsedMemory(state["devices"][0], 2 * kGiB);
  SetUsedMemory(state["devices"][1], 50 * kGiB);  // by free memory alone GPU0 would come first
  FakeMachine machine(state);

  RunResult r = RunOn(machine, {"-q", "--", "env"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ParseEnv(r.out)["CUDA_VISIBLE_DEVICES"], "1");

  r = RunOn(machine, {"--no-wait", "-g", "2", "--", "true"});
  EXPECT_TRUE(IsError(r, 5, fmt::format("GPU0: in use by {}'s {} (pid {})", foreign.user(), foreign.command(), foreign.pid())));
  EXPECT_TRUE(IsError(RunOn(machine, {"--no-wait", "--gpus", "0", "--mem", "1GiB", "--", "true"}), 5, "GPU0: in use by"))
      << "--mem jobs too";

  r = RunOn(machine, {"-q", "--share-foreign", "-g", "2", "--", "env"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ParseEnv(r.out)["CUDA_VISIBLE_DEVICES"], "0,1");
}

// A process in another PID namespace (NVML lists it, /proc does not) counts as outside gpulane; when
// it ends, the job waiting for its GPU starts.
TEST(RunForeign, AWaitingJobStartsOnceTheProcessIsGone) {
  const std::uint32_t invisible = UnusedPid();
  json state = IdleMachine(1);
  AddProcess(state["devices"][0], invisible, 5 * kGiB);
  SetUsedMemory(state["devices"][0], 5 * kGiB);
  FakeMachine machine(state);
  Child run = StartRun(machine, {"--", "/bin/sh", "-c", "echo ran"});
  ASSERT_TRUE(Eventually([&] { return SaysWaiting(run); }, 30)) << run.ErrSoFar();
  EXPECT_TRUE(Contains(LastStatus(run), fmt::format("GPU0: in use by pid {} (not visible here)", invisible)))
      << LastStatus(run);
  EXPECT_FALSE(run.Wait(0)) << "it ran next to the process";

  machine.state()["devices"][0]["processes"] = json::array();
  SetUsedMemory(machine.state()["devices"][0], 0);
  machine.Save();
  auto r = run.Wait(30);
  ASSERT_TRUE(r) << "still waiting after the process ended: " << run.ErrSoFar();
  EXPECT_EQ(r->exit_code, 0) << r->err;
  EXPECT_EQ(r->out, "ran\n");
}

// ---- Waiting ------------------------------------------------------------------------------------------

TEST(RunWaiting, StatusNamesThePlaceInLineAndWhyEachGpuDoesNotQualify) {
  const std::uint32_t invisible = UnusedPid();
  json state = IdleMachine(3);
  AddProcess(state["devices"][1], invisible, 1 * kGiB);
  SetFreeMemory(state["devices"][2], 10 * kGiB);
  FakeMachine machine(state);
  const fs::path log = machine.dir() / "jobs.log";
  const Gate gate(machine.dir() / "gate");
  Child holder = StartRun(machine, Concat({"--gpus", "0", "--"}, HeldJob("holder", log.string(), gate)));
  ASSERT_TRUE(Eventually([&] { return Started(log, "holder"); }, 30)) << holder.ErrSoFar();

  const std::vector<std::string> request = {"-g", "1", "--min-free", "20GiB", "--", "true"};
  Child first = StartRun(machine, request);
  ASSERT_TRUE(Eventually([&] { return SaysWaiting(first); }, 30)) << first.ErrSoFar();
  Child second = StartRun(machine, request);
  ASSERT_TRUE(Eventually([&] { return SaysWaiting(second); }, 30)) << second.ErrSoFar();

  const std::string leased = fmt::format("GPU0: leased by {} (job r{})", UserName(geteuid()), holder.pid());
  const std::string in_use = fmt::format("GPU1: in use by pid {} (not visible here)", invisible);
  const std::string low = "GPU2: 10.0 GiB free < 20.0 GiB";
  for (const Child* c : {&first, &second}) {
    const std::string status = LastStatus(*c);
    EXPECT_TRUE(Contains(status, leased)) << status;
    EXPECT_TRUE(Contains(status, in_use)) << status;
    EXPECT_TRUE(Contains(status, low)) << status;
    EXPECT_EQ(Lines(c->ErrSoFar()).size(), 1u) << "one line per change of status: " << c->ErrSoFar();
  }
  EXPECT_TRUE(Contains(LastStatus(first), "waiting, 1st in line: ")) << LastStatus(first);
  EXPECT_TRUE(Contains(LastStatus(second), "waiting, 2nd in line: ")) << LastStatus(second);
  EXPECT_TRUE(first.OutSoFar().empty());

  // --no-wait fails at once with the reasons; --timeout after the time, with the reasons.
  RunResult r = RunOn(machine, Concat({"--no-wait"}, request));
  EXPECT_TRUE(IsError(r, 5, "--no-wait"));
  for (const auto& part : {leased, in_use, low}) EXPECT_TRUE(Contains(r.err, part)) << r.err;

  r = RunOn(machine, Concat({"-q", "--timeout", "0.3s"}, request));
  EXPECT_TRUE(IsError(r, 6, "--timeout"));
  for (const auto& part : {leased, in_use, low}) EXPECT_TRUE(Contains(r.err, part)) << r.err;

  // Without -q the waiting status comes first; the error is still the last line, and only one.
  r = RunOn(machine, Concat({"--timeout", "0.3s"}, request));
  EXPECT_EQ(r.exit_code, 6);
  EXPECT_TRUE(r.out.empty()) << r.out;
  auto lines = Lines(r.err);
  ASSERT_GE(lines.size(), 2u) << r.err;
  EXPECT_EQ(lines.back().rfind("gpulane: error: gave up after ", 0), 0u) << r.err;
  for (std::size_t i = 0; i + 1 < lines.size(); ++i)
    EXPECT_EQ(lines[i].rfind("gpulane: waiting, 3rd in line: ", 0), 0u) << r.err;

  // SIGTERM to a waiting run ends it (128 + 15) and takes it out of line.
  first.Kill(SIGTERM);
  auto ended = first.Wait(30);
  ASSERT_TRUE(ended);
  EXPECT_EQ(ended->exit_code, 128 + SIGTERM);
  EXPECT_FALSE(Contains(ended->err, "error")) << ended->err;
  EXPECT_TRUE(Eventually([&] { return Contains(LastStatus(second), "waiting, 1st in line: "); }, 30))
      << second.ErrSoFar();
  second.Kill(SIGINT);
  ended = second.Wait(30);
  ASSERT_TRUE(ended);
  EXPECT_EQ(ended->exit_code, 128 + SIGINT);

  gate.Open();
  auto h = holder.Wait(60);
  ASSERT_TRUE(h);
  EXPECT_EQ(h->exit_code, 0) << h->err;
}

}  // namespace
}  // namespace gpulane::test
