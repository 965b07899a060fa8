// `gpulane run` on an 8-GPU machine (fake NVML; issue 5 asks for the same on real 8-GPU machines):
// multi-GPU jobs land on NVLinked sets, and 16 single-GPU jobs use every GPU without ever sharing one.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

#include "support/harness.h"
#include "support/scenarios.h"
#include "support/units.h"

namespace gpulane::test {
namespace {

using nlohmann::json;

std::string VisibleDevicesOf(FakeMachine& machine, const std::vector<std::string>& options) {
  std::vector<std::string> args = {"run", "-q"};
  args.insert(args.end(), options.begin(), options.end());
  for (const char* a : {"--", "sh", "-c", "echo $CUDA_VISIBLE_DEVICES"}) args.push_back(a);
  RunResult r = RunGpulane(args, machine.env());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.out;
}

TEST(RunEightGpus, MultiGpuJobsGetNvLinkedSets) {
  json state = EightGpus();  // NVLink: (0,1) (2,3) (4,5) (6,7), and 4-7 all linked to each other
  json& gpus = state["devices"];
  // Most free memory first: 0, 2, 1, 3, then 4..7.
  SetUsedMemory(gpus[0], 1 * kGiB);
  SetUsedMemory(gpus[2], 2 * kGiB);
  SetUsedMemory(gpus[1], 3 * kGiB);
  SetUsedMemory(gpus[3], 4 * kGiB);
  for (unsigned i = 4; i < 8; ++i) SetUsedMemory(gpus[i], (5 + i) * kGiB);
  FakeMachine machine(state);
  EXPECT_EQ(VisibleDevicesOf(machine, {"-g", "2"}), "0,1\n") << "0 and 2 are freer, but only 0 and 1 are linked";
  EXPECT_EQ(VisibleDevicesOf(machine, {"-g", "4"}), "4,5,6,7\n") << "the only four GPUs all linked to each other";
  EXPECT_EQ(VisibleDevicesOf(machine, {"-g", "8"}), "0,1,2,3,4,5,6,7\n");
}

TEST(RunEightGpus, SixteenJobsUseEveryGpuAndNeverShareOne) {
  FakeMachine machine(EightGpus());
  const std::string log = (machine.dir() / "jobs.log").string();
  const std::string script =
      "echo start $CUDA_VISIBLE_DEVICES $(date +%s%N) >> " + log + "; sleep 0.3; echo end $CUDA_VISIBLE_DEVICES $(date +%s%N) >> " + log;
  std::vector<Child> runs;
  for (int i = 0; i < 16; ++i)
    runs.emplace_back(std::vector<std::string>{GpulaneBinary(), "run", "-q", "-g", "1", "--", "sh", "-c", script}, machine.env());
  for (auto& r : runs) {
    auto result = r.Wait(120);
    ASSERT_TRUE(result.has_value()) << "a run did not finish";
    EXPECT_EQ(result->exit_code, 0) << result->err;
  }
  // Per GPU, the jobs' intervals must not overlap; every GPU must have been used.
  std::map<std::string, std::vector<std::pair<long long, long long>>> by_gpu;
  std::map<std::string, long long> open;
  std::ifstream in(log);
  std::string event, gpu;
  long long t = 0;
  int starts = 0;
  while (in >> event >> gpu >> t) {
    if (event == "start") {
      EXPECT_EQ(open.count(gpu), 0u) << "two jobs at once on GPU " << gpu;
      open[gpu] = t;
      ++starts;
    } else {
      by_gpu[gpu].push_back({open[gpu], t});
      open.erase(gpu);
    }
  }
  EXPECT_EQ(starts, 16);
  EXPECT_EQ(by_gpu.size(), 8u) << "every GPU used";

}

}  // namespace
}  // namespace gpulane::test
