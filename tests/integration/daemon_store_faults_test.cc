// Storage faults through the real binary (issue 9, items 15-17): a job store locked by another
// process while a job ends (and what submit, release and cancel print meanwhile), a state folder
// that fills up, a read-only jobs.db at start (and what show and queue print of a row that cannot
// be read), and `submit --idempotency-key` twice. The daemon's side of a submission, release or
// cancel the store refuses, of a store at start that cannot be trusted, of an unreadable row and
// of a submission retried with its key is tested in-process: tests/unit/daemon_inproc_store_faults_test.cc.
#include <sqlite3.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>

#include "support/daemon_fixture.h"
#include "support/small_tmpfs.h"
#include "support/sqlite_locker.h"
#include "support/text.h"

namespace gpulane::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr auto npos = std::string::npos;

// Another process's hold on the database (support/sqlite_locker.h). The daemon may be in a write of
// its own at this moment: wait for it as any writer would.
struct ExclusiveLock : SqliteLocker {
  explicit ExclusiveLock(const fs::path& db) : SqliteLocker(db.string(), 10000) {}
};

// Runs `sql` on the (stopped) daemon's database.
void ExecSql(const fs::path& db, const std::string& sql) {
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &raw), SQLITE_OK);
  EXPECT_EQ(sqlite3_exec(raw, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(raw);
  sqlite3_close(raw);
}

// The daemon refused to start: exit 13 (kExitStore), one line on stderr containing every `part`.
::testing::AssertionResult RefusedToStart(const RunResult& r, const std::vector<std::string>& parts) {
  auto fail = [&](const std::string& why) {
    return ::testing::AssertionFailure() << why << "\nexit " << r.exit_code << "\nstdout: " << r.out << "\nstderr: " << r.err;
  };
  if (r.exit_code != 13) return fail("exit code is not 13");
  if (!r.out.empty()) return fail("something on stdout");
  if (LineCount(r.err) != 1 || r.err.rfind("gpulane daemon: error: ", 0) != 0) return fail("not one error line");
  for (const auto& part : parts)
    if (r.err.find(part) == npos) return fail("no '" + part + "'");
  return ::testing::AssertionSuccess();
}

fs::path Db(const TestDaemon& d) { return d.state_dir() / "jobs.db"; }

// ---- item 15: a write that fails -----------------------------------------------------------

TEST(DaemonStoreFaults, AJobThatEndsWhileTheStoreIsLockedIsRecordedOnceTheLockGoesAndNeverRunsAgain) {
  TestDaemon d({.daemon_env = {{"GPULANE_DAEMON_STORE_BUSY_TIMEOUT", "200ms"}, {"GPULANE_DAEMON_TICK", "100ms"}}});
  const fs::path log = d.work() / "marks.log", gate = d.work() / "gate";
  const std::int64_t id = d.Submit(MarkedJob(log.string(), gate.string(), 5));
  ASSERT_TRUE(d.WaitForState(id, "running"));
  const std::int64_t held = d.Submit({"--hold", "--", "true"});
  const fs::path status = d.state_dir() / "jobs" / (Id(id) + ".status.json");
  auto lock = std::make_unique<ExclusiveLock>(Db(d));
  // What the commands that must write print meanwhile: one line, exit 1, nothing done.
  RunResult submit = d.Gpulane({"submit", "--", "true"});
  EXPECT_TRUE(IsGpulaneError(submit, 1, "the job could not be stored: ")) << submit.err;
  EXPECT_NE(submit.err.find("database is locked"), npos) << submit.err;
  RunResult release = d.Gpulane({"release", Id(held)});
  EXPECT_TRUE(IsGpulaneError(release, 1, "the job store refused to record the release of 1 job")) << release.err;
  EXPECT_NE(release.err.find("they are not released; try again"), npos) << release.err;
  RunResult cancel = d.Gpulane({"cancel", Id(held)});
  EXPECT_TRUE(IsGpulaneError(cancel, 1, "the job store refused to record the cancellation of 1 job")) << cancel.err;
  Touch(gate);  // the job ends; its supervisor records it; the daemon cannot store it
  const std::string not_stored = "cannot store the end of job " + Id(id) + " (failed): ";
  ASSERT_TRUE(Eventually([&] { return d.Log().find(not_stored) != npos; }, 30)) << d.Log();
  RunResult queue = d.Gpulane({"queue"});
  EXPECT_EQ(queue.exit_code, 0);
  EXPECT_EQ(LineCount(queue.err), 1) << queue.err;
  EXPECT_EQ(queue.err.rfind("gpulane: warning: the job store is unavailable since ", 0), 0u) << queue.err;
  EXPECT_NE(queue.err.find(": database is locked; 1 job update waiting\n"), npos) << queue.err;
  RunResult status_view = d.Gpulane({"status"});
  EXPECT_EQ(status_view.exit_code, 0) << status_view.err;
  EXPECT_NE(status_view.out.find("warning: the job store is unavailable since "), npos) << status_view.out;
  EXPECT_TRUE(fs::exists(status)) << "the job's record is kept until its end is stored";

  lock->Release();
  RunResult wait = d.Gpulane({"wait", Id(id)});
  EXPECT_EQ(wait.exit_code, 5) << wait.out << wait.err;
  EXPECT_EQ(wait.out, Id(id) + " failed 5\n");
  EXPECT_FALSE(fs::exists(status)) << "removed once the end is durable";
  EXPECT_EQ(d.Gpulane({"queue"}).err, "") << "the warning goes with the trouble";
  EXPECT_NE(d.Log().find("the job store takes writes again"), npos) << d.Log();

  // A restart finds it done, and does not run it again.
  d.Kill9();
  ASSERT_TRUE(d.Start());
  json all = d.Queue({"--all"});
  ASSERT_EQ(all.size(), 2u) << "the refused submission is not there: " << all.dump();
  EXPECT_EQ(all[0]["state"], "failed");
  EXPECT_EQ(all[0]["exit_code"], 5);
  EXPECT_EQ(all[1]["id"], held);
  EXPECT_EQ(all[1]["state"], "held") << "neither released nor cancelled";
  ASSERT_TRUE(d.RunJobNeedingEveryGpu());
  EXPECT_EQ(CountMarks(ReadMarks(log), "start", id), 1) << "the job ran exactly once";
}

// scripts/storage-faults.py state-disk-full-finish: the job ends while the state folder is full.
// Its supervisor records the end all the same (in the space it set aside at the job's start) and
// exits; the daemon keeps the end (and the job's files) until the store takes it, records it
// completed once there is room again, and a restarted daemon neither loses nor repeats it.
TEST(DaemonStoreFaults, AJobThatEndsWhileTheStateFolderIsFullIsRecordedOnceThereIsRoomAndNeverRunsAgain) {
  if (geteuid() != 0) GTEST_SKIP() << "mounting a tmpfs needs root";
  TestDaemon d({.start = false, .daemon_env = {{"GPULANE_DAEMON_TICK", "100ms"}}});
  SmallTmpfs state(d.state_dir());
  if (!state.mounted()) GTEST_SKIP() << "cannot mount a tmpfs: " << state.why();
  ASSERT_TRUE(d.Start());
  const fs::path log = d.work() / "marks.log", gate = d.work() / "gate";
  const std::int64_t id = d.Submit(MarkedJob(log.string(), gate.string(), 0));
  ASSERT_TRUE(d.WaitForState(id, "running"));
  state.Fill();
  {
    std::ofstream probe(d.state_dir() / ".probe", std::ios::binary);
    probe << std::string(4096, 'x');
    probe.flush();
    EXPECT_FALSE(probe.good()) << "the state folder is full";
  }
  fs::remove(d.state_dir() / ".probe");
  Touch(gate);
  ASSERT_TRUE(Eventually([&] { return CountMarks(ReadMarks(log), "end", id) == 1; }, 30));
  EXPECT_TRUE(Eventually([&] { return d.SupervisorPids().empty(); }, 30))
      << "the supervisor recorded the job's end on the full folder and exited";
  EXPECT_NE(d.State(id), "failed") << "not taken for a supervisor that died";
  state.Free();
  RunResult wait = d.Gpulane({"wait", Id(id)});
  EXPECT_EQ(wait.out, Id(id) + " completed 0\n") << wait.err << d.Log();
  d.Kill9();
  ASSERT_TRUE(d.Start());
  EXPECT_EQ(d.State(id), "completed");
  ASSERT_TRUE(d.RunJobNeedingEveryGpu());
  EXPECT_EQ(CountMarks(ReadMarks(log), "start", id), 1) << "the job ran exactly once";
}

// ---- item 16: a store that cannot be trusted at start ------------------------------------

// A read-only jobs.db stops the daemon at its start (exit 13, one line). Once it starts, a row that
// cannot be read is what show and queue print of it: exit 13 naming the job, a warning beside the
// listing (the daemon's side: DaemonInProcStoreFaults.ARowThatCannotBeReadIsReportedByIdAndKept).
TEST(DaemonStoreFaults, AReadOnlyStoreIsRefusedAtStart) {
  TestDaemon d;
  const std::int64_t bad = d.Submit({"--hold", "--name", "bad", "--", "true"});
  d.Kill9();
  ExecSql(Db(d), "UPDATE jobs SET spec = '{broken' WHERE id = " + Id(bad));
  ASSERT_EQ(chmod(Db(d).c_str(), 0444), 0);
  RunResult r = d.Gpulane({"daemon", "--user"});
  EXPECT_TRUE(RefusedToStart(r, {"jobs.db is read-only (mode 0444)"}));
  ASSERT_EQ(chmod(Db(d).c_str(), 0600), 0);
  ASSERT_TRUE(d.Start());
  RunResult show = d.Gpulane({"show", Id(bad)});
  EXPECT_EQ(show.exit_code, 13) << show.out << show.err;
  EXPECT_EQ(show.err, "gpulane: error: job " + Id(bad) +
                          " is damaged in the database (its spec is not JSON): it is kept there as it is and not run; "
                          "see the daemon's log\n");
  RunResult queue = d.Gpulane({"queue", "--json"});
  EXPECT_EQ(queue.exit_code, 0);
  EXPECT_EQ(queue.out, "[]\n");
  EXPECT_EQ(queue.err, "gpulane: warning: job " + Id(bad) +
                           " cannot be read from the job store: kept there as it is, not run (see the daemon's log)\n");
}

// ---- item 17: a submission sent twice --------------------------------------------------------

TEST(DaemonStoreFaults, SubmitWithTheSameIdempotencyKeyTwicePrintsTheSameJob) {
  TestDaemon d;
  RunResult first = d.Gpulane({"submit", "--hold", "--idempotency-key", "nightly-2026-12-01", "--", "true"});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_EQ(first.err, "");
  RunResult second = d.Gpulane({"submit", "--hold", "--idempotency-key", "nightly-2026-12-01", "--", "true"});
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_EQ(second.out, first.out);
  EXPECT_EQ(second.err, "gpulane: warning: idempotency key nightly-2026-12-01: submitted before as job " +
                            Lines(first.out).at(0) + "; nothing new was queued\n");
  // Without a key of one's own every submit gets a fresh one: two submits, two jobs.
  RunResult third = d.Gpulane({"submit", "--hold", "--", "true"});
  RunResult fourth = d.Gpulane({"submit", "--hold", "--", "true"});
  EXPECT_NE(third.out, fourth.out);
  EXPECT_EQ(d.Queue({"--all"}).size(), 3u);
  EXPECT_TRUE(IsGpulaneError(d.Gpulane({"submit", "--idempotency-key", "no spaces", "--", "true"}), 2,
                             "\"idempotency_key\" must be a string of 1 to 128 letters, digits and - _ . :"));
}

}  // namespace
}  // namespace gpulane::test
