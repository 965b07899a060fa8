// Issue 23, item 8: work is bounded per turn of the daemon's loop. A hostile tester's `cancel --user`
// of 300,000 held tasks froze the daemon 11.5 s for everyone. These run with tens of thousands of
// jobs (the 300,000 figure is bench/daemon_stalls.py's); the parts are the same. The cancel, hold
// and release of 40,000 tasks in parts (pings answered meanwhile, a kill mid-cancel) are tested
// in-process: tests/unit/daemon_inproc_bulk_test.cc. Here stays a restart that loads its jobs
// while it answers, with what `gpulane daemon status`, `queue` and `submit` print meanwhile.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "support/daemon_fixture.h"
#include "support/text.h"

namespace gpulane::test {
namespace {

using nlohmann::json;

constexpr int kTasksPerArray = 20000;
constexpr int kArrays = 2;
constexpr int kTasks = kTasksPerArray * kArrays;

// kTasks held tasks in kArrays arrays; the first array's id.
std::int64_t QueueHeldTasks(TestDaemon& d) {
  std::int64_t first = 0;
  for (int i = 0; i < kArrays; ++i) {
    RunResult r = d.Gpulane({"submit", "--hold", "--array", fmt::format("0-{}", kTasksPerArray - 1), "--", "true"}, {}, 300);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    if (i == 0) first = std::stoll(r.out);
  }
  return first;
}

// Pings a just restarted daemon until it has loaded its jobs (it answers meanwhile, and says how
// far it is); false when it never finishes.
bool WaitUntilLoaded(const TestDaemon& d) {
  for (int i = 0; i < 1000000; ++i)
    if (!d.Call({{"op", "ping"}}, 5).contains("loading")) return true;
  return false;
}

// A restart with 600,000 unfinished jobs answered nothing for 14 s, past the 5 s clients wait.
// Here 40,000, loaded 100 a part, none before the daemon listens: it answers pings at once and
// says how far it is, refuses the queue (and submissions) as "still loading" rather than showing
// part of it, and then lists every job, none lost.
TEST(DaemonStalls, ARestartWithManyUnfinishedJobsAnswersWhileItLoads) {
  DaemonOptions options;
  options.daemon_env = {{"GPULANE_DAEMON_LOAD_BEFORE_LISTEN", "0"}, {"GPULANE_DAEMON_LOAD_PART_ROWS", "100"}};
  TestDaemon d(options);
  const std::int64_t first = QueueHeldTasks(d);
  d.Kill9();
  ASSERT_TRUE(d.Start());  // a ping answered
  json pong = d.Call({{"op", "ping"}}, 5);
  ASSERT_TRUE(pong.contains("loading")) << "answered before all jobs were loaded: " << pong.dump();
  EXPECT_LT(pong["loading"].value("loaded", 0), kTasks);
  EXPECT_EQ(pong["loading"].value("total", 0), kTasks);

  RunResult status = d.Gpulane({"daemon", "status"});
  EXPECT_EQ(status.exit_code, 0) << status.err;
  EXPECT_TRUE(Contains(status.out, fmt::format(" of {} read", kTasks))) << status.out;
  RunResult queue = d.Gpulane({"queue"});
  if (queue.exit_code == 0) {  // done loading already (a fast machine): then all of it
    EXPECT_EQ(LineCount(queue.out), 1 + kTasks) << "a queue shown is complete";
  } else {
    EXPECT_EQ(queue.exit_code, 10) << queue.err;
    EXPECT_TRUE(Contains(queue.err, "still loading its jobs")) << queue.err;
    EXPECT_EQ(queue.out, "") << "no partial queue shown as if complete";
  }
  RunResult submit = d.Gpulane({"submit", "--hold", "--", "true"});
  if (submit.exit_code != 0) {
    EXPECT_EQ(submit.exit_code, 10) << submit.err;
    EXPECT_TRUE(Contains(submit.err, "try again in a few seconds")) << submit.err;
  }

  // Pings keep being answered until it is done; then the whole queue is there.
  ASSERT_TRUE(WaitUntilLoaded(d));
  const std::size_t submitted_meanwhile = submit.exit_code == 0 ? 1 : 0;
  EXPECT_EQ(d.Queue().size(), kTasks + submitted_meanwhile);
  EXPECT_EQ(d.State(first + kTasks - 1), "held");
  // And it runs jobs again.
  const std::int64_t id = d.Submit({"--", "true"});
  EXPECT_EQ(d.Gpulane({"wait", std::to_string(id)}).exit_code, 0);
}

}  // namespace
}  // namespace gpulane::test
