// Retention of finished jobs (daemon.keep_finished, docs/config.md "Retention"), through the real
// binary: jobs.db no longer grows forever (issue 23, item 8: 59 MiB per submit-and-cancel cycle of a
// large array), and a job removed for its age is said to be no longer kept, never "no such job" as
// if it never was. The tests use a retention of 2 s and wait on the daemon forgetting the job
// (polled through the socket, with a deadline), never on a sleep.
#include <gtest/gtest.h>

#include <filesystem>
#include <fmt/format.h>

#include "support/daemon_fixture.h"
#include "support/text.h"

namespace gpulane::test {
namespace {

namespace fs = std::filesystem;

constexpr const char* kShortRetention = "[daemon]\nkeep_finished = \"2s\"\n";

std::string Id(std::int64_t id) { return std::to_string(id); }

// Whether the daemon has forgotten job `id` within `timeout_s` (State polled through the socket).
bool Forgotten(const TestDaemon& d, std::int64_t id, double timeout_s = 30) {
  return Eventually([&] { return d.State(id).empty(); }, timeout_s);
}

TEST(JobRetention, AFinishedJobOlderThanKeepFinishedIsPrunedAndShowSaysSo) {
  TestDaemon d({.config = kShortRetention});
  const std::int64_t id = d.Submit({"--", "sh", "-c", "echo kept output"});
  ASSERT_EQ(d.Gpulane({"wait", Id(id)}).exit_code, 0);
  const fs::path log = d.work() / fmt::format("gpulane-{}.out", id);
  ASSERT_EQ(ReadFile(log), "kept output\n");
  ASSERT_TRUE(Forgotten(d, id)) << "job " << id << " ended over 2 s ago and is still kept; log:\n" << d.Log();
  const std::string said = fmt::format("job {} is no longer kept: it ended more than 2 s ago", id);
  for (const char* op : {"show", "wait", "logs"}) {
    RunResult r = d.Gpulane({op, Id(id)});
    EXPECT_TRUE(IsGpulaneError(r, 8, said)) << op << ": exit " << r.exit_code << ": " << r.err;
    EXPECT_TRUE(Contains(r.err, "daemon.keep_finished")) << op << " names the setting: " << r.err;
  }
  // An id that was never a job is still "no job".
  RunResult never = d.Gpulane({"show", Id(id + 1000)});
  EXPECT_TRUE(IsGpulaneError(never, 8, fmt::format("no job {}", id + 1000))) << never.err;
  EXPECT_EQ(ReadFile(log), "kept output\n") << "the job's log is the user's file: left where it was";
  EXPECT_TRUE(Contains(d.Log(), "removed 1 finished job that ended more than 2 s ago (daemon.keep_finished)")) << d.Log();
}

TEST(JobRetention, UnfinishedJobsAndWhatTheyWaitForAreNeverPruned) {
  TestDaemon d({.config = kShortRetention});
  const std::int64_t first = d.Submit({"--", "true"});  // waited for by a held job
  ASSERT_EQ(d.Gpulane({"wait", Id(first)}).exit_code, 0);
  const std::int64_t held = d.Submit({"--hold", "--after", Id(first), "--", "true"});
  const std::int64_t other = d.Submit({"--", "true"});
  ASSERT_EQ(d.Gpulane({"wait", Id(other)}).exit_code, 0);
  // The positive event: a job that ended after `first` is pruned, so the daemon has pruned past it.
  ASSERT_TRUE(Forgotten(d, other)) << d.Log();
  EXPECT_EQ(d.State(first), "completed") << "a held job waits for it: kept";
  EXPECT_EQ(d.State(held), "held") << "an unfinished job is never pruned";
  ASSERT_EQ(d.Gpulane({"release", Id(held)}).exit_code, 0);
  RunResult waited = d.Gpulane({"wait", Id(held)});
  EXPECT_EQ(waited.exit_code, 0) << "its dependency is still known to have completed: " << waited.err;
  EXPECT_EQ(d.State(held), "completed");
  // Once nothing waits for it, it goes too.
  EXPECT_TRUE(Forgotten(d, first)) << d.Log();
}

TEST(JobRetention, APrunedArrayAndItsTasksAreSaidToBeNoLongerKept) {
  TestDaemon d({.config = kShortRetention});
  RunResult submitted = d.Gpulane({"submit", "--array", "0-4", "--", "true"});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.err;
  const std::int64_t array = std::stoll(submitted.out);
  ASSERT_EQ(d.Gpulane({"wait", Id(array)}).exit_code, 0);
  ASSERT_TRUE(Forgotten(d, array + 4)) << d.Log();
  ASSERT_TRUE(Forgotten(d, array)) << d.Log();
  RunResult whole = d.Gpulane({"show", Id(array)});
  EXPECT_TRUE(IsGpulaneError(whole, 8, fmt::format("job {} is no longer kept", array))) << whole.err;
  RunResult task = d.Gpulane({"show", fmt::format("{}_2", array)});
  EXPECT_TRUE(IsGpulaneError(task, 8, fmt::format("job {}_2 is no longer kept", array))) << task.err;
}

}  // namespace
}  // namespace gpulane::test
