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
  EXPECT_EQ(unknown.value("code", ""), "invalid_argument") << unknown.dump();
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

// Was DaemonArrayIds.ArrayIndicesMustBeDistinct (what `submit --array` refuses and prints stays in
// DaemonSubmit): the daemon refuses an index given twice; a stepped array's tasks are named by
// their own indices.
TEST_F(DaemonInProcCommands, ArrayIndicesMustBeDistinct) {
  json twice = SubmitRequest({.hold = true});
  twice["array"] = {1, 1};
  json reply = Call(Root(), twice);
  EXPECT_EQ(reply.value("code", ""), "invalid_argument") << reply.dump();
  EXPECT_EQ(Queue(Root(), {{"all", true}}).size(), 0u);
  const Ids tasks = Submit(Root(), {.hold = true, .array = {1, 3, 5}});
  ASSERT_EQ(tasks.size(), 3u);
  const std::int64_t a = tasks[0];
  EXPECT_EQ(tasks, (Ids{a, a + 1, a + 2})) << "consecutive job ids";
  EXPECT_EQ(ShowJob(a + 1)["id_text"], fmt::format("{}_3", a));
  EXPECT_EQ(ShowJob(a + 1)["array_index"], 3);
}

// Was DaemonArrayIds.LogsOfAWholeArrayAsksForOneTask (its exit code 2 stays in DaemonExitCodes):
// logs prints one job's output, so the array's id is refused with the way to name a task; a task
// is named in the notation or by its own number.
TEST_F(DaemonInProcCommands, LogsOfAWholeArrayAsksForOneTask) {
  const Ids tasks = Submit(Root(), {.array = {0, 1, 2}});
  ASSERT_EQ(tasks.size(), 3u);
  for (std::int64_t id : tasks) RunToEnd(id, 0);
  const std::int64_t a = tasks[0];
  json refused = Call(Root(), {{"op", "logs"}, {"id", a}});
  EXPECT_EQ(refused.value("code", ""), "invalid_argument") << refused.dump();
  EXPECT_NE(refused.value("error", "").find(fmt::format("job {0} is an array of 3 tasks ({0}_0 to {0}_2) and logs prints one "
                                                        "job's output: name a task, e.g. gpulane logs {0}_0",
                                                        a)),
            std::string::npos)
      << refused.dump();
  // The task is found either way (the harness's supervisor records no log file: its answer is that
  // the task has none, naming it in the notation).
  json by_notation = Call(Root(), {{"op", "logs"}, {"id", fmt::format("{}_2", a)}});
  EXPECT_TRUE(by_notation.value("ok", false) || Contains(by_notation.value("error", ""), fmt::format("job {}_2 has no output", a)))
      << by_notation.dump();
  json by_number = Call(Root(), {{"op", "logs"}, {"id", a + 2}});
  EXPECT_EQ(by_notation, by_number) << "a task's own number still works";
}

// Was DaemonArrayIds.QueueShowAndJsonNameTasksInTheNotation (how `gpulane show` prints them stays in
// DaemonArrayIds.TasksAreHeldReleasedCancelledAndWaitedForByTheirIds): the queue's table names
// tasks 12_3 with the name alone in its column, its JSON keeps the numeric id beside id_text; show
// takes a task in the notation or by its own number, an array's id for every task, brackets for
// some.
TEST_F(DaemonInProcCommands, QueueShowAndJsonNameTasksInTheNotation) {
  const Ids tasks = Submit(Root(), {.name = "eval", .hold = true, .array = {0, 1, 2, 3}});
  ASSERT_EQ(tasks.size(), 4u);
  const std::int64_t a = tasks[0];
  const std::string table = Call(Root(), {{"op", "queue"}, {"format", "table"}}).value("table", "");
  auto line_of = [&](const std::string& id) {
    std::string found;
    for (std::size_t at = 0, end; at < table.size(); at = end + 1) {
      end = table.find('\n', at);
      if (end == std::string::npos) end = table.size();
      const std::string l = table.substr(at, end - at);
      const std::size_t start = l.find_first_not_of(' ');
      if (start != std::string::npos && l.compare(start, id.size() + 1, id + " ") == 0) found = l;
    }
    return found;
  };
  for (int i = 0; i < 4; ++i) {
    const std::string line = line_of(fmt::format("{}_{}", a, i));
    EXPECT_NE(line.find(" eval "), std::string::npos) << table;
    EXPECT_NE(line.find(" held "), std::string::npos) << table;
    EXPECT_EQ(line.find('['), std::string::npos) << "the name column holds the name alone: " << line;
  }
  EXPECT_EQ(line_of(std::to_string(a)), "") << "the array's id is not one task's: " << table;
  json jobs = Queue(Root());
  ASSERT_EQ(jobs.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(jobs[i]["id"], a + i);
    EXPECT_EQ(jobs[i]["id_text"], fmt::format("{}_{}", a, i));
  }
  json task = Call(Root(), {{"op", "show"}, {"id", fmt::format("{}_2", a)}})["job"];
  EXPECT_EQ(task["id"], a + 2);
  EXPECT_EQ(task["id_text"], fmt::format("{}_2", a));
  EXPECT_EQ(task["array_index"], 2);
  EXPECT_EQ(ShowJob(a + 2)["id_text"], fmt::format("{}_2", a)) << "a task's own number still names it";
  json all = Call(Root(), {{"op", "show"}, {"id", a}});
  EXPECT_FALSE(all.contains("job")) << all.dump();
  EXPECT_EQ(all["jobs"].size(), 4u);
  json some = Call(Root(), {{"op", "show"}, {"id", fmt::format("{}_[1,3]", a)}});
  ASSERT_EQ(some["jobs"].size(), 2u) << some.dump();
  EXPECT_EQ(some["jobs"][1]["id_text"], fmt::format("{}_3", a));
}

}  // namespace
}  // namespace gpulane::test
