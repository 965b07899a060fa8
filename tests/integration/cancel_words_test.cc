// What `gpulane cancel` prints for a job that waits for GPUs under its supervisor (shown `waiting`):
// it never started, so nothing of it was signalled (a new user's finding: it said "SIGTERM sent").
// The daemon's reply: DaemonInProcCancelWords.
#include <gtest/gtest.h>

#include <string>

#include "support/daemon_fixture.h"
#include "support/harness.h"
#include "support/text.h"

namespace gpulane::test {
namespace {

TEST(DaemonCancelWords, CancellingAJobWaitingForGpusSaysItNeverStarted) {
  TestDaemon d({.state = IdleGpus(1)});
  const std::filesystem::path log = d.work() / "marks.log", gate = d.work() / "gate";
  const std::int64_t blocker = d.Submit(MarkedJob(log.string(), gate.string()));
  ASSERT_TRUE(d.WaitForState(blocker, "running"));
  const std::int64_t waiting = d.Submit({"--", "true"});
  ASSERT_TRUE(d.WaitForReason(waiting, "in line")) << d.Show(waiting).dump();
  RunResult r = d.Gpulane({"cancel", std::to_string(waiting)});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "cancelled job " + std::to_string(waiting) +
                       " before it started (it was waiting for GPUs; its command never ran)\n");
  EXPECT_EQ(d.Gpulane({"wait", std::to_string(waiting)}).exit_code, 11) << "cancelled before it ran";
  Touch(gate);
  EXPECT_EQ(d.Gpulane({"wait", std::to_string(blocker)}).exit_code, 0);
}

}  // namespace
}  // namespace gpulane::test
