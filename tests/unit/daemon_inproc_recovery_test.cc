// A daemon started again on the same state folder (tests/support/inproc_daemon.h: a second
// daemon::Daemon in the same process) and jobs retried with --retry: what the restarted daemon
// shows, which supervisors it starts again and which never.
#include <gtest/gtest.h>

#include "support/inproc_daemon.h"

namespace gpulane::test {
namespace {

using nlohmann::json;
using Ids = std::vector<std::int64_t>;

class DaemonInProcRecovery : public InProcDaemonTest {
 protected:
  void SetUp() override {
    InProcDaemonTest::SetUp();
    StartDaemon();
  }
  std::vector<int> AttemptExitCodes(std::int64_t id) {
    std::vector<int> out;
    json job = ShowJob(id);
    for (const auto& a : job["attempts"]) out.push_back(a.value("exit_code", -1));
    if (out.empty()) ADD_FAILURE() << job.dump();
    return out;
  }
};

TEST_F(DaemonInProcRecovery, KilledWhileIdleItKeepsEveryJobAndGoesOnServing) {
  const std::int64_t done = SubmitOne();
  RunToEnd(done, 6);
  const std::int64_t held = SubmitOne({.name = "kept", .hold = true});
  Crash();
  ASSERT_TRUE(std::filesystem::exists(paths_.socket)) << "a kill -9 leaves the socket file behind";
  StartDaemon();  // and a left-over socket file does not stop a new daemon
  json shown = ShowJob(done);
  EXPECT_EQ(shown["state"], "failed");
  EXPECT_EQ(shown["exit_code"], 6);
  shown = ShowJob(held);
  EXPECT_EQ(shown["state"], "held");
  EXPECT_EQ(shown["spec"]["name"], "kept");
  const std::int64_t next = SubmitOne();
  EXPECT_GT(next, held) << "new ids follow the old ones";
  EXPECT_TRUE(Control(Root(), "release", {held}).value("ok", false));
  EXPECT_EQ(Launched(), (Ids{done, next, held}));
}

TEST_F(DaemonInProcRecovery, ARunningJobIsAdoptedNotStartedAgainAndItsEndRecorded) {
  const std::int64_t id = SubmitOne();
  Running(id);
  Turn();
  Crash();
  StartDaemon();
  EXPECT_EQ(State(id), "running") << "re-adopted: its supervisor holds its lock";
  clock_.Advance(3600);  // ticks well past the launch grace
  Turn();
  EXPECT_EQ(State(id), "running");
  Done(id, 7);
  Turn();
  EXPECT_EQ(State(id), "failed");
  EXPECT_EQ(Launched(), Ids{id}) << "never started twice";
}

TEST_F(DaemonInProcRecovery, JobsThatEndWhileTheDaemonIsDownAreCollectedAndTheirDependantsDecided) {
  const std::int64_t ok = SubmitOne();
  const std::int64_t bad = SubmitOne();
  const std::int64_t after = SubmitOne({.after_ok = {ok}});
  const std::int64_t after_bad = SubmitOne({.after_ok = {bad}});
  Running(ok);
  Running(bad);
  Turn();
  Crash();
  Done(ok, 0);  // both supervisors record the end while no daemon runs
  Done(bad, 9);
  StartDaemon();
  Turn();
  EXPECT_EQ(State(ok), "completed");
  EXPECT_EQ(ShowJob(bad)["exit_code"], 9);
  EXPECT_EQ(State(after_bad), "cancelled");
  EXPECT_EQ(Launched(), (Ids{ok, bad, after}));
}

TEST_F(DaemonInProcRecovery, ALaunchWhoseSupervisorNeverCameIsStartedAgainOnceAfterTheGrace) {
  const std::int64_t id = SubmitOne();
  Crash();  // its supervisor never took its lock
  StartDaemon();
  EXPECT_EQ(Launched(), Ids{id}) << "not before the launch grace";
  clock_.Advance(settings_.requeue_grace_s + 2 * settings_.tick_s);
  Turn();
  clock_.Advance(settings_.tick_s);
  Turn();
  EXPECT_EQ(Launched(), (Ids{id, id})) << "started again, once";
}

TEST_F(DaemonInProcRecovery, AJobWhoseCommandMayHaveStartedIsNeverStartedAgain) {
  const std::int64_t id = SubmitOne();
  Running(id);
  Turn();
  ASSERT_TRUE(daemon::JobFiles(files_, paths_.state_dir + "/jobs", id).OpenExecMark());  // '0' ...
  {
    std::FILE* mark = std::fopen(daemon::JobFiles(files_, paths_.state_dir + "/jobs", id).exec_path().c_str(), "r+");
    ASSERT_NE(mark, nullptr);
    std::fputc('1', mark);  // ... and '1': the job's child was about to exec
    std::fclose(mark);
  }
  Crash();
  Vanish(id);  // the supervisor killed without a word while the daemon was down
  StartDaemon();
  clock_.Advance(settings_.requeue_grace_s + 2 * settings_.tick_s);
  Turn();
  EXPECT_EQ(State(id), "failed");
  EXPECT_EQ(Launched(), Ids{id});
}

// A status file the daemon cannot read (a value of the wrong type) threw inside the loop, outside
// any request handler, and ended the daemon. It is logged; the daemon goes on serving, the other
// supervisors' reports of the same turn are read, and this supervisor's next report as usual.
TEST_F(DaemonInProcRecovery, ADamagedStatusFileIsLoggedAndTheDaemonGoesOn) {
  const std::int64_t damaged = SubmitOne();
  const std::int64_t other = SubmitOne();
  const std::string status = daemon::JobFiles(files_, paths_.state_dir + "/jobs", damaged).status_path();
  {
    std::FILE* f = std::fopen((status + ".damaged").c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(R"({"phase": 5, "pid": "not a pid"})", f);
    std::fclose(f);
  }
  ASSERT_EQ(std::rename((status + ".damaged").c_str(), status.c_str()), 0);  // inotify: read on the next turn
  Running(other);  // in the same turn
  Turn();
  EXPECT_TRUE(Call(Root(), {{"op", "ping"}}).value("ok", false)) << "the daemon still serves";
  EXPECT_EQ(State(damaged), "launching");
  EXPECT_EQ(State(other), "running") << "the other job's report of the same turn is read";
  RunToEnd(damaged, 0);
  EXPECT_EQ(State(damaged), "completed");
}

// ---- retries ----------------------------------------------------------------------------------
// DaemonRetry.AJobThatAlwaysFailsEndsFailedAfterItsLastRetry, .QueueShowsTheRetryAndARestarted-
// DaemonKeepsCounting and .TheRetryCountIsBounded (the daemon's part) were through the binary; what
// a retried job sees and writes (GPULANE_RETRY, the retry lines in its log) and what `submit
// --retry` refuses stay there (DaemonRetry.AJobThatFailsTwice..., DaemonSubmit.CommandLineErrors).

TEST_F(DaemonInProcRecovery, ARetriedJobStartsAgainAfterEachFailureAndCompletes) {
  const std::int64_t id = SubmitOne({.retries = 3});
  RunToEnd(id, 3);
  EXPECT_EQ(State(id), "launching") << "back in line and started again";
  RunToEnd(id, 3);
  RunToEnd(id, 0);
  json shown = ShowJob(id);
  EXPECT_EQ(shown["state"], "completed");
  EXPECT_EQ(shown["retries_used"], 2);
  EXPECT_EQ(AttemptExitCodes(id), (std::vector<int>{3, 3, 0}));
  EXPECT_EQ(Launched(), (Ids{id, id, id}));
  Restart();  // the attempts are in the store
  EXPECT_EQ(AttemptExitCodes(id), (std::vector<int>{3, 3, 0}));
}

TEST_F(DaemonInProcRecovery, AJobThatAlwaysFailsEndsFailedAfterItsLastRetry) {
  const std::int64_t id = SubmitOne({.retries = 2});
  for (int i = 0; i < 3; ++i) RunToEnd(id, 5);
  EXPECT_EQ(State(id), "failed");
  EXPECT_EQ(ShowJob(id)["exit_code"], 5) << "the last attempt's status";
  EXPECT_EQ(AttemptExitCodes(id), (std::vector<int>{5, 5, 5}));
  EXPECT_EQ(Launched(), (Ids{id, id, id})) << "three runs, no fourth";
}

TEST_F(DaemonInProcRecovery, ACancelledJobIsNotRetried) {
  const std::int64_t id = SubmitOne({.retries = 3});
  Running(id);
  Turn();
  EXPECT_TRUE(Control(Root(), "cancel", {id}).value("ok", false));
  Done(id, 143);  // its supervisor, on the SIGTERM
  Turn();
  EXPECT_EQ(State(id), "cancelled");
  EXPECT_EQ(Launched(), Ids{id});
}

TEST_F(DaemonInProcRecovery, ATimedOutJobIsNotRetried) {
  const std::int64_t id = SubmitOne({.retries = 3});
  Running(id);
  Done(id, 143, [](daemon::SupervisorStatus& s) { s.timed_out = true; });
  Turn();
  EXPECT_EQ(State(id), "timeout");
  EXPECT_EQ(Launched(), Ids{id});
}

TEST_F(DaemonInProcRecovery, ADependantStartsOnlyAfterTheFinalSuccess) {
  const std::int64_t first = SubmitOne({.retries = 2});
  const std::int64_t after = SubmitOne({.after_ok = {first}});
  RunToEnd(first, 1);
  EXPECT_EQ(State(after), "pending") << "not after the first failure";
  RunToEnd(first, 0);
  EXPECT_EQ(Launched(), (Ids{first, first, after}));
}

TEST_F(DaemonInProcRecovery, ARestartedDaemonKeepsCountingRetries) {
  const std::int64_t id = SubmitOne({.retries = 3});
  RunToEnd(id, 1);
  Running(id);
  Turn();
  json queued = Call(Root(), {{"op", "queue"}});
  ASSERT_TRUE(queued.value("ok", false)) << queued.dump();
  ASSERT_EQ(queued["jobs"].size(), 1u) << queued.dump();
  EXPECT_EQ(queued["jobs"][0]["attempt"], 1);
  const std::string table = Call(Root(), {{"op", "queue"}, {"format", "table"}}).value("table", "");
  EXPECT_NE(table.find("retry 1/3"), std::string::npos) << table;
  Crash();
  StartDaemon();
  EXPECT_EQ(State(id), "running");
  Done(id, 0);
  Turn();
  EXPECT_EQ(AttemptExitCodes(id), (std::vector<int>{1, 0}));
}

TEST_F(DaemonInProcRecovery, TheDaemonRefusesARetryCountOverItsBound) {
  store::JobSpec spec;
  spec.argv = {"true"};
  spec.cwd = "/tmp";
  json request = {{"op", "submit"}, {"spec", store::SpecToJson(spec)}};
  request["spec"]["retries"] = 1000;
  json reply = Call(Root(), request);
  EXPECT_EQ(reply["ok"], false) << reply.dump();
  EXPECT_EQ(reply.value("code", ""), "invalid_argument");
  EXPECT_NE(reply.value("error", "").find("0 to 100"), std::string::npos) << reply.dump();
  request["spec"]["retries"] = 100;  // the bound itself is taken
  reply = Call(Root(), request);
  ASSERT_TRUE(reply.value("ok", false)) << reply.dump();
  EXPECT_EQ(ShowJob(reply["ids"][0].get<std::int64_t>())["spec"]["retries"], 100);
}

}  // namespace
}  // namespace gpulane::test
