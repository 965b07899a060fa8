// Partitions through the real binary and the fake NVML: --partition restricts pick and run to the
// partition's GPUs, sched.default_partition applies without it, an unknown name is a usage error,
// and a partition closed now (a window on another weekday than today, computed from this
// machine's local time, so no clock is faked) refuses pick and run --no-wait with exit 5.
#include <gtest/gtest.h>

#include <ctime>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>

#include "support/daemon_fixture.h"
#include "support/harness.h"
#include "support/scenarios.h"
#include "support/text.h"

namespace gpulane::test {
namespace {

namespace fs = std::filesystem;

// The weekday `days_ahead` days after today, local time: "Mon".."Sun".
std::string WeekdayAhead(int days_ahead) {
  static const char* kDays[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
  std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  return kDays[(local.tm_wday + days_ahead) % 7];
}

// Eight idle GPUs and a machine config: "day" = GPUs 2-3, always open; "later" = GPU 0, open only
// the day after tomorrow (closed now even if the test runs across midnight).
struct PartitionMachine {
  explicit PartitionMachine(const std::string& extra = "") : machine(EightGpus()) {
    config = machine.dir() / "config.toml";
    std::ofstream(config) << fmt::format(
        "[partitions.day]\ngpus = [2, 3]\n\n[partitions.later]\ngpus = [0]\nwindows = [\"{} 00:00-24:00\"]\n{}", WeekdayAhead(2),
        extra);
  }
  RunResult Gpulane(const std::vector<std::string>& args) const {
    Env env = machine.env();
    env["GPULANE_CONFIG"] = config.string();  // the tests run as root: its own file is the machine's
    return RunGpulane(args, env);
  }
  FakeMachine machine;
  fs::path config;
};

TEST(Partition, PickChoosesOnlyAmongThePartitionsGpus) {
  PartitionMachine m;
  RunResult any = m.Gpulane({"pick", "-g", "2"});
  EXPECT_EQ(any.exit_code, 0) << any.err;
  EXPECT_EQ(any.out, "0,1\n") << "without a partition: every GPU, the first NVLinked pair";
  RunResult day = m.Gpulane({"pick", "-g", "2", "--partition", "day"});
  EXPECT_EQ(day.exit_code, 0) << day.err;
  EXPECT_EQ(day.out, "2,3\n");
  EXPECT_TRUE(day.err.empty()) << day.err;
  RunResult too_many = m.Gpulane({"pick", "-g", "3", "--partition", "day"});
  EXPECT_EQ(too_many.exit_code, 2) << "only 2 GPUs can ever qualify in it: " << too_many.err;
  EXPECT_TRUE(too_many.out.empty());
}

TEST(Partition, TheDefaultPartitionAppliesWithoutTheOption) {
  PartitionMachine m("\n[sched]\ndefault_partition = \"day\"\n");
  RunResult r = m.Gpulane({"pick", "-g", "2"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "2,3\n");
}

TEST(Partition, AnUnknownPartitionIsAUsageErrorListingTheKnownOnes) {
  PartitionMachine m;
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"pick", "--partition", "nigth"}, {"run", "--partition", "nigth", "--", "true"},
        {"submit", "--partition", "nigth", "--", "true"}}) {
    RunResult r = m.Gpulane(args);
    SCOPED_TRACE(args[0]);
    EXPECT_TRUE(IsGpulaneError(r, 2, "--partition nigth: no such partition (known: day, later)")) << r.err;
    EXPECT_EQ(LineCount(r.err), 1) << r.err;
  }
}

TEST(Partition, AClosedPartitionRefusesPickAndRunNoWait) {
  PartitionMachine m;
  const std::string says = fmt::format("partition later is closed until 00:00 ({})", WeekdayAhead(2));
  RunResult pick = m.Gpulane({"pick", "--partition", "later"});
  EXPECT_TRUE(IsGpulaneError(pick, 5, says)) << pick.exit_code << " " << pick.err;
  EXPECT_TRUE(pick.out.empty());
  RunResult run = m.Gpulane({"run", "--no-wait", "--partition", "later", "--", "true"});
  EXPECT_TRUE(IsGpulaneError(run, 5, says)) << run.exit_code << " " << run.err;
  // The same GPU outside the partition is free: it is the window, not the GPU.
  RunResult free = m.Gpulane({"pick", "--gpus", "0"});
  EXPECT_EQ(free.exit_code, 0) << free.err;
  EXPECT_EQ(free.out, "0\n");
}

TEST(Partition, RunGetsThePartitionsGpus) {
  PartitionMachine m;
  RunResult r = m.Gpulane({"run", "-g", "2", "--partition", "day", "--", "/bin/sh", "-c", "echo $CUDA_VISIBLE_DEVICES"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "2,3\n") << r.err;
}

TEST(Partition, StatusShowsEachPartitionOpenOrClosed) {
  PartitionMachine m;
  RunResult r = m.Gpulane({"status"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "partition day (GPUs 2-3): open, no time windows\n")) << r.out;
  EXPECT_TRUE(Contains(r.out, fmt::format("partition later (GPUs 0): closed, opens {} 00:00\n", WeekdayAhead(2)))) << r.out;
}

TEST(Partition, QueueShowsEachPartitionUnderTheTableButNotInJson) {
  PartitionMachine m;
  RunResult r = m.Gpulane({"queue"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "partition day (GPUs 2-3): open, no time windows\n")) << r.out;
  EXPECT_TRUE(Contains(r.out, fmt::format("partition later (GPUs 0): closed, opens {} 00:00\n", WeekdayAhead(2)))) << r.out;
  RunResult json = m.Gpulane({"queue", "--json"});
  EXPECT_EQ(json.exit_code, 0) << json.err;
  EXPECT_EQ(json.out, "[]\n") << "the JSON listing stays the jobs alone";
}

// A queued job: the partition travels with the submission into the store, and the job's
// supervisor runs it on the partition's GPU.
TEST(Partition, AQueuedJobRunsOnThePartitionsGpus) {
  TestDaemon d({.config = "[partitions.second]\ngpus = [1]\n"});
  const std::int64_t id = d.Submit({"--partition", "second", "--", "sh", "-c", "echo $CUDA_VISIBLE_DEVICES"});
  ASSERT_GT(id, 0);
  ASSERT_EQ(d.Gpulane({"wait", std::to_string(id)}).exit_code, 0);
  EXPECT_EQ(d.Gpulane({"logs", std::to_string(id)}).out, "1\n") << "GPU0 is free too: only the partition's GPU";
  EXPECT_EQ(d.Show(id)["spec"]["request"]["partition"], "second");
}

}  // namespace
}  // namespace gpulane::test
