// Recovery after kill -9 of the daemon binary with real supervisors, each moment its own test: right
// after a submission was acknowledged, while jobs run, while jobs finish, and between choosing GPUs
// and starting jobs. A restarted daemon must have every acknowledged job, re-adopt running jobs,
// collect the exit codes of jobs that ended while it was down, run no job twice and hand out no GPU
// twice. Killed while idle, supervisors lost before their job started, and a damaged status file
// are the daemon's decisions alone: tests/unit/daemon_inproc_recovery_test.cc.
#include <signal.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <fmt/format.h>
#include <map>
#include <memory>
#include <set>
#include <thread>

#include "store/job_store.h"
#include "support/daemon_fixture.h"
#include "support/text.h"

namespace gpulane::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

bool Alive(pid_t pid) { return kill(pid, 0) == 0; }

std::vector<std::string> RecoveryArgs(std::vector<std::string> options, const std::vector<std::string>& argv) {
  options.push_back("--");
  options.insert(options.end(), argv.begin(), argv.end());
  return options;
}

// Job states as the (stopped) daemon left them in its database.
std::map<std::int64_t, std::string> StoredStates(const TestDaemon& d) {
  std::map<std::int64_t, std::string> out;
  auto store = store::JobStore::Open((d.state_dir() / "jobs.db").string());
  if (!store) {
    ADD_FAILURE() << store.error().message;
    return out;
  }
  store::JobFilter all;
  all.include_finished = true;
  auto jobs = (*store)->List(all);
  if (jobs)
    for (const auto& job : *jobs) out[job.id] = store::StateName(job.state);
  return out;
}

TEST(DaemonRecovery, KilledRightAfterSubmissionsWereAcknowledged) {
  TestDaemon d;
  const fs::path runs = d.work() / "runs.log";
  // Twenty submissions at once, straight over the socket, so that the kill follows the last
  // acknowledgement within microseconds; half held, half runnable (each appends its id to runs).
  std::vector<std::unique_ptr<RawConnection>> connections;
  for (int i = 0; i < 20; ++i) {
    connections.push_back(std::make_unique<RawConnection>(d.socket()));
    json request = d.SubmitRequest({"sh", "-c", "echo $GPULANE_JOB_ID >> \"$0\"", runs.string()}, i % 2 == 0);
    request["v"] = 2;
    ASSERT_TRUE(connections.back()->SendFrame(request.dump()));
  }
  std::vector<std::int64_t> held, runnable;
  for (int i = 0; i < 20; ++i) {
    auto reply = connections[i]->Read(30);
    ASSERT_TRUE(reply && reply->value("ok", false)) << (reply ? reply->dump() : "no reply");
    ((i % 2 == 0) ? held : runnable).push_back((*reply)["ids"][0].get<std::int64_t>());
  }
  d.Kill9();
  ASSERT_TRUE(d.Start());
  for (auto id : held) EXPECT_EQ(d.State(id), "held") << "job " << id;
  std::vector<std::string> wait = {"wait"};
  for (auto id : runnable) wait.push_back(Id(id));
  RunResult r = d.Gpulane(wait, {}, 120);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(LineCount(r.out), 10) << r.out;
  std::map<std::int64_t, int> ran;
  for (const auto& line : Lines(ReadFile(runs))) ran[std::stoll(line)]++;
  for (auto id : runnable) EXPECT_EQ(ran[id], 1) << "job " << id << " ran " << ran[id] << " times";
  EXPECT_EQ(ran.size(), runnable.size());
}

TEST(DaemonRecovery, KilledWhileJobsRunTheyGoOnAndTheirEndIsRecorded) {
  TestDaemon d;
  const fs::path log = d.work() / "marks.log", gate = d.work() / "gate";
  const std::int64_t ok = d.Submit(MarkedJob(log.string(), gate.string(), 0));
  const std::int64_t bad = d.Submit(MarkedJob(log.string(), gate.string(), 7));
  ASSERT_TRUE(d.WaitForState(ok, "running"));
  ASSERT_TRUE(d.WaitForState(bad, "running"));
  const auto supervisors = d.SupervisorPids();
  EXPECT_EQ(supervisors.size(), 2u);
  d.Kill9();
  ASSERT_TRUE(d.Start());
  // Re-adopted: the new daemon found each supervisor holding its job's lock.
  EXPECT_EQ(d.State(ok), "running") << "re-adopted";
  EXPECT_EQ(d.State(bad), "running");
  for (pid_t pid : supervisors) EXPECT_TRUE(Alive(pid)) << "supervisor " << pid << " ended with the daemon";
  auto marks = ReadMarks(log);
  EXPECT_EQ(CountMarks(marks, "end", ok) + CountMarks(marks, "end", bad), 0) << "the jobs were not ended";
  Touch(gate);
  RunResult wait_ok = d.Gpulane({"wait", Id(ok)});
  EXPECT_EQ(wait_ok.exit_code, 0) << wait_ok.out << wait_ok.err;
  RunResult wait_bad = d.Gpulane({"wait", Id(bad)});
  EXPECT_EQ(wait_bad.exit_code, 7) << wait_bad.out << wait_bad.err;
  EXPECT_EQ(wait_bad.out, Id(bad) + " failed 7\n");
  marks = ReadMarks(log);
  for (auto id : {ok, bad}) {
    EXPECT_EQ(CountMarks(marks, "start", id), 1) << "job " << id;
    EXPECT_EQ(CountMarks(marks, "end", id), 1) << "job " << id;
  }
  // Their GPUs are free again: a two-GPU job runs.
  const std::int64_t both = d.Submit({"-g", "2", "--", "true"});
  EXPECT_EQ(d.Gpulane({"wait", Id(both)}).exit_code, 0);
}

TEST(DaemonRecovery, JobsThatEndWhileTheDaemonIsDownAreCollected) {
  TestDaemon d;
  const fs::path log = d.work() / "marks.log", gate = d.work() / "gate";
  const std::int64_t ok = d.Submit(MarkedJob(log.string(), gate.string(), 0));
  const std::int64_t bad = d.Submit(MarkedJob(log.string(), gate.string(), 9));
  const std::int64_t after = d.Submit(RecoveryArgs({"--after", Id(ok)}, MarkedJob(log.string(), "", 0, 0)));
  const std::int64_t after_bad = d.Submit(RecoveryArgs({"--after", Id(bad)}, MarkedJob(log.string(), "", 0, 0)));
  ASSERT_TRUE(d.WaitForState(ok, "running"));
  ASSERT_TRUE(d.WaitForState(bad, "running"));
  d.Kill9();
  Touch(gate);
  // Both jobs end and their supervisors record it while no daemon runs.
  ASSERT_TRUE(Eventually([&] { return d.SupervisorPids().empty(); }, 30));
  auto marks = ReadMarks(log);
  EXPECT_EQ(CountMarks(marks, "end", ok), 1);
  EXPECT_EQ(CountMarks(marks, "end", bad), 1);
  ASSERT_TRUE(d.Start());
  RunResult r = d.Gpulane({"wait", Id(ok), Id(bad), Id(after), Id(after_bad)});
  EXPECT_EQ(r.out, fmt::format("{} completed 0\n{} failed 9\n{} completed 0\n{} cancelled\n", ok, bad, after, after_bad));
  EXPECT_EQ(r.exit_code, 9);
  marks = ReadMarks(log);
  for (auto id : {ok, bad, after}) EXPECT_EQ(CountMarks(marks, "start", id), 1) << "job " << id;
  EXPECT_EQ(CountMarks(marks, "start", after_bad), 0);
  json all = d.Queue({"--all"});
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[0]["exit_code"], 0);
  EXPECT_EQ(all[1]["exit_code"], 9);
  EXPECT_TRUE(all[0].contains("end_time") && all[1].contains("end_time"));
}

// A launch whose supervisor has not taken its lock is requeued after this grace (10 s by default),
// checked on this tick (1 s): short here, so the tests below do not wait 10 s for it.
const Env kShortGrace = {{"GPULANE_DAEMON_REQUEUE_GRACE", "1s"}, {"GPULANE_DAEMON_TICK", "100ms"}};

// Several one-GPU jobs on two GPUs; the daemon dies right after acknowledging them, when it has
// marked some launching (GPUs being chosen by their supervisors) and not started others.
TEST(DaemonRecovery, KilledBetweenChoosingGpusAndStartingJobs) {
  TestDaemon d({.daemon_env = kShortGrace});
  const fs::path log = d.work() / "marks.log";
  const auto job = MarkedJob(log.string(), "", 0, 0.3);
  json array = d.SubmitRequest(job);
  array["v"] = 2;
  array["array"] = {0, 1, 2, 3, 4, 5};
  RawConnection c1(d.socket()), c2(d.socket()), c3(d.socket());
  json single = d.SubmitRequest(job);
  single["v"] = 2;
  ASSERT_TRUE(c1.SendFrame(array.dump()) && c2.SendFrame(single.dump()) && c3.SendFrame(single.dump()));
  std::vector<std::int64_t> ids;
  for (RawConnection* c : {&c1, &c2, &c3}) {
    auto reply = c->Read(30);
    ASSERT_TRUE(reply && reply->value("ok", false)) << (reply ? reply->dump() : "no reply");
    for (const auto& id : (*reply)["ids"]) ids.push_back(id.get<std::int64_t>());
  }
  // The daemon answers right after the commit and launches the jobs after that: the kill comes
  // once some are durably marked launching (8 jobs of 0.3 s on 2 GPUs: most wait for a while).
  auto launching = [&] {
    int n = 0;
    for (const auto& [id, state] : StoredStates(d)) n += state == "launching";
    return n;
  };
  ASSERT_TRUE(Eventually([&] { return launching() > 0; }, 30));
  d.Kill9();
  ASSERT_EQ(ids.size(), 8u);
  // The kill hit the moment this test is about: jobs durably marked launching.
  EXPECT_GT(launching(), 0);
  ASSERT_TRUE(d.Start());
  std::vector<std::string> wait = {"wait"};
  for (auto id : ids) wait.push_back(Id(id));
  RunResult r = d.Gpulane(wait, {}, 120);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  auto marks = ReadMarks(log);
  for (auto id : ids) {
    EXPECT_EQ(CountMarks(marks, "start", id), 1) << "job " << id;
    EXPECT_EQ(CountMarks(marks, "end", id), 1) << "job " << id;
  }
  // No two jobs on one GPU at once.
  std::map<std::int64_t, std::pair<double, double>> span;
  std::map<std::int64_t, std::string> gpu;
  for (const auto& m : marks) {
    (m.kind == "start" ? span[m.id].first : span[m.id].second) = m.time;
    gpu[m.id] = m.gpus;
  }
  for (auto a : ids)
    for (auto b : ids)
      if (a < b && gpu[a] == gpu[b]) {
        EXPECT_TRUE(span[a].second <= span[b].first || span[b].second <= span[a].first)
            << "jobs " << a << " and " << b << " overlapped on GPU " << gpu[a];
      }
  std::set<std::string> used;
  for (const auto& [id, g] : gpu) used.insert(g);
  EXPECT_EQ(used, (std::set<std::string>{"0", "1"}));
}

// Found while benchmarking: a script removed a daemon's state folder (its own temporary one) after
// stopping the daemon, and the supervisors of its jobs went on for good, ignoring SIGTERM: each
// tried every second to record its job's end in a jobs folder that no longer existed, which no
// daemon could ever read. Now a supervisor whose jobs folder is gone stops its job and ends.
TEST(DaemonRecovery, ASupervisorWhoseJobsFolderWasRemovedEndsOnSigtermInsteadOfRetryingForever) {
  TestDaemon d;
  const std::int64_t id = d.Submit({"--", "sleep", "300"});
  ASSERT_TRUE(d.WaitForState(id, "running"));
  const auto supervisors = d.SupervisorPids();
  ASSERT_EQ(supervisors.size(), 1u);
  d.Kill9();
  fs::remove_all(d.state_dir());
  ASSERT_EQ(kill(supervisors[0], SIGTERM), 0);
  EXPECT_TRUE(Eventually([&] { return !Alive(supervisors[0]); }, 30)) << "the supervisor is still there after SIGTERM";
  EXPECT_TRUE(Eventually([&] { return d.JobPids().empty(); }, 30)) << "its job was not stopped";
}

}  // namespace
}  // namespace gpulane::test
