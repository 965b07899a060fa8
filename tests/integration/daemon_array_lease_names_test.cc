// A new user's finding, through the real binary and the fake NVML: a running array task's lease
// named it by its own job id, which for task 0 is the array's id. `gpulane status` said "leased by
// root (job 4053)" for task 4053_0, and `gpulane cancel 4053` copied from it cancels every task;
// a waiting job's reason said "behind root's job 4053" for the same task; `gpulane show 4053_1`
// never found its usage (its lease said 4054); `gpulane report --by job` listed the tasks' usage
// under 4053 and 4054. The lease names the task as people write it
// (job_text "4053_1") beside its job id, which stays the number GPULANE_JOB_ID is.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "support/daemon_fixture.h"
#include "support/scenarios.h"
#include "support/text.h"

namespace gpulane::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A fast sampler (usage while a task runs); one queued job at a time waiting in the lease line, so
// that later ones stay pending in the daemon's order and say whom they wait behind.
constexpr const char* kConfig = "[telemetry]\ninterval = \"100ms\"\n[daemon]\nmax_waiting = 1\n";


TEST(DaemonArrayLeaseNames, StatusReasonsAndShowNameARunningTaskNeverByTheArraysIdThatCancelsEveryTask) {
  DaemonOptions options;
  options.config = kConfig;
  TestDaemon d(options);
  const std::string user = UserName(getuid());
  const fs::path gate = d.work() / "gate";
  // Two tasks, one GPU each: both GPUs leased by the array. Each writes the GPULANE_JOB_ID it got.
  const std::int64_t a = SubmitArray(
      d, "0-1", {"-g", "1", "--", "sh", "-c",
                 fmt::format("echo $GPULANE_JOB_ID > id-$GPULANE_ARRAY_INDEX; while [ ! -e {} ]; do sleep 0.05; done",
                             gate.string())});
  ASSERT_GT(a, 0);
  ASSERT_TRUE(d.WaitForState(a, "running")) << d.Log();
  ASSERT_TRUE(d.WaitForState(a + 1, "running")) << d.Log();
  const std::string task0 = fmt::format("{}_0", a), task1 = fmt::format("{}_1", a);

  // GPULANE_JOB_ID stays each task's own job id, a number (as SLURM_JOB_ID; scripts read it so).
  ASSERT_TRUE(Eventually([&] { return !ReadFile(d.work() / "id-0").empty() && !ReadFile(d.work() / "id-1").empty(); }, 30));
  EXPECT_EQ(ReadFile(d.work() / "id-0"), fmt::format("{}\n", a));
  EXPECT_EQ(ReadFile(d.work() / "id-1"), fmt::format("{}\n", a + 1));
  // Which task holds GPU0: task 1 may be launched past the cap beside task 0 (two idle GPUs, nobody
  // delayed: docs/scheduling.md), and then either supervisor may take its lease first (CI, ASan).
  const std::string on_gpu0 = d.Show(a)["gpu_indices"] == json::array({0}) ? task0 : task1;

  // status: each GPU names its task as `cancel` takes it, never the array's id (every task).
  RunResult status = d.Gpulane({"status"});
  ASSERT_EQ(status.exit_code, 0) << status.err;
  EXPECT_TRUE(Contains(status.out, fmt::format("job {} ({})", task0, user))) << status.out;
  EXPECT_TRUE(Contains(status.out, fmt::format("job {} ({})", task1, user))) << status.out;
  EXPECT_FALSE(Contains(status.out, fmt::format("job {} (", a))) << "the array's id cancels every task: " << status.out;
  EXPECT_FALSE(Contains(status.out, fmt::format("job {} (", a + 1))) << status.out;

  // A run that cannot have GPU0 says whose lease holds it, by the task's name.
  RunResult run = d.Gpulane({"run", "--gpus", "0", "--no-wait", "--", "true"});
  EXPECT_NE(run.exit_code, 0) << run.out;
  EXPECT_TRUE(Contains(run.err, fmt::format("leased by {} (job {})", user, on_gpu0))) << run.err;
  // A queued job waiting for GPU0 in the line says the same.
  const std::int64_t waiting = d.Submit({"--gpus", "0", "--", "true"});
  ASSERT_GT(waiting, 0);
  EXPECT_TRUE(d.WaitForReason(waiting, fmt::format("leased by {} (job {})", user, on_gpu0))) << d.Show(waiting).dump(2);
  // Behind it (the one place in the line taken), a second array's task 1 waits behind its task 0.
  const std::int64_t b = SubmitArray(d, "0-1", {"-g", "1", "--", "true"});
  ASSERT_GT(b, 0);
  EXPECT_TRUE(d.WaitForReason(b + 1, fmt::format("behind {}'s job {}_0 (", user, b))) << d.Show(b + 1).dump(2);
  RunResult queue = d.Gpulane({"queue"});
  EXPECT_FALSE(Contains(queue.out, fmt::format("job {} (", b))) << "the array's id cancels every task: " << queue.out;

  // show 12_1: the task's usage so far, by the name given (its lease's job id is a number of its own).
  const std::string usage = fmt::format("  usage     job {} used 1 GPU for ", task1);
  RunResult show;
  EXPECT_TRUE(Eventually([&] { return Contains((show = d.Gpulane({"show", task1})).out, usage); }, 30)) << show.out << show.err;
  EXPECT_TRUE(Contains(show.out, "(so far)")) << show.out;

  // Cancelled while they still wait: with the gate open first they could take the freed GPUs and
  // end before the cancel (seen in CI under ASan: cancel's exit 12, nothing left to cancel).
  EXPECT_EQ(d.Gpulane({"cancel", std::to_string(waiting), std::to_string(b)}).exit_code, 0);
  Touch(gate);
  ASSERT_TRUE(d.WaitForState(a, "completed")) << d.Log();
  ASSERT_TRUE(d.WaitForState(a + 1, "completed")) << d.Log();

  // Ended, each task's usage is kept under its name: `report --by job` names the tasks as `show`
  // and `cancel` take them (it said the array's id for task 0, a number nobody typed for task 1),
  // and `show 12_1` still finds the task's usage in the history.
  json rows;
  ASSERT_TRUE(Eventually([&] {
    RunResult r = d.Gpulane({"report", "--by", "job", "--json"});
    if (r.exit_code != 0) return false;
    rows = json::parse(r.out)["rows"];
    return rows.size() >= 2;
  }, 30)) << rows.dump();
  auto listed = [&](const std::string& key) {
    return std::any_of(rows.begin(), rows.end(), [&](const json& row) { return row["key"] == key; });
  };
  EXPECT_TRUE(listed(task0)) << rows.dump(2);
  EXPECT_TRUE(listed(task1)) << rows.dump(2);
  EXPECT_FALSE(listed(std::to_string(a))) << "the array's id cancels every task: " << rows.dump(2);
  EXPECT_FALSE(listed(std::to_string(a + 1))) << "a number nobody typed: " << rows.dump(2);
  RunResult ended = d.Gpulane({"show", task1});
  EXPECT_TRUE(Contains(ended.out, usage)) << ended.out << ended.err;
  EXPECT_FALSE(Contains(ended.out, "(so far)")) << ended.out;
}

}  // namespace
}  // namespace gpulane::test
