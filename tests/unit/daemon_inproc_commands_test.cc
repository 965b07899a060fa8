// The daemon's answers to queue, cancel by name or user, and job ids in Slurm's notation over the
// protocol, in-process (tests/support/inproc_daemon.h): which jobs a request selects and what the
// reply says of them. The same commands through the binary, what they print and how they exit,
// stay in tests/integration/daemon_commands_test.cc and daemon_array_ids_test.cc.
#include <gtest/gtest.h>

#include <algorithm>

#include <fmt/format.h>

#include "support/inproc_daemon.h"

namespace gpulane::test {
namespace {

using nlohmann::json;
using Ids = std::vector<std::int64_t>;

class DaemonInProcCommands : public InProcDaemonTest {
 protected:
  void SetUp() override {
    InProcDaemonTest::SetUp();
    StartDaemon();
  }
};

// Was DaemonQueue.JsonUserAndAll (through the binary): the queue lists unfinished jobs, --all the
// finished ones too, --user one user's; never an environment.
TEST_F(DaemonInProcCommands, QueueListsUnfinishedJobsAllAddsFinishedOnesUserSelectsOnesOwn) {
  const std::int64_t done = SubmitOne();
  RunToEnd(done, 2);
  const std::int64_t held = SubmitOne({.name = "held-one", .hold = true});
  json q = Queue(Root());
  ASSERT_EQ(q.size(), 1u) << q.dump();
  EXPECT_EQ(q[0]["id"], held);
  EXPECT_EQ(q[0]["state"], "held");
  EXPECT_EQ(q[0]["user"], "root");
  EXPECT_EQ(q[0]["uid"], 0);
  EXPECT_EQ(q[0]["spec"]["name"], "held-one");
  EXPECT_EQ(q[0]["spec"]["argv"], json::array({"true"}));
  EXPECT_FALSE(q[0]["spec"].contains("env")) << "the queue never shows environments";
  json all = Queue(Root(), {{"all", true}});
  ASSERT_EQ(all.size(), 2u) << all.dump();
  EXPECT_EQ(all[0]["id"], done);
  EXPECT_EQ(all[0]["state"], "failed");
  EXPECT_EQ(all[0]["exit_code"], 2);
  EXPECT_EQ(Queue(Root(), {{"user", "root"}}).size(), 1u);
  EXPECT_EQ(Queue(Root(), {{"all", true}, {"user", "root"}}).size(), 2u);
  EXPECT_EQ(Queue(Root(), {{"user", "nobody"}}).size(), 0u);
  json unknown = Call(Root(), {{"op", "queue"}, {"user", "no-such-user-gl"}});
  EXPECT_EQ(unknown.value("code", ""), "not_found") << unknown.dump();
  EXPECT_NE(unknown.value("error", "").find("no-such-user-gl"), std::string::npos) << unknown.dump();
}

// Was DaemonQueue.RunningJobShowsItsGpu: the queue's table names the GPU a running job's supervisor
// reported, by its index.
TEST_F(DaemonInProcCommands, RunningJobShowsItsGpu) {
  const std::int64_t job = SubmitOne();
  Running(job, {IdleSnapshot(2).devices[1].uuid});
  Turn();
  const std::string table = Call(Root(), {{"op", "queue"}, {"format", "table"}}).value("table", "");
  std::string line;
  for (std::size_t at = 0, end; at < table.size(); at = end + 1) {
    end = table.find('\n', at);
    if (end == std::string::npos) end = table.size();
    const std::string l = table.substr(at, end - at);
    if (l.find(std::to_string(job) + " ") != std::string::npos) line = l;
  }
  EXPECT_NE(line.find("GPU1"), std::string::npos) << table;
  EXPECT_NE(line.find(" running "), std::string::npos) << table;
}

// Was Config.ASubmissionWithoutAKillGraceGetsTheDaemonsValue: a request without a kill grace (another
// client) gets the daemon's own run.kill_grace; a negative one is refused.
TEST_F(DaemonInProcCommands, ASubmissionWithoutAKillGraceGetsTheDaemonsValue) {
  daemon_->Stop();
  daemon_.reset();
  config_.kill_grace_s = 2.5;
  StartDaemon();
  json request = SubmitRequest({.hold = true});
  request["spec"].erase("kill_grace_s");
  json reply = Call(Root(), request);
  ASSERT_TRUE(reply.value("ok", false)) << reply.dump();
  EXPECT_EQ(ShowJob(reply["ids"][0].get<std::int64_t>())["spec"]["kill_grace_s"], 2.5);
  request["spec"]["kill_grace_s"] = -1;
  EXPECT_FALSE(Call(Root(), request).value("ok", true)) << "a negative grace is refused";
}

// Was DaemonCancel.ByNameAndByUser: --name cancels every unfinished job of that name and no other,
// --user every job of that user, the reply naming each in order.
TEST_F(DaemonInProcCommands, CancelByNameAndByUserTakesEveryMatchingJobAndNoOther) {
  const std::int64_t a1 = SubmitOne({.name = "alpha", .hold = true});
  const std::int64_t b = SubmitOne({.name = "beta", .hold = true});
  const std::int64_t a2 = SubmitOne({.name = "alpha", .hold = true});
  json by_name = Call(Root(), {{"op", "cancel"}, {"ids", json::array()}, {"name", "alpha"}});
  EXPECT_TRUE(by_name.value("ok", false)) << by_name.dump();
  EXPECT_EQ(by_name["cancelled"], (Ids{a1, a2})) << by_name.dump();
  EXPECT_EQ(State(a1), "cancelled");
  EXPECT_EQ(State(a2), "cancelled");
  EXPECT_EQ(State(b), "held");
  const std::int64_t c = SubmitOne({.name = "gamma", .hold = true});
  json by_user = Call(Root(), {{"op", "cancel"}, {"ids", json::array()}, {"user", "root"}});
  EXPECT_TRUE(by_user.value("ok", false)) << by_user.dump();
  EXPECT_EQ(by_user["cancelled"], (Ids{b, c})) << by_user.dump();
  EXPECT_EQ(Queue(Root()).size(), 0u);
}

// Was DaemonCancel.ACancelOfTwoThousandTasksLogsALineAPartNotAJob: a cancel wrote one line per job
// to the daemon's log (300,000 lines for `cancel --user` of 300,000 tasks). A cancel of many jobs
// logs one line a part of up to 1,000 (who, how many, whose, which ids as ranges); one job's
// cancel still logs its own line.
TEST_F(DaemonInProcCommands, ACancelOfTwoThousandTasksLogsALineAPartNotAJob) {
  std::vector<int> indices(2000);
  for (int i = 0; i < 2000; ++i) indices[static_cast<std::size_t>(i)] = i;
  const Ids tasks = Submit(Root(), {.hold = true, .array = indices});
  ASSERT_EQ(tasks.size(), 2000u);
  const std::int64_t array = tasks[0];
  const std::int64_t single = SubmitOne({.hold = true});
  CaptureLog();
  json reply = Control(Root(), "cancel", {array});
  EXPECT_TRUE(reply.value("ok", false)) << reply.dump().substr(0, 300);
  EXPECT_EQ(reply["cancelled"].size(), 2000u);
  const std::string added = Logged();
  EXPECT_LE(std::count(added.begin(), added.end(), '\n'), 4) << added.substr(0, 4000);
  EXPECT_NE(added.find(fmt::format("cancelled by root: 1000 jobs of root: {}-{}\n", array, array + 999)), std::string::npos)
      << added.substr(0, 4000);
  EXPECT_NE(added.find(fmt::format("cancelled by root: 1000 jobs of root: {}-{}\n", array + 1000, array + 1999)),
            std::string::npos)
      << added.substr(0, 4000);
  EXPECT_EQ(State(array + 1999), "cancelled");
  ASSERT_TRUE(Control(Root(), "cancel", {single}).value("ok", false));
  const std::string one = Logged();
  EXPECT_NE(one.find(fmt::format("job {} (root) cancelled: cancelled by root\n", single)), std::string::npos) << one;
}

// Was DaemonArrayIds.ProtocolTakesIdsAsNumbersOrStrings.
TEST_F(DaemonInProcCommands, ProtocolTakesIdsAsNumbersOrStrings) {
  const Ids tasks = Submit(Root(), {.hold = true, .array = {0, 1, 2}});
  ASSERT_EQ(tasks.size(), 3u);
  const std::int64_t a = tasks[0];
  json shown = Call(Root(), {{"op", "show"}, {"id", fmt::format("{}_1", a)}});
  ASSERT_TRUE(shown.value("ok", false)) << shown.dump();
  EXPECT_EQ(shown["job"]["id"], a + 1);
  EXPECT_EQ(shown["jobs"].size(), 1u);
  json array = Call(Root(), {{"op", "show"}, {"id", a}});
  EXPECT_FALSE(array.contains("job")) << "an array's id names all its tasks: " << array.dump();
  EXPECT_EQ(array["jobs"].size(), 3u);
  json released = Call(Root(), {{"op", "release"}, {"ids", {fmt::format("{}_0", a), a + 2}}});
  ASSERT_TRUE(released.value("ok", false)) << released.dump();
  EXPECT_EQ(released["changed"], json::array({a, a + 2}));
  EXPECT_EQ(released["changed_text"], json::array({fmt::format("{}_0", a), fmt::format("{}_2", a)}));
  // Some ids fail: the others are acted on, "failed" says which and why.
  json cancelled = Call(Root(), {{"op", "cancel"}, {"ids", {"999", fmt::format("{}_1", a)}}});
  ASSERT_TRUE(cancelled.value("ok", false)) << cancelled.dump();
  EXPECT_EQ(cancelled["cancelled_text"], json::array({fmt::format("{}_1", a)}));
  ASSERT_EQ(cancelled["failed"].size(), 1u) << cancelled.dump();
  EXPECT_EQ(cancelled["failed"][0]["id"], "999");
  EXPECT_EQ(cancelled["failed"][0]["code"], "not_found");
  EXPECT_EQ(cancelled["failed"][0]["error"], "no job 999");
  // A spec's dependencies: numbers, or strings in the notation, stored as numbers and "12_3".
  json dependent = SubmitRequest({.hold = true});
  dependent["spec"]["after_ok"] = {std::to_string(a), fmt::format("{}_[0,2]", a)};
  dependent["spec"]["after_any"] = {a + 1};
  json submitted = Call(Root(), dependent);
  ASSERT_TRUE(submitted.value("ok", false)) << submitted.dump();
  json spec = ShowJob(submitted["ids"][0].get<std::int64_t>())["spec"];
  EXPECT_EQ(spec["after_ok"], json({a, fmt::format("{}_0", a), fmt::format("{}_2", a)}));
  EXPECT_EQ(spec["after_any"], json({a + 1}));
  dependent["spec"]["after_ok"] = {fmt::format("{}_9", a)};
  EXPECT_EQ(Call(Root(), dependent).value("code", ""), "not_found");
  dependent["spec"]["after_ok"] = {"9_"};
  EXPECT_EQ(Call(Root(), dependent).value("code", ""), "invalid_argument");
  // Nothing done: an error reply with the first failure's code, and every failure.
  json none = Call(Root(), {{"op", "hold"}, {"ids", {"998", fmt::format("{}_1", a)}}});
  EXPECT_FALSE(none.value("ok", true));
  EXPECT_EQ(none.value("code", ""), "not_found");
  EXPECT_EQ(none["failed"].size(), 2u) << none.dump();
  EXPECT_EQ(none["failed"][1]["code"], "wrong_state");
}

}  // namespace
}  // namespace gpulane::test
