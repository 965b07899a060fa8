// Users' limits ([limits]) and fair share in the daemon, in-process (tests/support/inproc_daemon.h):
// two users are two peers of the test's choosing, so no login, setpriv or system daemon is needed.
// What is checked is the daemon's own enforcement, which no client can skip: what is refused (and
// with which words), which job is started and what the queue says about the ones that wait.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include <fmt/format.h>

#include "support/inproc_daemon.h"
#include "support/text.h"

namespace gpulane::test {
namespace {

using nlohmann::json;
using Ids = std::vector<std::int64_t>;

const daemon::Peer kUsersAlice = PeerOf(1001, "alice");
const daemon::Peer kUsersBob = PeerOf(1002, "bob");

class DaemonInProcUsers : public InProcDaemonTest {
 protected:
  std::string Reason(std::int64_t id) { return ShowJob(id).value("reason", ""); }
  std::string Refusal(const daemon::Peer& peer, const Submission& s, std::string* code = nullptr) {
    json refused;
    EXPECT_TRUE(Submit(peer, s, &refused).empty()) << "refused";
    if (code) *code = refused.value("code", "");
    return refused.value("error", "");
  }
};

TEST_F(DaemonInProcUsers, SubmissionsOverMaxQueuedAreRefusedAndTheOtherUserIsNot) {
  config_.limits.max_queued = 3;
  StartDaemon();
  for (int i = 0; i < 3; ++i) ASSERT_EQ(Submit(kUsersAlice, {.hold = true}).size(), 1u);
  std::string code;
  EXPECT_EQ(Refusal(kUsersAlice, {.hold = true}, &code),
            "alice has 3 unfinished queued jobs; one more would pass the limit of 3 (limits.max_queued): "
            "wait for some to end, or cancel some");
  EXPECT_EQ(code, "over_limit");
  EXPECT_TRUE(Contains(Refusal(kUsersAlice, {.hold = true, .array = {0, 1}}), "2 more would pass"));
  EXPECT_EQ(Submit(kUsersBob, {.hold = true}).size(), 1u) << "bob's own count is his";
  EXPECT_EQ(Submit(Root(), {.hold = true}).size(), 1u) << "root has no limits";
  const json queue = Call(kUsersAlice, {{"op", "queue"}});
  Ids alices;
  for (const json& job : queue["jobs"])
    if (job["user"] == "alice") alices.push_back(job["id"]);
  ASSERT_EQ(alices.size(), 3u) << "nothing of the refused submissions was queued: " << queue.dump();
  // Once one of hers ends (cancelled here), she may queue one more.
  EXPECT_TRUE(Control(kUsersAlice, "cancel", {alices[0]}).value("ok", false));
  EXPECT_EQ(Submit(kUsersAlice, {.hold = true}).size(), 1u);
}

TEST_F(DaemonInProcUsers, AUserAtMaxGpusWaitsWithoutKeepingAGpuFromTheOtherUser) {
  config_.limits.max_gpus = 1;
  StartDaemon();
  const std::int64_t first = Submit(kUsersAlice, {}).at(0);
  Running(first);
  Turn();
  const std::int64_t second = Submit(kUsersAlice, {}).at(0);
  EXPECT_EQ(State(second), "pending");
  EXPECT_EQ(Reason(second), "alice holds 1 GPU of the 1 limits.max_gpus allows");
  const std::int64_t bobs = Submit(kUsersBob, {}).at(0);
  EXPECT_EQ(Launched(), (Ids{first, bobs})) << "the free GPU is bob's: alice's waiting job holds nothing";
  std::string code;
  EXPECT_TRUE(Contains(Refusal(kUsersAlice, {.gpus = 2}, &code), "-g 2: alice may hold at most 1 GPUs at once (limits.max_gpus)"));
  EXPECT_EQ(code, "invalid_argument");
  Done(first, 0);
  Turn();
  EXPECT_EQ(Launched(), (Ids{first, bobs, second})) << "once her first job ended, her second starts";
}

TEST_F(DaemonInProcUsers, AUserOverMaxGpuHoursPerDayWaitsWhileOthersAndRootStart) {
  config_.limits.max_gpu_hours_per_day = 0.0003;  // about one GPU-second
  StartDaemon();
  const std::int64_t first = Submit(kUsersAlice, {}).at(0);
  Running(first);
  clock_.Advance(2);
  Done(first, 0);
  Turn();
  const std::int64_t second = Submit(kUsersAlice, {}).at(0);
  Turn();
  EXPECT_EQ(State(second), "pending");
  const std::string reason = Reason(second);
  EXPECT_TRUE(Contains(reason, "alice used 0.000")) << reason;
  EXPECT_TRUE(Contains(reason, " of the 0.0003 GPU-hours limits.max_gpu_hours_per_day allows in the last 24 h; alice's next "
                               "job can start in about 2"))
      << reason;
  const std::int64_t bobs = Submit(kUsersBob, {}).at(0);
  const std::int64_t roots = SubmitOne();
  EXPECT_EQ(Launched(), (Ids{first, bobs, roots})) << "bob's use is his own, root has no limits";
  RunToEnd(bobs, 0);
  RunToEnd(roots, 0);
  clock_.Advance(24 * 3600 + 10);
  Turn();
  EXPECT_EQ(Launched(), (Ids{first, bobs, roots, second})) << "a day later her use is past";
}

TEST_F(DaemonInProcUsers, TimeLimitsAreFilledInAndBounded) {
  config_.limits.max_time_limit_s = 3600;
  config_.limits.default_time_limit_s = 1800;
  StartDaemon();
  EXPECT_TRUE(Contains(Refusal(kUsersAlice, {.hold = true, .time_limit_s = 7200}),
                       "--time-limit 2h 00m: alice may ask for at most 1h 00m (limits.max_time_limit)"));
  const std::int64_t plain = Submit(kUsersAlice, {.hold = true}).at(0);
  EXPECT_EQ(ShowJob(plain)["spec"]["request"]["time_limit_s"], 1800.0) << "the default time limit";
  EXPECT_EQ(Submit(Root(), {.hold = true, .time_limit_s = 5 * 3600}).size(), 1u) << "root has no limits";
}

// ---- who may do what ----------------------------------------------------------------------------

TEST_F(DaemonInProcUsers, CancelByNameTakesOnlyTheCallersOwnJobs) {
  StartDaemon();
  const std::int64_t of_a = Submit(kUsersAlice, {.name = "shared-name", .hold = true}).at(0);
  const std::int64_t of_b = Submit(kUsersBob, {.name = "shared-name", .hold = true}).at(0);
  const std::int64_t other_b = Submit(kUsersBob, {.name = "other", .hold = true}).at(0);
  json reply = Call(kUsersBob, {{"op", "cancel"}, {"ids", json::array()}, {"name", "shared-name"}});
  EXPECT_TRUE(reply.value("ok", false)) << reply.dump();
  EXPECT_FALSE(reply.contains("failed") && !reply["failed"].empty()) << "alice's job of that name is not bob's business: "
                                                                      << reply.dump();
  EXPECT_EQ(State(of_b), "cancelled");
  EXPECT_EQ(State(of_a), "held");
  EXPECT_EQ(State(other_b), "held");
  // Root's --name takes every user's jobs of that name.
  const std::int64_t again_b = Submit(kUsersBob, {.name = "shared-name", .hold = true}).at(0);
  EXPECT_TRUE(Call(Root(), {{"op", "cancel"}, {"ids", json::array()}, {"name", "shared-name"}}).value("ok", false));
  EXPECT_EQ(State(of_a), "cancelled");
  EXPECT_EQ(State(again_b), "cancelled");
  EXPECT_EQ(State(other_b), "held");
}

TEST_F(DaemonInProcUsers, AUserCannotCancelAnotherUsersRunningJob) {
  StartDaemon();
  const std::int64_t job = Submit(kUsersAlice, {}).at(0);
  Running(job);
  Turn();
  json refused = Control(kUsersBob, "cancel", {job});
  EXPECT_FALSE(refused.value("ok", false)) << refused.dump();
  EXPECT_EQ(refused.value("code", ""), "permission") << refused.dump();
  EXPECT_NE(refused.value("error", "").find("alice"), std::string::npos) << refused.dump();
  EXPECT_EQ(State(job), "running") << "bob's refused cancel did nothing";
  EXPECT_TRUE(Control(kUsersAlice, "cancel", {job}).value("ok", false)) << "alice's own cancel works";
  Done(job, 143);  // her job's supervisor, on the SIGTERM
  Turn();
  EXPECT_EQ(State(job), "cancelled");
}

// Queue jumping: only root and daemon.admin_group members may raise a job's priority above 0;
// users may lower their own. A refused submission queues nothing.
TEST_F(DaemonInProcUsers, OnlyAdminsMayRaisePriorityAboveZero) {
  StartDaemon();
  std::string code;
  EXPECT_TRUE(Contains(Refusal(kUsersAlice, {.priority = 1000000}, &code),
                       "--priority 1000000: only root and members of daemon.admin_group"));
  EXPECT_EQ(code, "permission");
  EXPECT_TRUE(Launched().empty()) << "nothing was queued";
  const std::int64_t lowered = Submit(kUsersAlice, {.priority = -5}).at(0);
  EXPECT_EQ(ShowJob(lowered)["spec"]["request"]["priority"], -5);
  const std::int64_t by_root = Submit(Root(), {.priority = 7}).at(0);
  EXPECT_EQ(ShowJob(by_root)["spec"]["request"]["priority"], 7);
  EXPECT_EQ(Submit(PeerOf(1003, "carol", /*admin=*/true), {.priority = 3}).size(), 1u) << "an admin_group member may";
}

// One GPU, one queued job at a time waiting for it (daemon.max_waiting = 1). Alice's first job
// runs for ten minutes, she queues four more, bob one after them: bob's starts before her queued
// ones, the queue says why hers wait, and `share` shows both users.
TEST_F(DaemonInProcUsers, ALightUsersLaterJobStartsBeforeAHeavyUsersQueuedOnes) {
  gpu_count_ = 1;
  config_.max_waiting_supervisors = 1;
  StartDaemon();
  const std::int64_t a1 = Submit(kUsersAlice, {}).at(0);
  Running(a1);
  Turn();
  clock_.Advance(600);
  Turn();
  Ids alice_rest;
  for (int i = 0; i < 4; ++i) alice_rest.push_back(Submit(kUsersAlice, {}).at(0));
  const std::int64_t b1 = Submit(kUsersBob, {}).at(0);
  Turn();
  EXPECT_EQ(Launched(), (Ids{a1, alice_rest[0]})) << "the one place of the cap is taken";
  // The queue says why alice's jobs wait: her priority below bob's, her use, bob's job ahead.
  const std::string waits = Reason(alice_rest[1]);
  EXPECT_TRUE(Contains(waits, "priority 0.")) << waits;
  EXPECT_TRUE(Contains(waits, "alice used")) << waits;
  EXPECT_TRUE(Contains(waits, "behind bob's job " + std::to_string(b1))) << waits;
  EXPECT_TRUE(Contains(Reason(b1), "fair share 1.000")) << Reason(b1);
  const std::string table = Call(kUsersAlice, {{"op", "queue"}, {"format", "table"}}).value("table", "");
  EXPECT_TRUE(Contains(table, "behind bob's job " + std::to_string(b1))) << "gpulane queue's table: " << table;
  json share = Call(kUsersBob, {{"op", "share"}});
  ASSERT_EQ(share["users"].size(), 2u) << share.dump();
  std::map<std::string, double> factor;
  for (const auto& u : share["users"]) factor[u["user"]] = u["fair_share"];
  EXPECT_LT(factor["alice"], 0.5) << share.dump();
  EXPECT_EQ(factor["bob"], 1.0) << share.dump();
  // Each supervisor that starts its job frees the place: bob's job next, then hers in order.
  Done(a1, 0);
  for (std::int64_t id : {alice_rest[0], b1, alice_rest[1], alice_rest[2]}) {
    Running(id);
    Turn();
  }
  EXPECT_EQ(Launched(), (Ids{a1, alice_rest[0], b1, alice_rest[1], alice_rest[2], alice_rest[3]}));
}

// Was DaemonUsers.OtherUsersCannotTouchAJobButRootCan (two real users through the binary; the exit
// code 9 of each refusal stays there, in DaemonExitCodes.AnotherUsersJobIs9): another user may not
// cancel, hold, release or read the logs of a job, nor cancel by --user, and sees no environment
// in show; each refusal is logged; the owner and root may do all of it.
TEST_F(DaemonInProcUsers, OtherUsersCannotTouchAJobButRootCan) {
  StartDaemon();
  CaptureLog();
  Submission secret{.name = "a-held", .hold = true};
  secret.env.push_back("SECRET=s3cr3t");
  const std::int64_t held = Submit(kUsersAlice, secret).at(0);
  secret.hold = false;
  const std::int64_t done = Submit(kUsersAlice, secret).at(0);
  RunToEnd(done, 0);
  // Bob: refused.
  for (const char* op : {"cancel", "hold", "release"}) {
    json reply = Control(kUsersBob, op, {held});
    EXPECT_EQ(reply.value("code", ""), "permission") << op << ": " << reply.dump();
    EXPECT_TRUE(Contains(reply.dump(), "alice")) << op << ": " << reply.dump();
  }
  json logs = Call(kUsersBob, {{"op", "logs"}, {"id", done}});
  EXPECT_EQ(logs.value("code", ""), "permission") << logs.dump();
  EXPECT_TRUE(Contains(logs.value("error", ""), "alice")) << logs.dump();
  json by_user = Call(kUsersBob, {{"op", "cancel"}, {"ids", json::array()}, {"user", "alice"}});
  EXPECT_EQ(by_user.value("code", ""), "permission") << by_user.dump();
  json show_b = Call(kUsersBob, {{"op", "show"}, {"id", held}});
  ASSERT_TRUE(show_b.value("ok", false)) << show_b.dump();
  EXPECT_FALSE(Contains(show_b.dump(), "s3cr3t")) << "bob sees alice's environment: " << show_b.dump();
  EXPECT_FALSE(show_b["job"]["spec"]["env"].is_array());
  // Nothing bob tried changed the jobs; every refusal is in the daemon's log.
  EXPECT_EQ(State(held), "held");
  EXPECT_EQ(State(done), "completed");
  const std::string logged = Logged();
  EXPECT_TRUE(Contains(logged, "refused: bob (uid 1002) may not cancel job " + std::to_string(held))) << logged;
  EXPECT_TRUE(Contains(logged, "refused: bob (uid 1002) may not read the logs of job " + std::to_string(done))) << logged;
  // Alice: her own job.
  EXPECT_TRUE(Contains(Call(kUsersAlice, {{"op", "show"}, {"id", held}}).dump(), "SECRET=s3cr3t"));
  // (Not refused: the harness's supervisor records no log file, so the answer is that there is none.)
  EXPECT_EQ(Call(kUsersAlice, {{"op", "logs"}, {"id", done}}).value("code", ""), "wrong_state");
  // Root: an admin acts on every job.
  EXPECT_EQ(Call(Root(), {{"op", "logs"}, {"id", done}}).value("code", ""), "wrong_state");
  EXPECT_TRUE(Contains(Call(Root(), {{"op", "show"}, {"id", held}}).dump(), "SECRET=s3cr3t"));
  json release = Control(Root(), "release", {held});
  EXPECT_TRUE(release.value("ok", false)) << release.dump();
  EXPECT_EQ(Launched(), (Ids{done, held})) << "released by root";
  RunToEnd(held, 0);
  EXPECT_EQ(ShowJob(held)["user"], "alice") << "released by root, still alice's";
  const std::int64_t second = Submit(kUsersAlice, {.hold = true}).at(0);
  EXPECT_EQ(Control(Root(), "hold", {second}).value("code", ""), "wrong_state") << "already held";
  EXPECT_TRUE(Control(Root(), "cancel", {second}).value("ok", false));
  EXPECT_EQ(State(second), "cancelled");
}

// Who owns a job is the kernel's word (SO_PEERCRED), never the client's: alice's submissions whose
// request claims root's uid and name (a job and an array's tasks) are hers in show, in the store
// after a restart and in the spec file its supervisor runs the command from (as that uid); bob
// still may not cancel them, as he may not cancel any of alice's jobs.
TEST_F(DaemonInProcUsers, AJobIsItsSubmittersWhateverItsRequestClaims) {
  StartDaemon();
  const auto claiming_root = [&](const Submission& s) {
    json request = SubmitRequest(s);
    request["spec"]["request"]["uid"] = 0;
    request["spec"]["request"]["user"] = "root";
    json reply = Call(kUsersAlice, request);
    EXPECT_TRUE(reply.value("ok", false)) << reply.dump();
    return reply.value("ids", Ids{});
  };
  const Ids job = claiming_root({});
  const Ids tasks = claiming_root({.hold = true, .array = {0, 1}});
  ASSERT_EQ(job.size() + tasks.size(), 3u);
  const std::vector<std::string> names = {std::to_string(job[0]), fmt::format("{}_0", tasks[0]),
                                          fmt::format("{}_1", tasks[0])};
  for (int life = 0; life < 2; ++life) {
    for (const std::string& name : names) {
      const json shown = Call(Root(), {{"op", "show"}, {"id", name}});
      ASSERT_TRUE(shown.value("ok", false)) << shown.dump();
      EXPECT_EQ(shown["job"]["uid"], 1001) << shown.dump();
      EXPECT_EQ(shown["job"]["user"], "alice") << shown.dump();
      EXPECT_EQ(shown["job"]["spec"]["request"]["uid"], 1001) << shown.dump();
      EXPECT_EQ(shown["job"]["spec"]["request"]["user"], "alice") << shown.dump();
      json cancel = Call(kUsersBob, {{"op", "cancel"}, {"ids", {name}}});
      EXPECT_EQ(cancel.value("code", ""), "permission") << name << ": " << cancel.dump();
    }
    Restart();  // the second time round, from the store
  }
  ASSERT_EQ(Launched(), job);
  auto spec = daemon::JobFiles(files_, paths_.state_dir + "/jobs", job[0]).ReadSpec();
  ASSERT_TRUE(spec) << spec.error().message;
  EXPECT_EQ(spec->uid(), 1001u);
  EXPECT_EQ(spec->user(), "alice");
}

}  // namespace
}  // namespace gpulane::test
