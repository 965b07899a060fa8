// `gpulane status` through the real binary, the real dlopen path and the fake NVML.
#include <gtest/gtest.h>

#include "support/harness.h"

namespace gpulane::test {
namespace {

using nlohmann::json;

TEST(Status, JsonMatchesTheRecordedH200s) {
  FakeMachine machine(RecordedH200x2(UnusedPid()));
  RunResult r = RunGpulane({"status", "--json"}, machine.env());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json doc = json::parse(r.out);
  EXPECT_EQ(doc["schema_version"], 1);
  EXPECT_EQ(doc["driver_version"], "580.159.04");
  EXPECT_EQ(doc["cuda_driver_version"], "13.0");
  ASSERT_EQ(doc["gpus"].size(), 2u);
  const json& g1 = doc["gpus"][1];
  EXPECT_EQ(g1["uuid"], "GPU-778ba935-0843-21da-7a3c-88969e2a9af7");
  EXPECT_EQ(g1["pci_bus_id"], "00000000:00:07.0");
  EXPECT_EQ(g1["memory_total_bytes"], 150754820096ULL);
  EXPECT_EQ(g1["memory_used_bytes"], 5158862848ULL);
  EXPECT_EQ(g1["utilization_gpu_pct"], 100);
  EXPECT_EQ(g1["power_draw_mw"], 659938);
  EXPECT_EQ(g1["temperature_c"], 59);
  ASSERT_EQ(g1["processes"].size(), 1u);
  EXPECT_EQ(g1["processes"][0]["used_memory_bytes"], 4504682496ULL);
  EXPECT_FALSE(g1["processes"][0].contains("user")) << "a pid /proc cannot see has no made-up user";
  EXPECT_TRUE(r.err.empty()) << r.err;
}

TEST(Status, NoDriverIsAOneLineErrorWithItsOwnExitCode) {
  FakeMachine machine(RecordedH200x2(UnusedPid()));
  Env env = machine.env();
  env["GPULANE_NVML_LIBRARY"] = (machine.dir() / "nowhere" / "libnvidia-ml.so.1").string();
  RunResult r = RunGpulane({"status"}, env);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_TRUE(r.out.empty());
  EXPECT_NE(r.err.find("NVIDIA driver not found"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

}  // namespace
}  // namespace gpulane::test
