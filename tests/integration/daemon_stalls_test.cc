// Issue 23, item 8: work is bounded per turn of the daemon's loop. A hostile tester's `cancel --user`
// of 300,000 held tasks froze the daemon 11.5 s for everyone. These run with tens of thousands of
// jobs (the 300,000 figure is bench/daemon_stalls.py's); the parts are the same.
#include <gtest/gtest.h>
#include <pwd.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <fmt/format.h>

#include "support/daemon_fixture.h"
#include "support/text.h"

namespace gpulane::test {
namespace {

using nlohmann::json;

constexpr int kTasksPerArray = 20000;
constexpr int kArrays = 2;
constexpr int kTasks = kTasksPerArray * kArrays;
constexpr std::size_t kCancelPartJobs = 1000;  // daemon.h: one transaction each

std::string Me() { return getpwuid(getuid())->pw_name; }

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

std::string CancelMine() { return json{{"v", 2}, {"op", "cancel"}, {"user", Me()}}.dump(); }

// Pings on `other` until `canceller` has its reply: how many pings were answered while it had none.
int PingsAnsweredMeanwhile(RawConnection& canceller, RawConnection& other, double* worst_s) {
  const std::string ping = json{{"v", 2}, {"op", "ping"}}.dump();
  int meanwhile = 0;
  while (!canceller.Readable()) {
    const auto start = std::chrono::steady_clock::now();
    if (!other.SendFrame(ping)) break;
    auto pong = other.Read(60);
    if (!pong || !pong->value("ok", false)) {
      ADD_FAILURE() << "a ping during the cancel was not answered";
      break;
    }
    *worst_s = std::max(*worst_s, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    if (!canceller.Readable()) ++meanwhile;
  }
  return meanwhile;
}

TEST(DaemonStalls, CancellingThreeHundredThousandTasksLeavesOtherClientsAnswered) {
  TestDaemon d;
  const std::int64_t first = QueueHeldTasks(d);
  d.Call({{"op", "ping"}, {"loop_stats", true}});  // the loop's longest turns from here on

  RawConnection canceller(d.socket());
  ASSERT_TRUE(canceller.SendFrame(CancelMine()));
  RawConnection other(d.socket());
  double worst_ping_s = 0;
  const int meanwhile = PingsAnsweredMeanwhile(canceller, other, &worst_ping_s);
  auto reply = canceller.Read(300);
  ASSERT_TRUE(reply && reply->value("ok", false)) << (reply ? reply->dump() : "no reply");
  EXPECT_EQ((*reply)["cancelled"].size(), static_cast<std::size_t>(kTasks));

  // Another client was answered again and again while the cancel ran, never after a long wait,
  // and no turn of the loop held it long (one turn did all of it: about 2 s for these 40,000).
  // The bound on a turn is 1 s, as for holds: under ASan on a loaded 2-core machine a part's turn
  // took 554 ms once (a fresh clone, 2026-12-07), and one turn for everything is what it catches.
  EXPECT_GE(meanwhile, 3) << "pings answered while the cancel of " << kTasks << " tasks ran";
  EXPECT_LT(worst_ping_s, 1.0);
  json stats = d.Call({{"op", "ping"}, {"loop_stats", true}});
  EXPECT_LT(stats.value("loop_worst_turn_ms", 1e9), 1000) << stats.dump();
  EXPECT_LT(stats.value("loop_worst_tick_turn_ms", 1e9), 1000) << stats.dump();

  // All of them are cancelled, durably: a restarted daemon says the same.
  EXPECT_EQ(d.Queue().size(), 0u);
  EXPECT_EQ(d.State(first + 1), "cancelled");
  d.Kill9();
  ASSERT_TRUE(d.Start());
  ASSERT_TRUE(WaitUntilLoaded(d));
  EXPECT_EQ(d.Queue().size(), 0u);
  EXPECT_EQ(d.State(first + kTasks - 1), "cancelled");
}

// `op` ("hold" or "release") of every task of `arrays`, sent on a connection of its own while
// another connection pings: the reply; *meanwhile and *worst_s as PingsAnsweredMeanwhile's.
json ChangeWhilePinged(TestDaemon& d, const std::string& op, const std::vector<std::int64_t>& arrays, int* meanwhile,
                       double* worst_s) {
  json ids = json::array();
  for (std::int64_t id : arrays) ids.push_back(std::to_string(id));
  d.Call({{"op", "ping"}, {"loop_stats", true}});  // the loop's longest turns from here on
  RawConnection changer(d.socket());
  EXPECT_TRUE(changer.SendFrame(json{{"v", 2}, {"op", op}, {"ids", ids}}.dump()));
  RawConnection other(d.socket());
  *meanwhile = PingsAnsweredMeanwhile(changer, other, worst_s);
  auto reply = changer.Read(300);
  return reply ? *reply : json{{"transport_error", "no reply"}};
}

// How many of the test's jobs are in each state (queue --json).
std::map<std::string, std::size_t> StateCounts(const TestDaemon& d) {
  std::map<std::string, std::size_t> counts;
  for (const json& job : d.Queue()) ++counts[job.value("state", "")];
  return counts;
}

// `gpulane hold`/`release` of a 40,000-task array changed them all in one turn and one
// transaction: nobody else was answered meanwhile (300,000 froze the daemon for seconds). Now
// they go in parts like a cancel: another client's pings are answered throughout, never after a
// long wait, and the client is answered once every task is durably held (released).
TEST(DaemonStalls, HoldingAndReleasingFortyThousandTasksLeavesOtherClientsAnswered) {
  TestDaemon d;
  // Held tasks that wait for a job that never runs: released, they are pending and not launched.
  const std::int64_t gate = d.Submit({"--hold", "--", "true"});
  std::vector<std::int64_t> arrays;
  for (int i = 0; i < kArrays; ++i) {
    RunResult r = d.Gpulane({"submit", "--hold", "--after", std::to_string(gate), "--array",
                             fmt::format("0-{}", kTasksPerArray - 1), "--", "true"}, {}, 300);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    arrays.push_back(std::stoll(r.out));
  }
  for (const std::string op : {"release", "hold"}) {
    SCOPED_TRACE(op);
    int meanwhile = 0;
    double worst_ping_s = 0;
    json reply = ChangeWhilePinged(d, op, arrays, &meanwhile, &worst_ping_s);
    ASSERT_TRUE(reply.value("ok", false)) << reply.dump().substr(0, 2000);
    EXPECT_EQ(reply["changed"].size(), static_cast<std::size_t>(kTasks));
    EXPECT_EQ(reply["failed"].size(), 0u);
    EXPECT_GE(meanwhile, 3) << "pings answered while the " << op << " of " << kTasks << " tasks ran";
    // The parts' turns are bounded. The tick's turns are not yet: once released, the 40,000 tasks
    // are pending, and each tick's launch decision walks every pending job (JobTable::LaunchEligible;
    // 650 ms a tick under ASan on 2 cores), which a ping may wait behind.
    // The first turn names all 40,000 ids and the last builds their reply: 450 ms under ASan.
    EXPECT_LT(worst_ping_s, 2.0);
    json stats = d.Call({{"op", "ping"}, {"loop_stats", true}});
    EXPECT_LT(stats.value("loop_worst_turn_ms", 1e9), 1000) << stats.dump();
    // Every task changed: pending after the release (waiting for the gate), held after the hold.
    std::map<std::string, std::size_t> counts = StateCounts(d);
    EXPECT_EQ(counts[op == "hold" ? "held" : "pending"], static_cast<std::size_t>(kTasks) + (op == "hold"))
        << "the gate is held throughout";
    EXPECT_EQ(d.State(arrays.back() + kTasksPerArray - 1), op == "hold" ? "held" : "pending");
  }
  // Durably: a restarted daemon says the same.
  d.Kill9();
  ASSERT_TRUE(d.Start());
  ASSERT_TRUE(WaitUntilLoaded(d));
  EXPECT_EQ(StateCounts(d)["held"], static_cast<std::size_t>(kTasks) + 1);
}

TEST(DaemonStalls, ADaemonKilledMidCancelKeepsWholePartsAndReportsNothingUnstored) {
  TestDaemon d;
  const std::int64_t first = QueueHeldTasks(d);
  RawConnection canceller(d.socket());
  ASSERT_TRUE(canceller.SendFrame(CancelMine()));
  RawConnection other(d.socket());
  ASSERT_TRUE(other.SendFrame(json{{"v", 2}, {"op", "ping"}}.dump()));
  ASSERT_TRUE(other.Read(60));
  const bool answered_before_kill = canceller.Readable();
  d.Kill9();
  // The canceller was never told its jobs were cancelled.
  if (!answered_before_kill) {
    auto reply = canceller.Read(5);
    EXPECT_FALSE(reply && reply->value("ok", false)) << reply->dump();
  }
  ASSERT_TRUE(d.Start());
  ASSERT_TRUE(WaitUntilLoaded(d));
  // Whole parts are cancelled, the rest held as they were: none lost, none half-cancelled.
  json left = d.Queue();
  std::size_t held = 0;
  for (const json& job : left) held += job["state"] == "held";
  EXPECT_EQ(held, left.size()) << "every job not cancelled is held, as before";
  const std::size_t cancelled = kTasks - left.size();
  EXPECT_EQ(cancelled % kCancelPartJobs, 0u) << cancelled << " cancelled";
  if (!answered_before_kill) {
    EXPECT_LT(cancelled, static_cast<std::size_t>(kTasks));
  }
  EXPECT_EQ(d.State(first + 1), cancelled ? "cancelled" : "held");
  if (!left.empty()) {
    EXPECT_EQ(d.State(first + kTasks - 1), "held");
  }
  // And the rest can be cancelled now.
  RunResult again = d.Gpulane({"cancel", "--user", Me()}, {}, 300);
  EXPECT_EQ(again.exit_code, left.empty() ? 8 : 0) << again.err;
  // Every task left, once: a line an array ("cancelled job 1_[2000-19999] (18000 tasks)": cancel,
  // hold and release print an array's neighbouring tasks as one).
  std::size_t listed = 0;
  for (const std::string& line : Lines(again.out)) {
    const auto open = line.rfind(" ("), tasks = line.rfind(" tasks)");
    ASSERT_TRUE(line.rfind("cancelled job ", 0) == 0 && open != std::string::npos && tasks != std::string::npos) << line;
    listed += std::stoul(line.substr(open + 2, tasks - open - 2));
  }
  EXPECT_EQ(listed, left.size()) << again.out.substr(0, 400);
  EXPECT_EQ(d.Queue().size(), 0u);
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
