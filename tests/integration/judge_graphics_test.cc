// Graphics processes (an X server, an OpenGL or Vulkan program) keep a GPU from other jobs exactly
// like compute ones, on every driver variant; a graphics list NVML cannot read makes the GPU's
// processes unknown, a missing or unsupported one leaves the compute list. Through the real
// binary and the fake NVML.
#include <regex>
#include <set>

#include "judge_support.h"
#include "support/daemon_fixture.h"
#include "support/units.h"

namespace gpulane::test {
namespace {

// Above the largest pid_max Linux allows (4194304): processes of another PID namespace, never here.
constexpr std::uint32_t kGraphicsHiddenPid = 4194400;

class GraphicsOnEveryDriver : public ::testing::TestWithParam<std::string> {};

INSTANTIATE_TEST_SUITE_P(Judge, GraphicsOnEveryDriver, ::testing::Values("current", "no_v3", "legacy"),
                         [](const auto& info) { return info.param; });

TEST_P(GraphicsOnEveryDriver, AnotherUsersGraphicsProcessKeepsPickAndRunOffTheGpu) {
  ForeignProcess foreign;
  if (!foreign.foreign()) GTEST_SKIP() << "pid 1 is this user's own: no other user's process to show";
  json state = IdleMachine(2);
  AddGraphicsProcess(state["devices"][0], foreign.pid(), 45 * kMiB);  // GPU0 would be first in PCI order
  FakeMachine machine(state, GetParam());

  EXPECT_TRUE(Picked(PickOn(machine, {}), "1"));
  RunResult both = PickOn(machine, {"-n", "2"});
  EXPECT_TRUE(IsError(both, 5, fmt::format("GPU0: in use by {}'s {} (pid {})", foreign.user(), foreign.command(),
                                           foreign.pid())));
  EXPECT_TRUE(Picked(PickOn(machine, {"--share-foreign"}), "0")) << "--share-foreign takes it";
  RunResult run = RunOn(machine, EchoGpus({"--no-wait"}));
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, "1\n");
  EXPECT_TRUE(IsError(RunOn(machine, EchoGpus({"--no-wait", "--gpus", "0"})), 5, "GPU0: in use by"));

  json doc = StatusJson(machine);
  ASSERT_FALSE(doc.is_null());
  ASSERT_EQ(doc["gpus"][0]["processes"].size(), 1u) << doc.dump();
  const json& p = doc["gpus"][0]["processes"][0];
  EXPECT_EQ(p["pid"], foreign.pid());
  EXPECT_EQ(p["kind"], "graphics");
  EXPECT_EQ(p["used_memory_bytes"], 45 * kMiB);
  EXPECT_EQ(p["user"], foreign.user());
  EXPECT_EQ(doc["gpus"][1]["processes"], json::array());
  RunResult text = StatusOn(machine);
  EXPECT_TRUE(Contains(StatusLine(text, 0), fmt::format("{}:{}/{}(G 45M)", foreign.user(), foreign.command(),
                                                        foreign.pid())))
      << text.out;
}

// Many processes on both lists: every record is read with the layout of the call the driver has
// (24 bytes for _v3/_v2, 16 for the unversioned one), past the first answer of "insufficient size".
TEST_P(GraphicsOnEveryDriver, EveryRecordOfBothListsIsReadWithItsLayout) {
  json state = IdleMachine(1);
  std::set<std::uint32_t> compute, graphics;
  for (std::uint32_t i = 0; i < 40; ++i) {
    const std::uint32_t pid = kGraphicsHiddenPid + i;
    if (i % 2 == 0) {
      AddProcess(state["devices"][0], pid, (i + 1) * kMiB);
      compute.insert(pid);
    } else {
      AddGraphicsProcess(state["devices"][0], pid, (i + 1) * kMiB);
      graphics.insert(pid);
    }
  }
  FakeMachine machine(state, GetParam());
  json doc = StatusJson(machine);
  ASSERT_FALSE(doc.is_null());
  const json& procs = doc["gpus"][0]["processes"];
  ASSERT_EQ(procs.size(), 40u) << procs.dump();
  for (const json& p : procs) {
    const std::uint32_t pid = p["pid"].get<std::uint32_t>();
    SCOPED_TRACE(pid);
    EXPECT_EQ(p["kind"], compute.count(pid) ? "compute" : "graphics");
    EXPECT_TRUE(compute.count(pid) + graphics.count(pid) == 1);
    EXPECT_EQ(p["used_memory_bytes"], (pid - kGraphicsHiddenPid + 1) * kMiB);
  }
}

TEST(JudgeGraphics, AProcessOnBothListsIsOneProcessWithTheLargerMemoryFigure) {
  Child own = StartProcess({"/bin/sleep", "60"});
  json state = IdleMachine(2);
  AddProcess(state["devices"][0], own.pid(), 1024 * kMiB);
  AddGraphicsProcess(state["devices"][0], own.pid(), 1536 * kMiB);
  AddProcess(state["devices"][1], own.pid(), 0);
  state["devices"][1]["processes"][0]["used_memory"] = "n/a";  // not available on the compute list
  AddGraphicsProcess(state["devices"][1], own.pid(), 100 * kMiB);
  FakeMachine machine(state);
  json doc = StatusJson(machine);
  ASSERT_FALSE(doc.is_null());
  const json& on0 = doc["gpus"][0]["processes"];
  ASSERT_EQ(on0.size(), 1u) << on0.dump();
  EXPECT_EQ(on0[0]["pid"], own.pid());
  EXPECT_EQ(on0[0]["kind"], "compute+graphics");
  EXPECT_EQ(on0[0]["used_memory_bytes"], 1536 * kMiB) << "the larger figure, not the sum";
  const json& on1 = doc["gpus"][1]["processes"];
  ASSERT_EQ(on1.size(), 1u) << on1.dump();
  EXPECT_EQ(on1[0]["kind"], "compute+graphics");
  EXPECT_EQ(on1[0]["used_memory_bytes"], 100 * kMiB) << "a figure one list does not report comes from the other";

  RunResult text = StatusOn(machine);
  EXPECT_TRUE(Contains(StatusLine(text, 0), fmt::format(":sleep/{}(C+G 1536M)", own.pid()))) << text.out;
  RunResult full = StatusOn(machine, {"-p"});
  // pid and user lead the line, as scripts/gpu-acceptance.sh reads it; the type follows the memory.
  const std::regex process_line(fmt::format("^ +{} +{} +1536 MiB +C\\+G +/bin/sleep 60$", own.pid(), UserName(getuid())));
  bool listed = false;
  for (const std::string& line : Lines(full.out)) listed = listed || std::regex_search(line, process_line);
  EXPECT_TRUE(listed) << full.out;
}

TEST(JudgeGraphics, AGraphicsListNvmlRefusesMakesTheProcessesUnknown) {
  for (const bool as_string : {false, true}) {
    SCOPED_TRACE(as_string ? "graphics_processes: ERR:NVMLError_NoPermission" : "errors: 4 on every graphics call");
    json state = IdleMachine(2);
    if (as_string) state["devices"][0]["graphics_processes"] = "ERR:NVMLError_NoPermission:Insufficient Permissions";
    else RefuseCalls(state["devices"][0], GraphicsProcessCalls(), 4);  // NVML_ERROR_NO_PERMISSION
    FakeMachine machine(state);
    json doc = StatusJson(machine);
    ASSERT_FALSE(doc.is_null());
    EXPECT_EQ(doc["gpus"][0]["processes_known"], false);
    EXPECT_FALSE(doc["gpus"][0].contains("processes")) << "unknown is not empty";
    EXPECT_EQ(doc["gpus"][1]["processes_known"], true);
    EXPECT_EQ(doc["gpus"][1]["processes"], json::array());
    EXPECT_EQ(StatusLine(StatusOn(machine), 0).back(), '?');
    EXPECT_TRUE(Picked(PickOn(machine, {}), "1"));
    EXPECT_TRUE(IsError(PickOn(machine, {"--gpus", "0"}), 2, "processes are not reported"));
    EXPECT_TRUE(Picked(PickOn(machine, {"--gpus", "0", "--share-foreign"}), "0"));
  }
}

TEST(JudgeGraphics, AMissingOrUnsupportedGraphicsListLeavesTheComputeList) {
  struct Case {
    const char* what;
    std::string variant;
    bool refuse;
  };
  for (const Case& c : {Case{"driver without the graphics calls", "no_graphics", false},
                        Case{"graphics calls answer NOT_SUPPORTED", "current", true}}) {
    SCOPED_TRACE(c.what);
    Child own = StartProcess({"/bin/sleep", "60"});
    json state = IdleMachine(2);
    AddGraphicsProcess(state["devices"][0], kGraphicsHiddenPid, 45 * kMiB);  // not seen: these drivers cannot tell
    AddProcess(state["devices"][1], own.pid(), 512 * kMiB);           // seen: the compute list works
    if (c.refuse)
      for (auto& d : state["devices"]) RefuseCalls(d, GraphicsProcessCalls(), 3);  // NVML_ERROR_NOT_SUPPORTED
    FakeMachine machine(state, c.variant);
    json doc = StatusJson(machine);
    ASSERT_FALSE(doc.is_null());
    for (unsigned i = 0; i < 2; ++i) EXPECT_EQ(doc["gpus"][i]["processes_known"], true) << i;
    EXPECT_EQ(doc["gpus"][0]["processes"], json::array());
    ASSERT_EQ(doc["gpus"][1]["processes"].size(), 1u);
    EXPECT_EQ(doc["gpus"][1]["processes"][0]["kind"], "compute");
    EXPECT_TRUE(Picked(PickOn(machine, {}), "0"));
    EXPECT_TRUE(IsError(PickOn(machine, {"-n", "2"}), 5, "GPU1: in use by"));
  }
}

TEST(JudgeGraphics, TheKindSurvivesTheDaemonsSnapshot) {
  json state = IdleGpus(2);
  AddGraphicsProcess(state["devices"][0], kGraphicsHiddenPid, 45 * kMiB);
  AddProcess(state["devices"][1], kGraphicsHiddenPid + 1, 10 * kMiB);
  AddGraphicsProcess(state["devices"][1], kGraphicsHiddenPid + 1, 20 * kMiB);
  TestDaemon d(DaemonOptions{.state = state});
  // The client cannot load NVML: only the daemon's snapshot can answer.
  const Env no_nvml = {{"GPULANE_NVML_LIBRARY", (d.dir() / "missing" / "libnvidia-ml.so.1").string()}};
  RunResult r = d.Gpulane({"status", "--json"}, no_nvml);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json doc = json::parse(r.out);
  ASSERT_EQ(doc["gpus"][0]["processes"].size(), 1u) << doc.dump();
  EXPECT_EQ(doc["gpus"][0]["processes"][0]["kind"], "graphics");
  ASSERT_EQ(doc["gpus"][1]["processes"].size(), 1u) << doc.dump();
  EXPECT_EQ(doc["gpus"][1]["processes"][0]["kind"], "compute+graphics");
  EXPECT_EQ(doc["gpus"][1]["processes"][0]["used_memory_bytes"], 20 * kMiB);
  RunResult pick = d.Gpulane({"pick"}, no_nvml);
  EXPECT_EQ(pick.exit_code, 5) << "both GPUs are in use: " << pick.out << pick.err;
}

}  // namespace
}  // namespace gpulane::test
