// Retention of finished jobs (daemon.keep_finished, docs/config.md "Retention") in-process
// (tests/support/inproc_daemon.h): the FakeClock is moved past the setting, so no test waits for
// it. A job removed for its age is said to be no longer kept, never "no such job" as if it never
// was; an unfinished job and a finished one that an unfinished job waits for are never removed.
// Were tests/integration/job_retention_test.cc, through the binary with a 2 s retention.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "support/inproc_daemon.h"
#include "support/text.h"

namespace gpulane::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Ids = std::vector<std::int64_t>;

class DaemonInProcRetention : public InProcDaemonTest {
 protected:
  void SetUp() override {
    InProcDaemonTest::SetUp();
    config_.daemon_keep_finished_s = 2;
    StartDaemon();
  }
  // Whether the daemon forgets job `id` (show refuses it) within `max_s` seconds of the FakeClock,
  // moved a second at a time with the loop turned after each.
  bool Forgotten(std::int64_t id, int max_s = 60) {
    for (int s = 0; s <= max_s; ++s) {
      if (State(id).empty()) return true;
      clock_.Advance(1);
      Turn();
    }
    return false;
  }
};

TEST_F(DaemonInProcRetention, AFinishedJobOlderThanKeepFinishedIsPrunedAndShowSaysSo) {
  CaptureLog();
  const std::int64_t id = SubmitOne();
  const fs::path log = dir_ / fmt::format("gpulane-{}.out", id);  // where its output would be
  std::ofstream(log) << "kept output\n";
  RunToEnd(id, 0);
  ASSERT_EQ(State(id), "completed");
  ASSERT_TRUE(Forgotten(id)) << "job " << id << " ended over 2 s ago and is still kept";
  const std::string said = fmt::format("job {} is no longer kept: it ended more than 2 s ago", id);
  for (const json& request : {json{{"op", "show"}, {"id", id}}, json{{"op", "wait"}, {"ids", {id}}, {"check", true}},
                              json{{"op", "logs"}, {"id", id}}}) {
    json reply = Call(Root(), request);
    EXPECT_FALSE(reply.value("ok", true)) << reply.dump();
    EXPECT_EQ(reply.value("code", ""), "not_found") << reply.dump();
    EXPECT_TRUE(Contains(reply.dump(), said)) << reply.dump();
    EXPECT_TRUE(Contains(reply.dump(), "daemon.keep_finished")) << "names the setting: " << reply.dump();
  }
  // An id that was never a job is still "no job".
  json never = Call(Root(), {{"op", "show"}, {"id", id + 1000}});
  EXPECT_EQ(never.value("error", ""), fmt::format("no job {}", id + 1000)) << never.dump();
  EXPECT_TRUE(fs::exists(log)) << "the job's log is the user's file: left where it was";
  EXPECT_TRUE(Contains(Logged(), "removed 1 finished job that ended more than 2 s ago (daemon.keep_finished)"));
}

TEST_F(DaemonInProcRetention, UnfinishedJobsAndWhatTheyWaitForAreNeverPruned) {
  const std::int64_t first = SubmitOne();  // waited for by a held job
  RunToEnd(first, 0);
  const std::int64_t held = SubmitOne({.hold = true, .after_ok = {first}});
  const std::int64_t other = SubmitOne();
  RunToEnd(other, 0);
  // The positive event: a job that ended after `first` is pruned, so the daemon has pruned past it.
  ASSERT_TRUE(Forgotten(other));
  EXPECT_EQ(State(first), "completed") << "a held job waits for it: kept";
  EXPECT_EQ(State(held), "held") << "an unfinished job is never pruned";
  ASSERT_TRUE(Control(Root(), "release", {held}).value("ok", false));
  EXPECT_EQ(Launched(), (Ids{first, other, held})) << "its dependency is still known to have completed";
  RunToEnd(held, 0);
  EXPECT_EQ(State(held), "completed");
  // Once nothing waits for it, it goes too.
  EXPECT_TRUE(Forgotten(first));
}

TEST_F(DaemonInProcRetention, APrunedArrayAndItsTasksAreSaidToBeNoLongerKept) {
  const Ids tasks = Submit(Root(), {.array = {0, 1, 2, 3, 4}});
  ASSERT_EQ(tasks.size(), 5u);
  const std::int64_t array = tasks[0];
  for (std::size_t ended = 0; ended < Launched().size(); ++ended) RunToEnd(Launched()[ended], 0);
  for (std::size_t i = 1; i < tasks.size(); ++i) ASSERT_EQ(State(tasks[i]), "completed") << i;
  ASSERT_EQ(Call(Root(), {{"op", "show"}, {"id", fmt::format("{}_0", array)}})["job"]["state"], "completed");
  ASSERT_TRUE(Forgotten(array + 4));
  // The array's id names all its tasks (show answers with "jobs"): forgotten once show refuses it.
  for (int s = 0; s < 60 && Call(Root(), {{"op", "show"}, {"id", array}}).value("ok", false); ++s) {
    clock_.Advance(1);
    Turn();
  }
  json whole = Call(Root(), {{"op", "show"}, {"id", array}});
  EXPECT_TRUE(Contains(whole.value("error", ""), fmt::format("job {} is no longer kept", array))) << whole.dump();
  json task = Call(Root(), {{"op", "show"}, {"id", fmt::format("{}_2", array)}});
  EXPECT_TRUE(Contains(task.value("error", ""), fmt::format("job {}_2 is no longer kept", array))) << task.dump();
}

}  // namespace
}  // namespace gpulane::test
