// CPU-only jobs (-g 0, issue 13) through the real binary: `gpulane run -g 0` and `submit -g 0` take
// no GPU and no lease and run with CUDA_VISIBLE_DEVICES empty; `pick -g 0` stays a usage error.
#include <gtest/gtest.h>

#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <string>

#include "integration/run_support.h"
#include "support/daemon_fixture.h"
#include "support/text.h"

namespace gpulane::test {
namespace {

std::vector<std::string> With(std::vector<std::string> options, const std::vector<std::string>& command) {
  options.insert(options.end(), command.begin(), command.end());
  return options;
}

// A CPU-only step: -g 0 takes no GPU, starts while every GPU is taken, sees CUDA_VISIBLE_DEVICES
// set and empty, and waits for the GPU job it depends on.
TEST(CpuOnlyJobs, StartWithoutGpusAfterAGpuJobAndNeverWaitForGpus) {
  TestDaemon d;  // two GPUs
  const std::string gate = (d.work() / "gate").string();
  const std::string marks = (d.work() / "marks").string();
  const std::int64_t gpu0 = d.Submit(With({"-g", "2", "--"}, MarkedJob(marks, gate)));
  ASSERT_TRUE(d.WaitForState(gpu0, "running"));
  const std::string report =
      "if [ -n \"${CUDA_VISIBLE_DEVICES+set}\" ]; then printf '[%s] %s %s' \"$CUDA_VISIBLE_DEVICES\" "
      "\"$CUDA_DEVICE_ORDER\" \"${GPULANE_LEASE_FD:-nolease}\"; fi";
  // While both GPUs are leased: a -g 0 job runs to its end; one --after the GPU job waits for it.
  const std::int64_t free_step = d.Submit({"-g", "0", "-o", "free.out", "--", "sh", "-c", report});
  const std::int64_t after = d.Submit({"-g", "0", "--after", Id(gpu0), "-o", "after.out", "--", "sh", "-c", report});
  RunResult waited = d.Gpulane({"wait", Id(free_step)});
  EXPECT_EQ(waited.exit_code, 0) << waited.err;
  EXPECT_EQ(ReadFile(d.work() / "free.out"), "[] PCI_BUS_ID nolease");
  EXPECT_EQ(d.State(after), "pending");
  EXPECT_TRUE(Contains(d.Show(after)["reason"], fmt::format("waiting for job {}", gpu0))) << d.Show(after).dump();
  // queue and show: no GPUs.
  RunResult queue = d.Gpulane({"queue"});
  for (const auto& line : Lines(queue.out))
    if (Contains(line, fmt::format(" {} ", after))) {
      EXPECT_TRUE(Contains(line, " 0 ")) << line;
    }
  json shown = d.Show(free_step);
  EXPECT_EQ(shown["spec"]["request"]["count"], 0);
  EXPECT_TRUE(shown["gpu_uuids"].empty()) << shown.dump();
  Touch(gate);
  waited = d.Gpulane({"wait", Id(after)});
  EXPECT_EQ(waited.exit_code, 0) << waited.err;
  EXPECT_EQ(ReadFile(d.work() / "after.out"), "[] PCI_BUS_ID nolease");
}

TEST(CpuOnlyJobs, RunWithoutGpusNeedsNoDriverAndPickRefusesZero) {
  FakeMachine machine(IdleMachine(1));
  RunResult r = RunOn(machine, {"-g", "0", "--", "sh", "-c", "printf '[%s]' \"$CUDA_VISIBLE_DEVICES\""},
                      {{"GPULANE_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1"}});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "[]");
  EXPECT_TRUE(IsGpulaneError(RunGpulane({"pick", "-g", "0"}, RunEnv(machine)), 2, "-g 0: ask for at least 1 GPU"));
  EXPECT_TRUE(IsGpulaneError(RunOn(machine, {"-g", "0", "--mem", "1GiB", "--", "true"}), 2,
                             "a job with -g 0 takes no GPU"));
  TestDaemon d;
  EXPECT_TRUE(IsGpulaneError(d.Gpulane({"submit", "-g", "0", "--gpus", "0", "--", "true"}), 2, "a job with -g 0 takes no GPU"));
  EXPECT_TRUE(IsGpulaneError(d.Gpulane({"submit", "-g", "-1", "--", "true"}), 2, "-g -1"));
}

}  // namespace
}  // namespace gpulane::test
