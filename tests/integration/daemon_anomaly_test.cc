// Anomalies through the real binary and the fake NVML (issue 11, item 3): an Xid error drains its
// GPU (no new job starts there, requests wait, `status` says why) until the clear time passes; an
// idle leased GPU, a foreign process on it and ghost memory are raised as events that
// `gpulane events` lists and `status` marks. An idle job cancelled (anomaly.idle_action = "cancel"),
// an array's task among them, is tested in-process: tests/unit/daemon_inproc_sampler_test.cc.
#include <filesystem>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "support/daemon_fixture.h"
#include "support/scenarios.h"
#include "support/text.h"

namespace gpulane::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Kinds of the anomalies going on now.
std::vector<std::string> CurrentKinds(const TestDaemon& d) {
  std::vector<std::string> kinds;
  json reply = d.Call({{"op", "events"}});
  if (!reply.value("ok", false)) return kinds;
  for (const auto& a : reply["current"]) kinds.push_back(a["kind"].get<std::string>());
  return kinds;
}

bool HasKind(const TestDaemon& d, const std::string& kind) {
  auto kinds = CurrentKinds(d);
  return std::find(kinds.begin(), kinds.end(), kind) != kinds.end();
}

TEST(DaemonAnomaly, AnXidDrainsItsGpuUntilTheClearTimeAndRequestsWaitMeanwhile) {
  DaemonOptions options;
  json state = IdleGpus(2);
  state["devices"][1]["xids"] = json::array();
  options.state = state;
  options.config = "[telemetry]\ninterval = \"100ms\"\n[anomaly]\nxid_clear_after = \"3s\"\n";
  TestDaemon d(options);
  ASSERT_TRUE(Eventually([&] { return d.Call({{"op", "telemetry"}}).value("time_s", 0.0) > 0; }, 30));
  d.machine().state()["devices"][1]["xids"].push_back(79);
  d.machine().Save();
  ASSERT_TRUE(Eventually([&] { return HasKind(d, "xid"); }, 30)) << d.Log();

  RunResult status = d.Gpulane({"status"});
  ASSERT_EQ(status.exit_code, 0) << status.err;
  EXPECT_TRUE(Contains(status.out, "! drained (takes no new jobs): GPU 1 raised Xid 79")) << status.out;
  RunResult json_status = d.Gpulane({"status", "--json"});
  EXPECT_TRUE(json::parse(json_status.out)["gpus"][1].contains("drained")) << json_status.out;
  // A request for that GPU only waits instead of starting there (and instead of failing for good).
  RunResult no_wait = d.Gpulane({"run", "--no-wait", "--gpus", "1", "--", "true"});
  EXPECT_EQ(no_wait.exit_code, 5) << no_wait.err;
  EXPECT_TRUE(Contains(no_wait.err, "drained: GPU 1 raised Xid 79")) << no_wait.err;
  // Any GPU: GPU 0.
  RunResult pick = d.Gpulane({"pick"});
  EXPECT_EQ(pick.out, "0\n") << pick.err;
  RunResult events = d.Gpulane({"events"});
  ASSERT_EQ(events.exit_code, 0) << events.err;
  EXPECT_TRUE(Contains(events.out, "xid       GPU 1 raised Xid 79")) << events.out;
  EXPECT_TRUE(Contains(events.out, "[now]")) << events.out;

  // 3 s without another Xid: GPU 1 takes jobs again.
  ASSERT_TRUE(Eventually([&] { return !HasKind(d, "xid"); }, 30));
  RunResult run = d.Gpulane({"run", "--no-wait", "--gpus", "1", "--", "true"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  events = d.Gpulane({"events"});
  EXPECT_TRUE(Contains(events.out, "[ended ")) << events.out;
}

TEST(DaemonAnomaly, AnIdleLeasedGpuAForeignProcessOnItAndGhostMemoryAreRaisedAndMarked) {
  DaemonOptions options;
  options.state = IdleGpus(2);
  options.config =
      "[telemetry]\ninterval = \"100ms\"\n[anomaly]\nidle_after = \"1s\"\nghost_min = \"1GiB\"\nghost_after = \"1s\"\n";
  TestDaemon d(options);
  const fs::path gate = d.work() / "gate";
  Child run = d.StartGpulane({"run", "--gpus", "0", "--", "sh", "-c",
                              fmt::format("while [ ! -e {} ]; do sleep 0.05; done", gate.string())});
  const std::string job_id = fmt::format("r{}", run.pid());
  // Once the job holds GPU 0 (the sampler meters its lease), GPU 0 stays at 0 %: idle. A process of another container appears on it; GPU 1 has 6 GiB in use
  // that no process accounts for.
  ASSERT_TRUE(Eventually([&] { return d.Call({{"op", "usage"}, {"job_id", job_id}}).value("ok", false); }, 30))
      << run.ErrSoFar();
  const std::uint32_t outsider = UnusedPid();
  AddProcess(d.machine().state()["devices"][0], outsider, 1ULL << 30);
  SetUsedMemory(d.machine().state()["devices"][1], 6ULL << 30);
  d.machine().Save();
  ASSERT_TRUE(Eventually([&] { return HasKind(d, "idle") && HasKind(d, "foreign") && HasKind(d, "ghost"); }, 30))
      << d.Log();
  RunResult events = d.Gpulane({"events", "--json"});
  ASSERT_EQ(events.exit_code, 0) << events.err;
  json reply = json::parse(events.out);
  bool idle_named = false;
  for (const auto& e : reply["events"])
    if (e["kind"] == "idle") idle_named = e["job_id"] == job_id && Contains(e["message"].get<std::string>(), "job " + job_id);
  EXPECT_TRUE(idle_named) << events.out;
  RunResult status = d.Gpulane({"status"});
  EXPECT_TRUE(Contains(status.out, fmt::format("  ! pid {} (not visible here) runs on GPU 0, which job {}", outsider, job_id)))
      << status.out;
  EXPECT_TRUE(Contains(status.out, "  ! GPU 1 has 6.0 GiB in use that no process accounts for")) << status.out;
  EXPECT_FALSE(Contains(status.out, "drained")) << "only Xid errors and failures drain a GPU\n" << status.out;

  Touch(gate);
  ASSERT_TRUE(run.Wait(30));
  ASSERT_TRUE(Eventually([&] { return !HasKind(d, "idle") && !HasKind(d, "foreign"); }, 30)) << "over with the job";
  EXPECT_TRUE(HasKind(d, "ghost"));
}

}  // namespace
}  // namespace gpulane::test
