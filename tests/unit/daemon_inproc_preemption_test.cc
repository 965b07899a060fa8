// The daemon's side of preemption in-process (tests/support/inproc_daemon.h): which job gives way
// is decided by its supervisor in the lease line (tests/integration/preemption_test.cc, end to
// end); what the daemon does with the end it reports is tested here: a --preemptible (requeue) job
// is put back in line once, using none of its --retry, and queue and show say so; --preemptible=
// cancel ends it; sched.max_preemptions_per_minute holds preemptible jobs back for a minute.
#include <gtest/gtest.h>

#include "support/inproc_daemon.h"

namespace gpulane::test {
namespace {

using nlohmann::json;
using Ids = std::vector<std::int64_t>;

constexpr const char* kGaveWay = "preempted: root's job (1st in line) needs GPU0";

// What a preemptible job's supervisor reports when its job gave way (exec/leased_job).
void GaveWay(daemon::SupervisorStatus& s, bool requeue) {
  s.preempted = true;
  s.requeue = requeue;
  s.reason = kGaveWay;
}

class DaemonInProcPreemption : public InProcDaemonTest {};

TEST_F(DaemonInProcPreemption, APreemptedJobIsRequeuedOnceAndUsesNoneOfItsRetries) {
  StartDaemon();
  const std::int64_t id = SubmitOne({.preemptible = sched::Preemptible::kRequeue});
  EXPECT_EQ(ShowJob(id)["spec"]["request"]["preemptible"], "requeue");
  Running(id);
  Turn();
  Done(id, 143, [](daemon::SupervisorStatus& s) { GaveWay(s, /*requeue=*/true); });
  Turn();
  EXPECT_EQ(State(id), "launching") << "back in line and handed to a supervisor again";
  EXPECT_EQ(Launched(), (Ids{id, id}));
  json job = ShowJob(id);
  ASSERT_EQ(job["attempts"].size(), 1u) << job.dump();
  EXPECT_EQ(job["attempts"][0]["state"], "cancelled");
  EXPECT_EQ(job["attempts"][0]["preempted"], true);
  EXPECT_EQ(job["attempts"][0]["exit_code"], 143);
  EXPECT_EQ(job["attempts"][0]["reason"], kGaveWay);
  EXPECT_EQ(job["retries_used"], 0);
  EXPECT_EQ(job["requeues"], 1);
  const std::string table = Call(Root(), {{"op", "queue"}, {"format", "table"}}).value("table", "");
  EXPECT_NE(table.find("requeued 1x"), std::string::npos) << table;
  EXPECT_EQ(table.find("retry 1/0"), std::string::npos) << table;
  RunToEnd(id, 0);
  EXPECT_EQ(State(id), "completed");
}

TEST_F(DaemonInProcPreemption, WithPreemptibleCancelTheJobThatGivesWayEndsCancelled) {
  StartDaemon();
  const std::int64_t id = SubmitOne({.preemptible = sched::Preemptible::kCancel});
  Running(id);
  Done(id, 143, [](daemon::SupervisorStatus& s) { GaveWay(s, /*requeue=*/false); });
  Turn();
  json job = ShowJob(id);
  EXPECT_EQ(job["state"], "cancelled");
  EXPECT_NE(job.value("reason", "").find("preempted: "), std::string::npos) << job.dump();
  EXPECT_EQ(Launched(), Ids{id});
}

TEST_F(DaemonInProcPreemption, AfterMaxPreemptionsPerMinutePreemptibleJobsWaitAMinute) {
  config_.max_preemptions_per_minute = 1;
  StartDaemon();
  const std::int64_t id = SubmitOne({.preemptible = sched::Preemptible::kRequeue});
  Running(id);
  Done(id, 143, [](daemon::SupervisorStatus& s) { GaveWay(s, /*requeue=*/true); });
  Turn();
  EXPECT_EQ(State(id), "pending");
  EXPECT_NE(ShowJob(id).value("reason", "").find("max_preemptions_per_minute allows 1"), std::string::npos)
      << ShowJob(id).dump();
  const std::int64_t firm = SubmitOne();
  EXPECT_EQ(Launched(), (Ids{id, firm})) << "a job that is not preemptible starts meanwhile";
  RunToEnd(firm, 0);
  clock_.Advance(61);
  Turn();
  EXPECT_EQ(Launched(), (Ids{id, firm, id})) << "a minute later it starts again";
}

}  // namespace
}  // namespace gpulane::test
