// Queued jobs on a machine without the NVIDIA driver (libnvidia-ml.so.1 cannot be loaded): the
// per-user daemon cannot start, and `submit` said "no gpulane daemon answers ... (exit 10)" where
// the exit-code table (docs/exit-codes.md) has 3 for "no NVIDIA driver". `submit`, `queue` and
// `run` agree: the problem and its fix, with the table's code.
#include <gtest/gtest.h>

#include "support/daemon_fixture.h"
#include "support/harness.h"
#include "support/text.h"

namespace gpulane::test {
namespace {

TEST(NoDriverSubmit, SubmitSaysTheDaemonNeedsTheDriverAndExitsThree) {
  FakeMachine machine(IdleGpus(2));
  Env env = machine.env();
  env["GPULANE_NVML_LIBRARY"] = (machine.dir() / "nowhere" / "libnvidia-ml.so.1").string();
  for (const std::vector<std::string>& args : {std::vector<std::string>{"submit", "--", "true"},
                                               std::vector<std::string>{"submit", "-g", "0", "--", "true"}}) {
    RunResult submit = RunGpulane(args, env);
    EXPECT_TRUE(IsGpulaneError(submit, 3, "the gpulane daemon cannot start: NVIDIA driver not found")) << args[1];
    EXPECT_TRUE(Contains(submit.err, "install the NVIDIA driver, or set GPULANE_NVML_LIBRARY")) << submit.err;
  }
  // `run` reads the GPUs itself: the same problem, the same code.
  RunResult run = RunGpulane({"run", "--", "true"}, env);
  EXPECT_TRUE(IsGpulaneError(run, 3, "NVIDIA driver not found"));
  // `queue` with no jobs needs no daemon: nothing is queued, and it says so (an empty table).
  RunResult queue = RunGpulane({"queue"}, env);
  EXPECT_EQ(queue.exit_code, 0) << queue.err;
  EXPECT_TRUE(Contains(queue.out, "WHERE / WHY")) << queue.out;
}

}  // namespace
}  // namespace gpulane::test
