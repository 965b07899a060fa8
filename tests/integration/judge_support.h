#pragma once
// Helpers shared by the tests of the scheduler's rules through the real binary (judge_*_test.cc):
// what `gpulane pick`, `run --no-wait` and `status` answer on a fake machine.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "run_support.h"

namespace gpulane::test {

/// Every exported name of NVML's compute-process call (_v3, _v2, unversioned), so that a refusal
/// applies whichever the driver variant has.
inline const std::vector<std::string>& ComputeProcessCalls() {
  static const std::vector<std::string> names = {"nvmlDeviceGetComputeRunningProcesses_v3",
                                                 "nvmlDeviceGetComputeRunningProcesses_v2",
                                                 "nvmlDeviceGetComputeRunningProcesses"};
  return names;
}
/// The same for the graphics-process call.
inline const std::vector<std::string>& GraphicsProcessCalls() {
  static const std::vector<std::string> names = {"nvmlDeviceGetGraphicsRunningProcesses_v3",
                                                 "nvmlDeviceGetGraphicsRunningProcesses_v2",
                                                 "nvmlDeviceGetGraphicsRunningProcesses"};
  return names;
}
/// The same for the memory call (_v2 and v1).
inline const std::vector<std::string>& MemoryCalls() {
  static const std::vector<std::string> names = {"nvmlDeviceGetMemoryInfo_v2", "nvmlDeviceGetMemoryInfo"};
  return names;
}

/// Makes every name of `calls` fail with NVML code `rc` on `device`.
inline void RefuseCalls(json& device, const std::vector<std::string>& calls, int rc) {
  for (const auto& name : calls) RefuseCall(device, name, rc);
}

/// `gpulane pick ARGS...` on the machine (with its own config file, as RunOn).
inline RunResult PickOn(const FakeMachine& machine, std::vector<std::string> args, const Env& extra = {}) {
  args.insert(args.begin(), "pick");
  return RunGpulane(args, RunEnv(machine, extra));
}

/// `gpulane status ARGS...` on the machine.
inline RunResult StatusOn(const FakeMachine& machine, std::vector<std::string> args = {}) {
  args.insert(args.begin(), "status");
  return RunGpulane(args, RunEnv(machine));
}

/// `gpulane status --json`, parsed (null, and a test failure, when it fails).
inline json StatusJson(const FakeMachine& machine) {
  RunResult r = StatusOn(machine, {"--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  if (r.exit_code != 0) return nullptr;
  return json::parse(r.out);
}

/// The text status line of GPU `index` ("" when there is none).
inline std::string StatusLine(const RunResult& status, unsigned index) {
  const std::string start = fmt::format("[{}]", index);
  for (const std::string& line : Lines(status.out))
    if (line.rfind(start, 0) == 0) return line;
  return "";
}

/// A successful pick: exit 0, exactly `value` on stdout, nothing on stderr.
inline ::testing::AssertionResult Picked(const RunResult& r, const std::string& value) {
  if (r.exit_code == 0 && r.out == value + "\n" && r.err.empty()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "expected exit 0 and '" << value << "', got exit " << r.exit_code
                                       << ", stdout '" << r.out << "', stderr '" << r.err << "'";
}

/// A job that prints the GPUs it got: `run -q ... -- sh -c 'echo $CUDA_VISIBLE_DEVICES'`.
inline std::vector<std::string> EchoGpus(std::vector<std::string> options) {
  options.insert(options.begin(), "-q");
  for (const char* word : {"--", "/bin/sh", "-c", "echo $CUDA_VISIBLE_DEVICES"}) options.push_back(word);
  return options;
}

}  // namespace gpulane::test
