// gpulane doctor: one line per check, "ok"/"warn"/"FAIL" with the fix, exit 16 only when a check
// failed; and gpulane --version naming the version, the commit and the build type.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "support/harness.h"
#include "support/scenarios.h"
#include "support/text.h"

namespace gpulane::test {
namespace {

namespace fs = std::filesystem;

// The line of `out` that starts with `level` and contains `what`, or "".
std::string LineWith(const std::string& out, const std::string& level, const std::string& what) {
  for (const std::string& line : Lines(out))
    if (line.rfind(level, 0) == 0 && Contains(line, what)) return line;
  return "";
}

TEST(Doctor, AHealthyMachineIsAllOkButTheWarningsAndExitsZero) {
  FakeMachine machine(RecordedH200x2(UnusedPid()));
  fs::create_directories(machine.dir() / "leases");
  fs::permissions(machine.dir() / "leases", fs::perms::all | fs::perms::sticky_bit);
  Env env = machine.env();
  env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID";
  RunResult r = RunGpulane({"doctor"}, env);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  EXPECT_NE(LineWith(r.out, "ok", "nvml: driver 580.159.04"), "") << r.out;
  EXPECT_NE(LineWith(r.out, "ok", "2 GPUs"), "") << r.out;
  EXPECT_NE(LineWith(r.out, "ok", "config:"), "") << r.out;
  EXPECT_NE(LineWith(r.out, "ok", "mode 1777"), "") << r.out;
  EXPECT_NE(LineWith(r.out, "ok", "daemon: none runs"), "") << r.out;
  EXPECT_NE(LineWith(r.out, "ok", "CUDA_DEVICE_ORDER=PCI_BUS_ID"), "") << r.out;
  EXPECT_NE(LineWith(r.out, "", "clock:"), "") << r.out;
  for (const std::string& line : Lines(r.out))
    EXPECT_TRUE(line.rfind("ok  ", 0) == 0 || line.rfind("warn  ", 0) == 0) << line;
}

// A new user's finding: in the demo (GPULANE_LEASE_DIR in a fresh temporary folder) doctor warned
// that the lease directory did not exist and gave a root command and a boot rule as the fix, for a
// folder the first `gpulane run` makes. Where its parent is writable here, that is said, as ok.
TEST(Doctor, ALeaseDirectoryTheFirstRunCanMakeIsOkNotAWarningWithARootFix) {
  FakeMachine machine(RecordedH200x2(UnusedPid()));
  Env env = machine.env();
  env["GPULANE_LEASE_DIR"] = (machine.dir() / "not-yet").string();
  RunResult r = RunGpulane({"doctor"}, env);
  const std::string line = LineWith(r.out, "ok", "lease directory");
  EXPECT_TRUE(Contains(line, "does not exist yet: the first gpulane run creates it")) << r.out;
  EXPECT_FALSE(Contains(r.out, "install -d")) << r.out;
  RunResult run = RunGpulane({"run", "-g", "1", "--", "true"}, env);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_TRUE(fs::is_directory(machine.dir() / "not-yet")) << "the first run did not make it";
}

TEST(Doctor, EachProblemIsAFailOrWarnLineWithItsFix) {
  FakeMachine machine(MixedModels());
  fs::create_directories(machine.dir() / "leases");
  fs::permissions(machine.dir() / "leases", fs::perms::all);  // world-writable, not sticky
  const fs::path config = machine.dir() / "user.toml";
  std::ofstream(config) << "[run]\nkill_grace = \"forever\"\n";
  Env env = machine.env();
  env["GPULANE_CONFIG"] = config.string();
  env["CUDA_DEVICE_ORDER"] = "\x01unset";
  RunResult r = RunGpulane({"doctor"}, env);
  EXPECT_EQ(r.exit_code, 16) << r.out << r.err;
  EXPECT_NE(LineWith(r.out, "FAIL", "kill_grace"), "") << "a broken config is a check, not the end:\n" << r.out;
  EXPECT_NE(LineWith(r.out, "FAIL", "lease directory"), "") << r.out;
  const std::string order = LineWith(r.out, "warn", "CUDA_DEVICE_ORDER is not set");
  EXPECT_TRUE(Contains(order, "fix: export CUDA_DEVICE_ORDER=PCI_BUS_ID")) << r.out;
  EXPECT_NE(LineWith(r.out, "ok", "4 GPUs"), "") << "the other checks still ran:\n" << r.out;

  Env no_driver = machine.env();
  no_driver["GPULANE_NVML_LIBRARY"] = (machine.dir() / "nowhere" / "libnvidia-ml.so.1").string();
  r = RunGpulane({"doctor"}, no_driver);
  EXPECT_EQ(r.exit_code, 16);
  EXPECT_TRUE(Contains(LineWith(r.out, "FAIL", "nvml:"), "fix: install the NVIDIA driver")) << r.out;
  // A new user's finding: without a driver, doctor did not point at the demo's fake GPUs.
  EXPECT_TRUE(Contains(LineWith(r.out, "FAIL", "nvml:"), "no GPU here: the fake GPUs of README.md's demo (\"No GPU here? "
                                                         "The demo\") set GPULANE_NVML_LIBRARY and FAKE_NVML_STATE"))
      << r.out;
}

TEST(Version, NamesTheVersionTheCommitAndTheBuildType) {
  RunResult r = RunGpulane({"--version"}, {});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_TRUE(std::regex_match(r.out, std::regex(R"(gpulane \d+\.\d+\.\d+ \(commit ([0-9a-f]{12}(\+changes)?|unknown), \w+\)\n)")))
      << r.out;
}

}  // namespace
}  // namespace gpulane::test
