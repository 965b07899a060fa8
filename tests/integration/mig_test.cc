// MIG devices as units through the real binary and the fake NVML (issue 10, item 8): `pick --mig`,
// `run --mig` and `submit --mig` lease one MIG device of a profile whole and hand it to the job as
// CUDA_VISIBLE_DEVICES=MIG-... The MIG GPU is synthetic (tests/support/scenarios.cc WithMigGpu: a
// recorded H200 split into two 3g.71gb MIG devices, the first running a process outside gpulane).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <fstream>

#include "support/daemon_fixture.h"
#include "support/harness.h"
#include "support/scenarios.h"
#include "support/text.h"

namespace gpulane::test {
namespace {

TEST(Mig, PickAndRunGetTheFreeMigDeviceOfTheProfile) {
  Child outsider = StartProcess({"/bin/sleep", "60"});
  FakeMachine machine(WithMigGpu(outsider.pid()));
  const std::string free_mig = MigDeviceUuids()[1];  // the first runs the outsider's process
  RunResult r = RunGpulane({"pick", "--mig", "3g.71gb"}, machine.env());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, free_mig + "\n");
  r = RunGpulane({"pick", "--mig", "3g.71gb", "--export"}, machine.env());
  EXPECT_EQ(r.out, fmt::format("export CUDA_VISIBLE_DEVICES={} CUDA_DEVICE_ORDER=PCI_BUS_ID\n", free_mig));
  r = RunGpulane({"run", "--mig", "3g.71gb", "--", "sh", "-c", "echo $CUDA_VISIBLE_DEVICES $GPULANE_GPU_UUIDS"}, machine.env());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, fmt::format("{} {}\n", free_mig, free_mig));
}

TEST(Mig, ALeasedMigDeviceGoesToNobodyElseUntilReleased) {
  Child outsider = StartProcess({"/bin/sleep", "60"});
  FakeMachine machine(WithMigGpu(outsider.pid()));
  const std::string release = (machine.dir() / "release").string();
  Child holder({GpulaneBinary(), "run", "--mig", "3g.71gb", "--", "sh", "-c",
                 fmt::format("echo $CUDA_VISIBLE_DEVICES; while [ ! -e {} ]; do sleep 0.05; done", release)},
                machine.env());
  ASSERT_TRUE(Eventually([&] { return Contains(holder.OutSoFar(), MigDeviceUuids()[1]); }, 30)) << holder.ErrSoFar();
  RunResult r = RunGpulane({"run", "--no-wait", "--mig", "3g.71gb", "--", "true"}, machine.env());
  EXPECT_EQ(r.exit_code, 5) << r.err;
  EXPECT_TRUE(Contains(r.err, fmt::format("{} (GPU2 3g.71gb): leased by ", MigDeviceUuids()[1]))) << r.err;
  EXPECT_TRUE(Contains(r.err, fmt::format("{} (GPU2 3g.71gb): in use by ", MigDeviceUuids()[0]))) << r.err;
  // Whole-GPU requests still get whole GPUs, never the MIG GPU (GPU1 runs a recorded process).
  r = RunGpulane({"pick", "--gpus", "0,2"}, machine.env());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "0\n");
  r = RunGpulane({"pick", "--gpus", "2"}, machine.env());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(Contains(r.err, "GPU2: MIG mode on")) << r.err;
  std::ofstream(release).put('\n');
  auto ended = holder.Wait(30);
  ASSERT_TRUE(ended);
  EXPECT_EQ(ended->exit_code, 0) << ended->err;
  r = RunGpulane({"pick", "--mig", "3g.71gb"}, machine.env());
  EXPECT_EQ(r.out, MigDeviceUuids()[1] + "\n") << "free again once the job ended";
}

// A process NVML lists on a MIG device whose pid is not visible here (another container's) keeps
// that MIG device from others, as it keeps a whole GPU.
TEST(Mig, AProcessOfAnotherPidNamespaceKeepsItsMigDevice) {
  FakeMachine machine(WithMigGpu(UnusedPid()));
  RunResult r = RunGpulane({"pick", "--mig", "3g.71gb"}, machine.env());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, MigDeviceUuids()[1] + "\n");
  // With the other MIG device gone, nothing is free: the answer names that process.
  nlohmann::json state = WithMigGpu(UnusedPid());
  DeviceByUuid(state, MigParentUuid())["mig_devices"].erase(1);
  FakeMachine one_mig(state);
  r = RunGpulane({"pick", "--mig", "3g.71gb"}, one_mig.env());
  EXPECT_EQ(r.exit_code, 5) << r.out;
  EXPECT_TRUE(Contains(r.err, fmt::format("{} (GPU2 3g.71gb): in use by pid ", MigDeviceUuids()[0]))) << r.err;
  EXPECT_TRUE(Contains(r.err, "(not visible here)")) << r.err;
}

TEST(Mig, BadMigRequestsAreRefusedWithTheFix) {
  FakeMachine machine(WithMigGpu(UnusedPid()));
  RunResult r = RunGpulane({"pick", "--mig", "1g.18gb"}, machine.env());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(Contains(r.err, "MIG profiles here: 3g.71gb")) << r.err;
  r = RunGpulane({"run", "-g", "2", "--mig", "3g.71gb", "--", "true"}, machine.env());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(Contains(r.err, "CUDA uses only one MIG device per process")) << r.err;
  r = RunGpulane({"pick", "--mig", "3g.71gb", "--mem", "10GiB"}, machine.env());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  FakeMachine whole(RecordedH200x2(UnusedPid()));
  r = RunGpulane({"pick", "--mig", "3g.71gb"}, whole.env());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(Contains(r.err, "no GPU here is in MIG mode")) << r.err;
}

TEST(Mig, AQueuedJobGetsItsMigDevice) {
  TestDaemon d({.state = WithMigGpu(UnusedPid())});
  const std::int64_t id = d.Submit({"--mig", "3g.71gb", "--", "sh", "-c", "echo $CUDA_VISIBLE_DEVICES"});
  ASSERT_GT(id, 0);
  ASSERT_TRUE(d.WaitForState(id, "completed", 30)) << d.State(id) << "\n" << d.Log();
  // The first MIG device runs another PID namespace's process: the job gets the second.
  EXPECT_EQ(d.Gpulane({"logs", std::to_string(id)}).out, MigDeviceUuids()[1] + "\n");
  EXPECT_EQ(d.Show(id)["gpu_uuids"], nlohmann::json::array({MigDeviceUuids()[1]}));
  EXPECT_EQ(d.Show(id)["spec"]["request"]["mig_profile"], "3g.71gb");
}

}  // namespace
}  // namespace gpulane::test
