// `gpulane status` when something is wrong: no driver, NVML refusing to start, a lost GPU, values
// NVML will not give, no GPU at all.
#include <gtest/gtest.h>

#include <algorithm>
#include <fmt/format.h>

#include "support/harness.h"
#include "support/scenarios.h"
#include "support/text.h"

namespace gpulane::test {
namespace {

using nlohmann::json;

std::uint64_t U64(const json& v) { return v.get<std::uint64_t>(); }

TEST(Status, NoDriverIsAOneLineErrorWithItsOwnExitCode) {
  FakeMachine machine(RecordedH200x2(UnusedPid()));
  Env env = machine.env();
  env["GPULANE_NVML_LIBRARY"] = (machine.dir() / "nowhere" / "libnvidia-ml.so.1").string();
  RunResult r = RunGpulane({"status"}, env);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_TRUE(r.out.empty());
  EXPECT_NE(r.err.find("NVIDIA driver not found"), std::string::npos) << r.err;
  EXPECT_EQ(LineCount(r.err), 1) << r.err;
}

TEST(Status, LostGpuIsMarkedFailedAndTheOthersAreStillShown) {
  json state = WithLostGpu();
  FakeMachine machine(state);
  RunResult r = RunGpulane({"status", "--json"}, machine.env());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  json doc = json::parse(r.out);
  ASSERT_EQ(doc["gpus"].size(), 3u);
  int failed = 0;
  for (const json& g : doc["gpus"]) {
    if (g["state"] == "failed") {
      ++failed;
      EXPECT_EQ(g["error"], "NVML_ERROR_GPU_IS_LOST");
      EXPECT_EQ(g["nvml_index"], 2);
      for (const auto& key : {"memory_free_bytes", "memory_used_bytes", "utilization_gpu_pct", "processes", "name"})
        EXPECT_FALSE(g.contains(key)) << key << " of a lost GPU cannot be known";
      continue;
    }
    const json& dev = DeviceByUuid(state, g["uuid"].get<std::string>());
    EXPECT_EQ(g["state"], "ok");
    EXPECT_EQ(g["memory_free_bytes"], dev["memory"]["free"]);
    EXPECT_EQ(g["temperature_c"], dev["temp_c"]);
  }
  EXPECT_EQ(failed, 1);

  r = RunGpulane({"status"}, machine.env());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto lines = Lines(r.out);
  ASSERT_EQ(lines.size(), 4u) << r.out;
  EXPECT_EQ(std::count_if(lines.begin(), lines.end(),
                          [](const std::string& l) { return Contains(l, "failed: NVML_ERROR_GPU_IS_LOST"); }),
            1)
      << r.out;
  EXPECT_EQ(std::count_if(lines.begin(), lines.end(), [](const std::string& l) { return Contains(l, " MiB |"); }), 2)
      << r.out;
}

TEST(Status, AnyOtherPerGpuErrorAlsoFailsOnlyThatGpu) {
  for (const char* how : {"error", "handle_error"}) {
    SCOPED_TRACE(how);
    json state = RecordedH200x2(UnusedPid());
    state["devices"][0][how] = 999;  // NVML_ERROR_UNKNOWN
    FakeMachine machine(state);
    RunResult r = RunGpulane({"status", "--json"}, machine.env());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    json doc = json::parse(r.out);
    ASSERT_EQ(doc["gpus"].size(), 2u);
    const json& ok = doc["gpus"][0];
    const json& bad = doc["gpus"][1];  // no bus ID could be read: it sorts last
    EXPECT_EQ(bad["state"], "failed");
    EXPECT_EQ(bad["error"], "NVML_ERROR_UNKNOWN");
    EXPECT_EQ(ok["state"], "ok");
    EXPECT_EQ(ok["uuid"], state["devices"][1]["uuid"]);
    EXPECT_EQ(ok["memory_used_bytes"], state["devices"][1]["memory"]["used"]);
  }
}

TEST(Status, RefusedFieldsAreAbsentNotZero) {
  json state = RecordedH200x2(UnusedPid());
  RefuseCall(state["devices"][0], "nvmlDeviceGetPowerUsage", 3);  // NVML_ERROR_NOT_SUPPORTED
  state["devices"][1]["temp_c"] = "ERR:NVMLError_NotSupported:Not Supported";
  RefuseCall(state["devices"][1], "nvmlDeviceGetComputeRunningProcesses_v3", 4);  // NO_PERMISSION
  FakeMachine machine(state);
  RunResult r = RunGpulane({"status", "--json"}, machine.env());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json doc = json::parse(r.out);
  const json& g0 = doc["gpus"][0];
  const json& g1 = doc["gpus"][1];
  EXPECT_EQ(g0["state"], "ok");
  EXPECT_EQ(g1["state"], "ok");
  EXPECT_FALSE(g0.contains("power_draw_mw")) << g0.dump();
  EXPECT_EQ(g0["power_limit_mw"], state["devices"][0]["power_limit_mw"]);
  EXPECT_EQ(g1["power_draw_mw"], state["devices"][1]["power_mw"]);
  EXPECT_FALSE(g1.contains("temperature_c")) << g1.dump();
  EXPECT_EQ(g0["temperature_c"], state["devices"][0]["temp_c"]);
  EXPECT_FALSE(g1.contains("processes")) << "an unreadable list is not an empty one";
  EXPECT_EQ(g0["processes"], json::array());

  r = RunGpulane({"status"}, machine.env());
  auto lines = Lines(r.out);
  ASSERT_EQ(lines.size(), 3u) << r.out;
  EXPECT_TRUE(Contains(lines[1], fmt::format("  - / {} W", U64(state["devices"][0]["power_limit_mw"]) / 1000)))
      << lines[1];
  EXPECT_TRUE(Contains(lines[2], "  -°C")) << lines[2];
  EXPECT_EQ(lines[2].back(), '?') << lines[2];
}

TEST(Status, AMachineWithoutGpusSaysSo) {
  json state = RecordedH200x2(UnusedPid());
  state["devices"] = json::array();
  FakeMachine machine(state);
  RunResult r = RunGpulane({"status"}, machine.env());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Lines(r.out).size(), 2u) << r.out;
  EXPECT_TRUE(Contains(r.out, "no NVIDIA GPU found")) << r.out;
  r = RunGpulane({"status", "--json"}, machine.env());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["gpus"], json::array());
}

TEST(Status, DriverLibraryVersionMismatchSaysReboot) {
  json state = RecordedH200x2(UnusedPid());
  state["init_error"] = 18;  // NVML_ERROR_LIB_RM_VERSION_MISMATCH
  FakeMachine machine(state);
  for (const char* args : {"", "--json"}) {
    RunResult r = RunGpulane(*args ? std::vector<std::string>{"status", args} : std::vector<std::string>{"status"},
                             machine.env());
    EXPECT_EQ(r.exit_code, 4);
    EXPECT_TRUE(r.out.empty()) << r.out;
    EXPECT_EQ(LineCount(r.err), 1) << r.err;
    EXPECT_TRUE(Contains(r.err, "reboot")) << r.err;
  }
}

TEST(Status, DriverNotLoadedIsAnNvmlError) {
  json state = RecordedH200x2(UnusedPid());
  state["init_error"] = 9;  // NVML_ERROR_DRIVER_NOT_LOADED
  FakeMachine machine(state);
  RunResult r = RunGpulane({"status"}, machine.env());
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_EQ(LineCount(r.err), 1) << r.err;
  EXPECT_TRUE(Contains(r.err, "not loaded")) << r.err;
}

}  // namespace
}  // namespace gpulane::test
