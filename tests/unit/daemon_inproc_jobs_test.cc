// The daemon's job handling in-process (tests/support/inproc_daemon.h): a submission is stored
// before it is acknowledged, a supervisor's reports move its job, cancel, hold and release,
// dependencies and arrays, each checked as a user would: what `show` says and what was started.
#include <gtest/gtest.h>

#include "daemon/job_files.h"
#include "store/job.h"
#include "support/inproc_daemon.h"

namespace gpulane::test {
namespace {

using nlohmann::json;
using Ids = std::vector<std::int64_t>;

class DaemonInProc : public InProcDaemonTest {
 protected:
  void SetUp() override {
    InProcDaemonTest::SetUp();
    StartDaemon();
  }
};

TEST_F(DaemonInProc, AnAcknowledgedSubmissionIsStoredBeforeItsReply) {
  const std::int64_t id = SubmitOne();
  ASSERT_GT(id, 0);
  // The row is in jobs.db when the client has its id, read through another connection to the file.
  const std::string stored = StoredState(id);
  EXPECT_TRUE(stored == "pending" || stored == "launching") << stored;
  // And a daemon killed right after the reply has it when it starts again.
  Crash();
  StartDaemon();
  EXPECT_NE(State(id), "");
}

TEST_F(DaemonInProc, ASupervisorsReportsTakeTheJobFromLaunchingToCompleted) {
  const std::int64_t id = SubmitOne();
  EXPECT_EQ(Launched(), Ids{id}) << "one supervisor started for it";
  EXPECT_EQ(State(id), "launching");
  Running(id);
  Turn();
  EXPECT_EQ(State(id), "running");
  EXPECT_EQ(StoredState(id), "running");
  Done(id, 3);
  Turn();
  json job = ShowJob(id);
  EXPECT_EQ(job["state"], "failed");
  EXPECT_EQ(job["exit_code"], 3);
  EXPECT_EQ(StoredState(id), "failed");
  EXPECT_EQ(Launched(), Ids{id}) << "never started twice";
}

// The submission time is stamped once, by the daemon's clock (a client's claim is not taken), and
// is one value wherever the job goes: show's submit_time and its request's submit_time_s, the
// store (after a restart), and the spec file its supervisor reads.
TEST_F(DaemonInProc, TheSubmissionTimeIsTheDaemonsOneStamp) {
  clock_.Advance(12.375);
  const double stamped_s = clock_.WallS();
  json request = SubmitRequest({});
  request["spec"]["request"]["submit_time_s"] = 5.0;  // what a client might claim
  json reply = Call(Root(), request);
  ASSERT_TRUE(reply.value("ok", false)) << reply.dump();
  const std::int64_t id = reply["ids"][0].get<std::int64_t>();
  clock_.Advance(100);
  for (int life = 0; life < 2; ++life) {
    json job = ShowJob(id);
    EXPECT_EQ(job["submit_time"], stamped_s) << job.dump();
    EXPECT_EQ(job["spec"]["request"]["submit_time_s"], stamped_s) << job.dump();
    Restart();  // the second time round, from the store
  }
  ASSERT_EQ(Launched().front(), id);
  auto spec = daemon::JobFiles(files_, paths_.state_dir + "/jobs", id).ReadSpec();
  ASSERT_TRUE(spec) << spec.error().message;
  EXPECT_EQ(spec->submit_time_s(), stamped_s);
}

// ---- cancel -----------------------------------------------------------------------------------

TEST_F(DaemonInProc, ACancelledPendingJobNeverStarts) {
  const std::int64_t parent = SubmitOne();
  const std::int64_t id = SubmitOne({.after_ok = {parent}});
  EXPECT_EQ(State(id), "pending");
  json reply = Control(Root(), "cancel", {id});
  EXPECT_TRUE(reply.value("ok", false)) << reply.dump();
  EXPECT_EQ(State(id), "cancelled");
  EXPECT_EQ(StoredState(id), "cancelled");
  RunToEnd(parent, 0);  // what it waited for is done: it would start now
  EXPECT_EQ(Launched(), Ids{parent});
  EXPECT_FALSE(Control(Root(), "release", {id}).value("ok", false)) << "a cancelled job stays cancelled";
  EXPECT_FALSE(Control(Root(), "cancel", {id}).value("ok", false)) << "already ended";
  EXPECT_EQ(Launched(), Ids{parent});
}

TEST_F(DaemonInProc, ACancelledHeldJobNeverStarts) {
  const std::int64_t id = SubmitOne({.hold = true});
  EXPECT_EQ(State(id), "held");
  EXPECT_TRUE(Control(Root(), "cancel", {id}).value("ok", false));
  EXPECT_EQ(State(id), "cancelled");
  EXPECT_FALSE(Control(Root(), "release", {id}).value("ok", false));
  Turn();
  EXPECT_TRUE(Launched().empty());
}

TEST_F(DaemonInProc, AnotherUsersJobIsNotTheirsToCancelOrHold) {
  const std::int64_t id = Submit(PeerOf(1001, "alice"), {.hold = true}).at(0);
  for (const char* op : {"cancel", "release"}) {
    json reply = Control(PeerOf(1002, "bob"), op, {id});
    EXPECT_FALSE(reply.value("ok", false)) << op << ": " << reply.dump();
  }
  EXPECT_EQ(State(id), "held");
  EXPECT_TRUE(Control(PeerOf(1001, "alice"), "release", {id}).value("ok", false));
  EXPECT_EQ(Launched(), Ids{id});
}

// ---- hold and release -----------------------------------------------------------------------------

TEST_F(DaemonInProc, AHeldJobStartsOnlyWhenReleased) {
  const std::int64_t held = SubmitOne({.hold = true});
  const std::int64_t later = SubmitOne({.gpus = 2});  // every GPU, queued after it: starts first
  Turn();
  EXPECT_EQ(Launched(), Ids{later});
  EXPECT_EQ(State(held), "held");
  EXPECT_EQ(StoredState(held), "held");
  json reply = Control(Root(), "release", {held});
  EXPECT_TRUE(reply.value("ok", false)) << reply.dump();
  EXPECT_EQ(Launched(), (Ids{later, held}));
}

TEST_F(DaemonInProc, AHeldJobWaitsPastItsDependencyUntilReleased) {
  const std::int64_t parent = SubmitOne();
  const std::int64_t child = SubmitOne({.after_ok = {parent}});
  EXPECT_TRUE(Control(Root(), "hold", {child}).value("ok", false));
  EXPECT_EQ(State(child), "held");
  RunToEnd(parent, 0);
  EXPECT_EQ(State(parent), "completed");
  EXPECT_EQ(State(child), "held") << "its dependency is done, and it is still held";
  EXPECT_EQ(Launched(), Ids{parent});
  EXPECT_TRUE(Control(Root(), "release", {child}).value("ok", false));
  EXPECT_EQ(Launched(), (Ids{parent, child}));
}

// ---- dependencies -----------------------------------------------------------------------------

TEST_F(DaemonInProc, AfterStartsOnlyOnceItsJobCompletedAndIsCancelledWhenItFailed) {
  const std::int64_t first = SubmitOne();
  const std::int64_t failing = SubmitOne();
  const std::int64_t after_ok = SubmitOne({.after_ok = {first}});
  const std::int64_t after_failed = SubmitOne({.after_ok = {failing}});
  json shown = ShowJob(after_ok);
  EXPECT_EQ(shown["state"], "pending");
  EXPECT_EQ(shown.value("reason", ""), "waiting for job " + std::to_string(first));
  Running(first);
  Running(failing);
  Turn();
  EXPECT_EQ(Launched(), (Ids{first, failing})) << "neither dependant starts while its job runs";
  Done(first, 0);
  Turn();
  EXPECT_EQ(Launched(), (Ids{first, failing, after_ok}));
  Done(failing, 3);
  Turn();
  shown = ShowJob(after_failed);
  EXPECT_EQ(shown["state"], "cancelled") << shown.dump();
  EXPECT_NE(shown.value("reason", "").find(std::to_string(failing)), std::string::npos) << shown.dump();
  EXPECT_EQ(Launched(), (Ids{first, failing, after_ok}));
}

TEST_F(DaemonInProc, AfterAnyStartsWhateverTheEnd) {
  const std::int64_t failing = SubmitOne();
  const std::int64_t next = SubmitOne({.after_any = {failing}});
  EXPECT_EQ(Launched(), Ids{failing});
  RunToEnd(failing, 4);
  EXPECT_EQ(State(failing), "failed");
  EXPECT_EQ(Launched(), (Ids{failing, next}));
}

TEST_F(DaemonInProc, AfterANoSuchJobIsRefused) {
  json refused;
  EXPECT_TRUE(Submit(Root(), {.after_ok = {9999}}, &refused).empty());
  EXPECT_EQ(refused.value("code", ""), "not_found") << refused.dump();
  EXPECT_NE(refused.value("error", "").find("9999"), std::string::npos) << refused.dump();
}

// ---- arrays -----------------------------------------------------------------------------------

TEST_F(DaemonInProc, AnArraysTasksAreStoredStartedAndCancelledByTheArraysId) {
  const Ids tasks = Submit(Root(), {.hold = true, .array = {0, 1, 2, 3, 4}});
  ASSERT_EQ(tasks.size(), 5u);
  const std::string array = std::to_string(tasks[0]);
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    json job = Call(Root(), {{"op", "show"}, {"id", array + "_" + std::to_string(i)}})["job"];
    EXPECT_EQ(job["state"], "held");
    EXPECT_EQ(job["array_index"], static_cast<int>(i));
    EXPECT_EQ(StoredState(tasks[i]), "held");
  }
  const std::int64_t other = SubmitOne({.hold = true});
  // Task 2 released alone starts alone; the array's id cancels every task still unfinished.
  EXPECT_TRUE(Call(Root(), {{"op", "release"}, {"ids", {array + "_2"}}}).value("ok", false));
  EXPECT_EQ(Launched(), Ids{tasks[2]});
  json reply = Control(Root(), "cancel", {tasks[0]});
  EXPECT_TRUE(reply.value("ok", false)) << reply.dump();
  for (int i : {0, 1, 3, 4})
    EXPECT_EQ(Call(Root(), {{"op", "show"}, {"id", array + "_" + std::to_string(i)}})["job"]["state"], "cancelled") << i;
  EXPECT_EQ(State(other), "held");
}

// --after ID_INDEX waits for that task alone, --after ID for every task of the array; a task
// that does not complete cancels the second, and starts an --after-any of it.
TEST_F(DaemonInProc, AfterATaskWaitsForThatTaskAloneAfterTheArrayForAllItsTasks) {
  const Ids tasks = Submit(Root(), {.hold = true, .array = {0, 1, 2}});
  ASSERT_EQ(tasks.size(), 3u);
  const std::string array = std::to_string(tasks[0]);
  auto submit_after = [&](const char* option, const json& dep) {
    store::JobSpec spec;
    spec.argv = {"true"};
    spec.cwd = "/tmp";
    json request = {{"op", "submit"}, {"spec", store::SpecToJson(spec)}};
    request["spec"][option] = json::array({dep});
    json reply = Call(Root(), request);
    EXPECT_TRUE(reply.value("ok", false)) << reply.dump();
    return reply.value("ok", false) ? reply["ids"][0].get<std::int64_t>() : 0;
  };
  const std::int64_t after_task = submit_after("after_ok", array + "_0");
  const std::int64_t after_array = submit_after("after_ok", tasks[0]);
  const std::int64_t after_any_task = submit_after("after_any", array + "_1");
  EXPECT_EQ(ShowJob(after_task).value("reason", ""), "waiting for job " + array + "_0");
  EXPECT_EQ(ShowJob(after_task)["spec"]["after_ok"], json::array({array + "_0"})) << "stored as written";
  EXPECT_TRUE(Call(Root(), {{"op", "release"}, {"ids", {array + "_0"}}}).value("ok", false));
  RunToEnd(tasks[0], 0);
  EXPECT_EQ(Launched(), (Ids{tasks[0], after_task}));
  EXPECT_EQ(State(after_array), "pending") << "tasks 1 and 2 are still held";
  EXPECT_EQ(State(after_any_task), "pending");
  EXPECT_TRUE(Call(Root(), {{"op", "cancel"}, {"ids", {array + "_[1-2]"}}}).value("ok", false));
  Turn();
  EXPECT_EQ(Launched(), (Ids{tasks[0], after_task, after_any_task}));
  EXPECT_EQ(State(after_array), "cancelled") << "the whole array did not succeed";
  // An unknown task is refused at submission.
  store::JobSpec spec;
  spec.argv = {"true"};
  spec.cwd = "/tmp";
  json request = {{"op", "submit"}, {"spec", store::SpecToJson(spec)}};
  request["spec"]["after_ok"] = json::array({array + "_9"});
  json refused = Call(Root(), request);
  EXPECT_EQ(refused.value("code", ""), "not_found") << refused.dump();
  EXPECT_NE(refused.value("error", "").find("--after " + array + "_9: no job " + array + "_9"), std::string::npos)
      << refused.dump();
}

}  // namespace
}  // namespace gpulane::test
