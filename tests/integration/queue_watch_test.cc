// `gpulane queue --watch`: the queue's table redrawn until Ctrl-C, following the jobs' changes (a
// new user had to run `watch gpulane queue`, or the command again and again).
#include <signal.h>

#include <gtest/gtest.h>

#include "support/daemon_fixture.h"
#include "support/text.h"

namespace gpulane::test {
namespace {

TEST(QueueWatch, TheTableFollowsTheJobsUntilInterrupted) {
  TestDaemon d;
  const std::int64_t id = d.Submit({"--hold", "--name", "watched", "--", "true"});
  ASSERT_GT(id, 0);
  Child watch = d.StartGpulane({"queue", "--watch", "0.2"});
  ASSERT_TRUE(Eventually([&] { return Contains(watch.OutSoFar(), "watched"); })) << watch.ErrSoFar();
  EXPECT_TRUE(Contains(watch.OutSoFar(), "held")) << watch.OutSoFar();
  ASSERT_EQ(d.Gpulane({"release", std::to_string(id)}).exit_code, 0);
  ASSERT_TRUE(d.WaitForState(id, "completed"));
  // A later frame without the job (queue lists unfinished jobs): the table's header alone.
  EXPECT_TRUE(Eventually([&] {
    const std::string out = watch.OutSoFar();
    const std::size_t last = out.rfind("  ID  USER");
    return last != std::string::npos && !Contains(out.substr(last), "watched");
  })) << watch.OutSoFar();
  watch.Kill(SIGINT);
  auto r = watch.Wait(10);
  ASSERT_TRUE(r) << "still running after SIGINT";
  EXPECT_EQ(r->exit_code, 0) << r->err;
  EXPECT_TRUE(r->err.empty()) << r->err;
  EXPECT_FALSE(Contains(r->out, "\x1b[")) << "not a terminal: no redraw codes";
}

TEST(QueueWatch, AnIntervalThatIsNotANumberIsAUsageError) {
  TestDaemon d;
  for (const char* bad : {"soon", "0.01"}) {
    RunResult r = d.Gpulane({"queue", "--watch", bad});
    EXPECT_EQ(r.exit_code, 2) << bad;
    EXPECT_TRUE(r.out.empty()) << r.out;
    EXPECT_EQ(LineCount(r.err), 1) << r.err;
    EXPECT_TRUE(Contains(r.err, bad)) << r.err;
  }
}

}  // namespace
}  // namespace gpulane::test
