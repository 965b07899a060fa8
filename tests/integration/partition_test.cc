// Partitions through the real binary and the fake NVML: --partition restricts pick and run to the
// partition's GPUs, sched.default_partition applies without it, an unknown name is a usage error,
// and a partition closed now (a window on another weekday than today, computed from this
// machine's local time, so no clock is faked) refuses pick and run --no-wait with exit 5.
#include <gtest/gtest.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <regex>

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

// A time zone and a window that make a partition close `in_s` seconds (at most 60) from now: the
// TZ's offset puts the local clock `in_s` seconds before a minute's end, and the window is that
// minute (windows are whole minutes). So the test needs no faked clock and waits seconds, not
// until 20:00.
struct ClosingSoon {
  std::string tz;      ///< e.g. "GPL-0:00:41" (POSIX: local = UTC + 41 s)
  std::string window;  ///< "20:31-20:32", the local minute now
};
ClosingSoon CloseIn(int in_s) {
  const std::time_t now = std::time(nullptr);
  const int offset_s = static_cast<int>(((60 - in_s - now % 60) % 60 + 60) % 60);
  const std::time_t local = now + offset_s;
  const int minute = static_cast<int>(local % 86400 / 60);
  return {fmt::format("GPL-0:00:{:02d}", offset_s),
          fmt::format("{:02d}:{:02d}-{:02d}:{:02d}", minute / 60, minute % 60, (minute + 1) / 60, (minute + 1) % 60)};
}

// ends = "stop": `gpulane run` in the partition is stopped when it closes (SIGTERM: the job's
// exit status 143) and says why; without `ends` the same job would run its full minute.
TEST(Partition, RunIsStoppedWhenItsPartitionClosesWithEndsStop) {
  const ClosingSoon soon = CloseIn(8);
  FakeMachine machine(EightGpus());
  const fs::path config = machine.dir() / "config.toml";
  std::ofstream(config) << fmt::format("[partitions.closing]\ngpus = [1]\nwindows = [\"{}\"]\nends = \"stop\"\n", soon.window);
  Env env = machine.env();
  env["GPULANE_CONFIG"] = config.string();
  env["TZ"] = soon.tz;
  const auto start = std::chrono::steady_clock::now();
  RunResult r = RunGpulane({"run", "--partition", "closing", "--timeout", "30s", "--kill-grace", "1s", "--", "sleep", "60"}, env);
  const double took_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.exit_code, 143) << r.err;
  EXPECT_TRUE(Contains(r.err, "gpulane: warning: the job was stopped: partition closing closed at ")) << r.err;
  EXPECT_TRUE(Contains(r.err, "(ends = \"stop\")")) << r.err;
  EXPECT_LT(took_s, 30) << "stopped at the close (in about 8 s), not after its minute";
}

// ends = "requeue": a queued job running in the partition is stopped when it closes and goes back
// in line, its stopped attempt listed; it waits for the partition to open again (tomorrow).
TEST(Partition, AQueuedJobIsRequeuedWhenItsPartitionClosesWithEndsRequeue) {
  const ClosingSoon soon = CloseIn(8);
  TestDaemon d({.config = fmt::format("[partitions.closing]\ngpus = [1]\nwindows = [\"{}\"]\nends = \"requeue\"\n", soon.window),
                .daemon_env = {{"TZ", soon.tz}}});
  const std::int64_t id =
      d.Submit({"--partition", "closing", "--kill-grace", "1s", "--", "sh", "-c", "echo attempt $GPULANE_RETRY; exec sleep 60"},
               {{"TZ", soon.tz}});
  ASSERT_GT(id, 0);
  ASSERT_TRUE(d.WaitForState(id, "running", 30)) << d.State(id) << "\n" << d.Log();
  // Back in line: launched again at once, its supervisor waiting for the partition to open.
  ASSERT_TRUE(d.WaitForState(id, "launching", 40)) << d.State(id) << "\n" << d.Log();
  nlohmann::json job = d.Show(id);
  ASSERT_EQ(job["attempts"].size(), 1u) << job.dump();
  EXPECT_EQ(job["attempts"][0]["state"], "cancelled");
  EXPECT_EQ(job["attempts"][0]["exit_code"], 143);
  EXPECT_TRUE(Contains(job["attempts"][0]["reason"].get<std::string>(), "partition closing closed at ")) << job.dump();
  EXPECT_TRUE(Contains(d.Log(), fmt::format("job {} (root) was stopped and is requeued: partition closing closed at ", id)))
      << d.Log();
  ASSERT_TRUE(d.WaitForReason(id, "partition closing is closed until", 30)) << d.Show(id).dump();
  // The stopped attempt's log ends saying why gpulane stopped it and that it goes back in line; the
  // next attempt's supervisor wrote why it runs again before it began to wait.
  const std::string logs = d.Gpulane({"logs", std::to_string(id)}).out;
  const std::string stopped = LineStartingWith(logs, "gpulane: stopped");
  EXPECT_TRUE(std::regex_match(stopped, std::regex(R"(gpulane: stopped after [0-9]+\.[0-9] s: partition closing closed at )"
                                                   R"([0-9]{2}:[0-9]{2} \([A-Z][a-z]{2}\) \(ends = "requeue"\); it goes back )"
                                                   R"(in line, to start when the partition opens again)")))
      << logs;
  EXPECT_EQ(logs.rfind("attempt 0\n" + stopped + "\ngpulane: attempt 2, requeued: partition closing closed at ", 0), 0u) << logs;
  EXPECT_EQ(d.Gpulane({"cancel", std::to_string(id)}).exit_code, 0);
}

}  // namespace
}  // namespace gpulane::test
