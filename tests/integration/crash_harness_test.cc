// The kill points of scripts/crash-harness.py that it found only now and then, made deterministic:
// a queued job's supervisor killed (SIGKILL) at one moment of its job's start, through the test
// fault point GPULANE_TEST_SUPERVISOR_DIES="<point>:<token file>" (daemon/supervisor.cc; the first
// supervisor that removes the token dies there, later ones go on). Whatever the moment, the job
// runs exactly once: put back in line when its command never started, recorded (failed, as nobody
// is left to read its exit status) and never started again when it did.
#include <signal.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fmt/format.h>
#include <string>

#include "support/daemon_fixture.h"
#include "support/text.h"

namespace gpulane::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A daemon whose supervisors die at `point` once (when they can remove the token file).
struct FaultyDaemon {
  explicit FaultyDaemon(const std::string& point)
      : token(fs::temp_directory_path() / fmt::format("gpulane-crash-token-{}-{}", getpid(), point)) {
    Touch(token);
    d = std::make_unique<TestDaemon>(DaemonOptions{
        .state = IdleGpus(1),
        .daemon_env = {{"GPULANE_TEST_SUPERVISOR_DIES", point + ":" + token.string()},
                       {"GPULANE_DAEMON_REQUEUE_GRACE", "1s"},
                       {"GPULANE_DAEMON_TICK", "100ms"}}});
  }
  ~FaultyDaemon() { fs::remove(token); }
  fs::path token;
  std::unique_ptr<TestDaemon> d;
};

// The supervisor window: killed after it recorded its job running and before the fork. The job
// never ran; it is requeued, run by a second supervisor, and completes, with one start.
TEST(CrashHarness, ASupervisorKilledAfterRecordingRunningBeforeTheExecIsRequeuedAndTheJobRunsOnce) {
  FaultyDaemon f("running");
  TestDaemon& d = *f.d;
  const fs::path log = d.work() / "marks.log";
  const std::int64_t id = d.Submit(MarkedJob(log.string(), "", 0, 0));
  RunResult r = d.Gpulane({"wait", Id(id)}, {}, 60);
  EXPECT_EQ(r.out, fmt::format("{} completed 0\n", id)) << r.err << d.Log();
  EXPECT_FALSE(fs::exists(f.token)) << "the fault point was reached (a supervisor died there)";
  EXPECT_EQ(CountMarks(ReadMarks(log), "start", id), 1);
  EXPECT_TRUE(Contains(d.Log(), fmt::format("job {} (", id)) && Contains(d.Log(), "before its command started"))
      << d.Log();
  json shown = d.Show(id);
  EXPECT_EQ(shown.value("state", ""), "completed") << shown.dump();
}

// Killed between the fork and the confirmation of the exec, and once the exec is confirmed: the
// job's command starts all the same (the child goes on without its supervisor), so it is recorded
// failed and never started a second time.
void ExpectRunsOnceAndIsRecordedFailed(const std::string& point) {
  FaultyDaemon f(point);
  TestDaemon& d = *f.d;
  const fs::path log = d.work() / "marks.log", gate = d.work() / "gate";
  const std::int64_t id = d.Submit(MarkedJob(log.string(), gate.string()));
  RunResult r = d.Gpulane({"wait", Id(id)}, {}, 60);
  EXPECT_EQ(r.out, fmt::format("{} failed\n", id)) << r.err << d.Log();
  EXPECT_FALSE(fs::exists(f.token)) << "the fault point was reached";
  EXPECT_TRUE(Contains(d.Show(id).value("reason", ""), "its supervisor ended without recording the job's end"));
  ASSERT_TRUE(Eventually([&] { return CountMarks(ReadMarks(log), "start", id) == 1; }, 30)) << "it ran";
  Touch(gate);
  ASSERT_TRUE(Eventually([&] { return CountMarks(ReadMarks(log), "end", id) == 1; }, 30));
  EXPECT_TRUE(Eventually([&] { return d.JobPids().empty(); }, 30));
  // Not started again, even by a restarted daemon; a job submitted after it runs (its GPU is free).
  d.Kill9();
  ASSERT_TRUE(d.Start());
  EXPECT_TRUE(d.RunJobNeedingEveryGpu());
  EXPECT_EQ(CountMarks(ReadMarks(log), "start", id), 1);
  EXPECT_EQ(d.State(id), "failed");
}

TEST(CrashHarness, ASupervisorKilledRightAfterForkingItsJobLeavesAJobThatRunsOnce) {
  ExpectRunsOnceAndIsRecordedFailed("forked");
}

TEST(CrashHarness, ASupervisorKilledAfterItsJobsExecLeavesAJobThatRunsOnce) {
  ExpectRunsOnceAndIsRecordedFailed("started");
}

// Killed once its job has ended and its GPUs' lease is released: the job's end was recorded before
// the release (a new user saw ended jobs listed as running on GPU0 while the next ran there: the
// end was written after the release, behind a usage query), so the job is completed with its exit
// code, not taken for a supervisor that ended without recording it.
TEST(CrashHarness, ASupervisorKilledAfterReleasingItsGpusHadRecordedTheJobsEndFirst) {
  FaultyDaemon f("released");
  TestDaemon& d = *f.d;
  const std::int64_t id = d.Submit({"--", "sh", "-c", "exit 3"});
  RunResult r = d.Gpulane({"wait", Id(id)}, {}, 60);
  EXPECT_EQ(r.out, fmt::format("{} failed 3\n", id)) << r.err << d.Log();
  // The end is known before the supervisor gets there (it was recorded before the release).
  EXPECT_TRUE(Eventually([&] { return !fs::exists(f.token); }, 30)) << "the fault point was reached";
  json shown = d.Show(id);
  EXPECT_EQ(shown.value("exit_code", -1), 3) << shown.dump();
  EXPECT_FALSE(Contains(shown.value("reason", ""), "without recording")) << shown.dump();
}

}  // namespace
}  // namespace gpulane::test
