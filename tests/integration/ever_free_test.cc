// A request no GPU can ever meet is refused at once, judged by what can ever be free (issue 23,
// item 4): an H200's 140.4 GiB total less the ~0.6 GiB its driver keeps for itself
// (nvmlDeviceGetMemoryInfo_v2's reserved; the recording in tests/fixtures/h200x2-2026-11-30 shows
// an idle H200 with 150106472448 of 150754820096 bytes free), worded so the sizes read apart.
#include <gtest/gtest.h>

#include "run_support.h"

namespace gpulane::test {
namespace {

constexpr std::uint64_t kH200TotalBytes = 150754820096ULL;
constexpr std::uint64_t kH200IdleFreeBytes = 150106472448ULL;  // as recorded: 139.8 GiB

// `n` idle H200s as NVML v2 reports them: nothing used, the driver's reservation never free.
json H200sWithReservedMemory(unsigned n) {
  json state = IdleMachine(n);
  for (json& gpu : state["devices"])
    gpu["memory"] = {{"total", kH200TotalBytes}, {"used", 0}, {"reserved", kH200TotalBytes - kH200IdleFreeBytes},
                     {"free", kH200IdleFreeBytes}};
  return state;
}

// Before: "--min-free 140GiB" passed the "can this ever qualify" check (140 GiB < 140.4 GiB total)
// and `run` waited forever ("140 GiB free < 140 GiB"); `pick` said "too few GPUs free now".
TEST(EverFree, AMinFreeAboveWhatCanEverBeFreeIsRefusedAtOnceNotWaitedForever) {
  FakeMachine machine(H200sWithReservedMemory(2));
  const fs::path ran = machine.dir() / "ran";
  RunResult r = RunOn(machine, {"--min-free", "140GiB", "--", "/bin/sh", "-c", "echo ran > \"$0\"", ran.string()}, {}, 20);
  EXPECT_TRUE(IsError(r, 2, "GPU0: 139.8 GiB free at most < 140 GiB")) << "the run waited or was refused otherwise";
  EXPECT_TRUE(Contains(r.err, "or a smaller --min-free")) << r.err;
  EXPECT_FALSE(fs::exists(ran)) << "nothing runs";

  RunResult pick = RunGpulane({"pick", "--min-free", "140GiB"}, RunEnv(machine));
  EXPECT_TRUE(IsError(pick, 2, "139.8 GiB free at most < 140 GiB"));

  // --mem is judged by the same bound: 139 GiB + the 1 GiB default margin is more than 139.8 GiB.
  RunResult mem = RunOn(machine, {"--mem", "139GiB", "--", "true"}, {}, 20);
  EXPECT_TRUE(IsError(mem, 2, "139 GiB + 1.0 GiB margin > 139.8 GiB free at most"));

  // What can be free is still granted at once.
  RunResult fits = RunOn(machine, {"--no-wait", "--min-free", "139.7GiB", "--", "printenv", "CUDA_VISIBLE_DEVICES"});
  EXPECT_EQ(fits.exit_code, 0) << fits.err;
  EXPECT_EQ(fits.out, "0\n");
}

}  // namespace
}  // namespace gpulane::test
