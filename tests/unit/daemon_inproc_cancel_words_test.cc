// What a cancel tells a user, in-process (tests/support/inproc_daemon.h; a new user's "truth on
// the user's path" finding): a cancelled job that was waiting for GPUs is named as cancelled before
// it started, not as signalled. `gpulane cancel`'s line: DaemonCancelWords (integration).
#include <gtest/gtest.h>

#include "support/inproc_daemon.h"
#include "support/text.h"

namespace gpulane::test {
namespace {

using nlohmann::json;

class DaemonInProcCancelWords : public InProcDaemonTest {};

// A job whose supervisor waits in line for the GPU (launching, shown `waiting`) has not started:
// cancelling it says so (before_start_text: `gpulane cancel` prints "cancelled job N before it
// started"), not that a job was sent SIGTERM; a running job's cancel still says it was signalled.
TEST_F(DaemonInProcCancelWords, CancellingAWaitingJobSaysItNeverStarted) {
  gpu_count_ = 1;
  StartDaemon();
  const std::int64_t running = SubmitOne({.name = "true"});
  Running(running);
  Turn();
  ASSERT_EQ(State(running), "running");
  const std::int64_t waiting = SubmitOne({.name = "true"});
  Waiting(waiting, "in line for GPU0 (#1)");
  Turn();
  ASSERT_EQ(State(waiting), "launching");

  const json before = Control(Root(), "cancel", {waiting});
  ASSERT_TRUE(before.value("ok", false)) << before.dump();
  EXPECT_EQ(before["cancelled_text"], json::array({std::to_string(waiting)})) << before.dump();
  EXPECT_EQ(before["before_start_text"], json::array({std::to_string(waiting)})) << before.dump();
  EXPECT_EQ(before["in_progress_text"], json::array()) << "nothing of the job ran to be signalled: " << before.dump();

  const json stopped = Control(Root(), "cancel", {running});
  ASSERT_TRUE(stopped.value("ok", false)) << stopped.dump();
  EXPECT_EQ(stopped["in_progress_text"], json::array({std::to_string(running)})) << stopped.dump();
  EXPECT_EQ(stopped["before_start_text"], json::array()) << "a running job is signalled: " << stopped.dump();
}

}  // namespace
}  // namespace gpulane::test
