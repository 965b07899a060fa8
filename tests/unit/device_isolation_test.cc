// exec::PlanIsolation over a device tree the test makes: which nodes and driver entries a job's
// namespace masks (the child's mounts themselves are checked through the binary:
// tests/integration/isolation_test.cc).
#include "exec/device_isolation.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

namespace gpulane::exec {
namespace {

namespace fs = std::filesystem;

class PlanIsolationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/gpulane-plan-isolation-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    root_ = dir;
    roots_.dev_dir = (root_ / "dev").string();
    roots_.proc_driver_dir = (root_ / "proc").string();
    fs::create_directories(root_ / "dev" / "nvidia-caps");
    fs::create_directories(root_ / "proc" / "nvidia" / "gpus");
    fs::create_directories(root_ / "proc" / "nvidia-caps");
    for (const char* name : {"nvidia0", "nvidia1", "nvidia2", "nvidia7", "nvidiactl", "nvidia-uvm", "nvidia-modeset"}) Touch("dev", name);
    fs::create_directories(root_ / "dev" / "nvidia9dir");
    for (const char* bus : {"0000:18:00.0", "0000:3b:00.0", "0000:86:00.0"}) fs::create_directories(root_ / "proc" / "nvidia" / "gpus" / bus);
    std::ofstream(root_ / "proc" / "nvidia" / "params") << "ResmanDebugLevel: 1\nModifyDeviceFiles: 1\n";
    Touch("proc/nvidia", "version");
  }
  void TearDown() override { fs::remove_all(root_); }
  void Touch(const std::string& dir, const std::string& name) { std::ofstream(root_ / dir / name) << name; }
  std::string Dev(const std::string& name) const { return (root_ / "dev" / name).string(); }

  fs::path root_;
  IsolationRoots roots_;
};

GrantedDevice Gpu(unsigned minor, const std::string& bus) {
  GrantedDevice g;
  g.minor = minor;
  g.pci_bus_id = bus;
  g.label = "GPU" + std::to_string(minor);
  return g;
}

TEST_F(PlanIsolationTest, MasksEveryOtherGpuNodeByMinorNumberAndKeepsTheSharedOnes) {
  auto plan = PlanIsolation({Gpu(2, "00000000:3B:00.0")}, roots_);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  std::vector<std::string> masked = plan->masked;
  std::sort(masked.begin(), masked.end());
  EXPECT_EQ(masked, (std::vector<std::string>{Dev("nvidia0"), Dev("nvidia1"), Dev("nvidia7")}));
  // The driver's entry of its GPU, matched from NVML's 8-digit upper-case spelling.
  EXPECT_EQ(plan->gpus_kept, (std::vector<std::string>{(root_ / "proc" / "nvidia" / "gpus" / "0000:3b:00.0").string()}));
  EXPECT_EQ(plan->params_text, "ResmanDebugLevel: 1\nModifyDeviceFiles: 0\n");
  ASSERT_EQ(plan->proc_kept.size(), 1u);
  EXPECT_EQ(plan->proc_kept[0].path, (root_ / "proc" / "nvidia" / "version").string());
}

TEST_F(PlanIsolationTest, NoGpuMasksThemAllAndKeepsNoDriverEntry) {
  auto plan = PlanIsolation({}, roots_);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  EXPECT_EQ(plan->masked.size(), 4u);
  EXPECT_TRUE(plan->gpus_kept.empty());
  EXPECT_EQ(plan->summary, "devices: no GPU (4 GPU device nodes and 0 MIG capability nodes masked)");
}

TEST_F(PlanIsolationTest, AnUnknownMinorNumberIsRefusedNotGuessed) {
  GrantedDevice g = Gpu(0, "00000000:18:00.0");
  g.minor.reset();
  auto plan = PlanIsolation({g}, roots_);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.error().message.find("NVML does not report the minor number of GPU0"), std::string::npos) << plan.error().message;
}

TEST_F(PlanIsolationTest, AMigJobKeepsItsOwnInstancesCapabilitiesOnly) {
  std::ofstream(root_ / "proc" / "nvidia-caps" / "mig-minors")
      << "config 1\nmonitor 2\ngpu0/gi1/access 3\ngpu0/gi1/ci0/access 4\ngpu0/gi2/access 5\ngpu0/gi2/ci0/access 6\n"
         "gpu1/gi2/access 7\ngpu0/gi2/ci1/access 8\n";
  for (int m = 1; m <= 8; ++m) Touch("dev/nvidia-caps", "nvidia-cap" + std::to_string(m));
  GrantedDevice g = Gpu(0, "00000000:18:00.0");
  g.mig = true;
  g.gpu_instance_id = 2;
  g.compute_instance_id = 0;
  auto plan = PlanIsolation({g}, roots_);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  std::vector<std::string> caps;
  for (const auto& m : plan->masked)
    if (m.find("nvidia-caps") != std::string::npos) caps.push_back(fs::path(m).filename().string());
  std::sort(caps.begin(), caps.end());
  EXPECT_EQ(caps, (std::vector<std::string>{"nvidia-cap3", "nvidia-cap4", "nvidia-cap7", "nvidia-cap8"}));
  g.compute_instance_id.reset();
  EXPECT_FALSE(PlanIsolation({g}, roots_).ok()) << "a MIG device's unknown instance ids are refused";
}

// mig-minors costs milliseconds a read on a real driver (docs/security.md "Its cost"): where the
// only capability nodes are MIG's config and monitor, as their own driver entries say, it is not
// read. The mig-minors here contradicts them, so a plan that read it would mask nvidia-cap2.
TEST_F(PlanIsolationTest, OnlyTheConfigAndMonitorCapabilitiesPresentMeansMigMinorsIsNotRead) {
  fs::create_directories(root_ / "proc" / "nvidia" / "capabilities" / "mig");
  std::ofstream(root_ / "proc" / "nvidia" / "capabilities" / "mig" / "config") << "DeviceFileMinor: 1\nDeviceFileMode: 256\n";
  std::ofstream(root_ / "proc" / "nvidia" / "capabilities" / "mig" / "monitor") << "DeviceFileMinor: 2\nDeviceFileMode: 292\n";
  std::ofstream(root_ / "proc" / "nvidia-caps" / "mig-minors") << "config 1\ngpu0/gi1/access 2\n";
  Touch("dev/nvidia-caps", "nvidia-cap1");
  Touch("dev/nvidia-caps", "nvidia-cap2");
  auto plan = PlanIsolation({}, roots_);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  for (const auto& m : plan->masked) EXPECT_EQ(m.find("nvidia-caps"), std::string::npos) << m;
  // A third node may be an instance's: then mig-minors is read, and says what each node is.
  Touch("dev/nvidia-caps", "nvidia-cap3");
  std::ofstream(root_ / "proc" / "nvidia-caps" / "mig-minors") << "config 1\nmonitor 2\ngpu0/gi1/access 3\n";
  plan = PlanIsolation({}, roots_);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  EXPECT_NE(std::find(plan->masked.begin(), plan->masked.end(), Dev("nvidia-caps/nvidia-cap3")), plan->masked.end());
}

TEST_F(PlanIsolationTest, NoDriverAtAllMasksNothing) {
  IsolationRoots none{(root_ / "nodev").string(), (root_ / "noproc").string()};
  auto plan = PlanIsolation({Gpu(0, "00000000:18:00.0")}, none);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  EXPECT_TRUE(plan->empty());
  GrantedDevice unknown = Gpu(0, "00000000:18:00.0");
  unknown.minor.reset();
  EXPECT_TRUE(PlanIsolation({unknown}, none).ok()) << "nothing to hide: no reason to refuse";
}

}  // namespace
}  // namespace gpulane::exec
