// `gpulane run` without a daemon meters its own job (issue 11, item 2: "otherwise it samples its
// own GPUs"): its usage line from its own samples of the fake NVML, the same figures the daemon's
// sampler would give.
#include <filesystem>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "support/harness.h"
#include "support/scenarios.h"
#include "support/text.h"

namespace gpulane::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A job as NVML would show a CUDA job: it adds its own process (3 GiB) to GPU 0 of the fake NVML's
// state (atomically, as FakeMachine::Save does), computes for `seconds`, takes itself off again (as
// the driver does at a process's exit) and exits 0.
std::vector<std::string> FakeCudaJob(const fs::path& state, double seconds) {
  const std::string script = R"(
import json, os, sys, time
path, seconds = sys.argv[1], float(sys.argv[2])
state = json.load(open(path))
state["devices"][0].setdefault("processes", []).append({"pid": os.getpid(), "used_memory": 3 << 30})
json.dump(state, open(path + ".job", "w")); os.rename(path + ".job", path)
time.sleep(seconds)
state["devices"][0]["processes"] = [p for p in state["devices"][0]["processes"] if p["pid"] != os.getpid()]
json.dump(state, open(path + ".job", "w")); os.rename(path + ".job", path)
)";
  return {"/usr/bin/python3", "-c", script, state.string(), fmt::format("{}", seconds)};
}

TEST(RunUsage, WithoutADaemonRunMetersItsOwnJobAndPrintsItsUsageLine) {
  json state = RecordedH200x2(UnusedPid());
  state["devices"][0]["processes"] = json::array();
  SetUtilization(state["devices"][0], 60);
  FakeMachine machine(state);
  std::vector<std::string> argv = {"run", "--gpus", "0", "--"};
  for (auto& a : FakeCudaJob(machine.dir() / "nvml.json", 3)) argv.push_back(a);
  RunResult r = RunGpulane(argv, machine.env(), 60);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // Samples a second apart while the job ran 3 s: its process's memory and GPU 0's utilisation.
  EXPECT_TRUE(Contains(r.err, "gpulane: job r")) << r.err;
  EXPECT_TRUE(Contains(r.err, " used 1 GPU for ")) << r.err;
  EXPECT_TRUE(Contains(r.err, ", peak 3.0 GiB, mean util 60 %")) << r.err;

  RunResult quiet = RunGpulane({"run", "-q", "--gpus", "0", "--", "true"}, machine.env(), 60);
  EXPECT_EQ(quiet.exit_code, 0);
  EXPECT_EQ(quiet.err, "") << "-q: no usage line";
}

}  // namespace
}  // namespace gpulane::test
