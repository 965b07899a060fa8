// Commands take GPU snapshots from a running daemon (no NVML start-up of their own) and read NVML
// themselves when no daemon answers.
#include <gtest/gtest.h>

#include "support/daemon_fixture.h"
#include "support/harness.h"

namespace gpulane::test {
namespace {

using nlohmann::json;

TEST(DaemonSnapshot, StatusPickAndRunWorkThroughTheDaemonWithoutNvmlOfTheirOwn) {
  TestDaemon d;
  // The client cannot load NVML at all: only the daemon can have answered.
  const Env no_nvml = {{"GPULANE_NVML_LIBRARY", (d.dir() / "missing" / "libnvidia-ml.so.1").string()}};
  RunResult status = d.Gpulane({"status", "--json"}, no_nvml);
  ASSERT_EQ(status.exit_code, 0) << status.err;
  json doc = json::parse(status.out);
  // The same as what the command reads from the fake NVML itself.
  RunResult own = d.Gpulane({"status", "--json"}, {{"GPULANE_DIRECT_NVML", "1"}});
  ASSERT_EQ(own.exit_code, 0) << own.err;
  json own_doc = json::parse(own.out);
  ASSERT_EQ(doc["gpus"].size(), 2u);
  ASSERT_EQ(own_doc["gpus"].size(), 2u);
  EXPECT_EQ(doc["driver_version"], own_doc["driver_version"]);
  for (int i = 0; i < 2; ++i) {
    for (const char* key : {"uuid", "pci_bus_id", "memory_total_bytes", "memory_used_bytes", "utilization_gpu_pct",
                            "temperature_c", "power_draw_mw", "processes"})
      EXPECT_EQ(doc["gpus"][i][key], own_doc["gpus"][i][key]) << key;
  }

  RunResult pick = d.Gpulane({"pick", "--share-foreign", "-n", "2"}, no_nvml);
  EXPECT_EQ(pick.exit_code, 0) << pick.err;
  EXPECT_EQ(pick.out, "0,1\n");

  RunResult run = d.Gpulane({"run", "-q", "--gpus", "0", "--", "sh", "-c", "echo $CUDA_VISIBLE_DEVICES"}, no_nvml);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, "0\n");

  // GPULANE_DIRECT_NVML=1 skips the daemon: now the missing library is the answer.
  Env direct = no_nvml;
  direct["GPULANE_DIRECT_NVML"] = "1";
  RunResult alone = d.Gpulane({"status", "--json"}, direct);
  EXPECT_EQ(alone.exit_code, 3) << alone.err;
}

TEST(DaemonSnapshot, WithoutADaemonCommandsReadNvmlThemselves) {
  FakeMachine machine(RecordedH200x2(UnusedPid()));
  RunResult status = RunGpulane({"status", "--json"}, machine.env());
  ASSERT_EQ(status.exit_code, 0) << status.err;
  EXPECT_EQ(json::parse(status.out)["gpus"].size(), 2u);
  EXPECT_FALSE(std::filesystem::exists(machine.dir() / "gpulane.sock")) << "status must never start a daemon";
}

}  // namespace
}  // namespace gpulane::test
