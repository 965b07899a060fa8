// Placement of shares through the real binary: `gpulane pick --mem` (and `run --mem`) takes the
// fullest GPU the share fits on (best fit), so whole GPUs stay free; --order memory keeps most free
// first; whole-GPU requests keep most free first.
#include "integration/run_support.h"

namespace gpulane::test {
namespace {

// `gpulane pick ARGS...`, with the machine's environment and config.
RunResult BestFitPickOn(const FakeMachine& machine, std::vector<std::string> args) {
  args.insert(args.begin(), "pick");
  return RunGpulane(args, RunEnv(machine));
}

::testing::AssertionResult BestFitPicked(const RunResult& r, const std::string& value) {
  if (r.exit_code == 0 && r.out == value + "\n" && r.err.empty()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "expected exit 0 and '" << value << "', got exit " << r.exit_code
                                       << ", stdout '" << r.out << "', stderr '" << r.err << "'";
}

TEST(PickBestFit, AShareGoesToTheGpuAProcessPartlyUses) {
  json state = IdleMachine(3);
  // GPU 1: 100 GiB used by a process outside gpulane (this test's own, so it is alive); room for
  // a 20 GiB share is left there, and on the idle GPUs 0 and 2.
  AddProcess(state["devices"][1], static_cast<std::uint32_t>(getpid()), 100 * kGiB);
  SetUsedMemory(state["devices"][1], 100 * kGiB);
  FakeMachine machine(state);
  EXPECT_TRUE(BestFitPicked(BestFitPickOn(machine, {"--mem", "20GiB", "--share-foreign"}), "1"));
  EXPECT_TRUE(BestFitPicked(BestFitPickOn(machine, {"--mem", "20GiB", "--share-foreign", "--order", "memory"}), "0"))
      << "an explicit order is kept";
  EXPECT_TRUE(BestFitPicked(BestFitPickOn(machine, {"--share-foreign"}), "0")) << "whole GPUs: most free first";
  // It must fit: with 60 GiB declared, GPU 1 (about 40 GiB free) is left out.
  EXPECT_TRUE(BestFitPicked(BestFitPickOn(machine, {"--mem", "60GiB", "--share-foreign"}), "0"));
}

TEST(PickBestFit, AShareGoesToTheGpuAGpulaneShareLeaseHolds) {
  FakeMachine machine(IdleMachine(3));
  // A --mem job on GPU 1 asks, from inside (as a stranger to the job: neither its id nor its
  // CUDA_VISIBLE_DEVICES), where a 20 GiB share would go now, and where a whole GPU would.
  const std::string ask = R"sh(p() { env -u GPULANE_JOB_ID -u CUDA_VISIBLE_DEVICES "$GPULANE" pick "$@"; }
    echo "share $(p --mem 20GiB)"; echo "memory $(p --mem 20GiB --order memory)"; echo "whole $(p)")sh";
  RunResult r = RunOn(machine, {"-q", "--mem", "30GiB", "--gpus", "1", "--", "/bin/sh", "-c", ask},
                      {{"GPULANE", GpulaneBinary()}}, 30);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "share 1\nmemory 0\nwhole 0\n") << r.err;
}

}  // namespace
}  // namespace gpulane::test
