// Storage faults in-process (tests/support/inproc_daemon.h; issue 9, items 15-17): the daemon's
// real SQLite store locked by another connection (as an admin's sqlite3 shell would), a store at
// start that cannot be trusted, and a submission sent twice with one idempotency key. What the
// daemon answers, stores and signals. Through the binary stay a job that ends while the store is
// locked (with what submit, release and cancel print then) and a state folder that fills up, a
// read-only store at start (exit 13): tests/integration/daemon_store_faults_test.cc.
#include <sqlite3.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "support/harness.h"
#include "support/inproc_daemon.h"
#include "support/text.h"
#include "support/sqlite_locker.h"

namespace gpulane::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Ids = std::vector<std::int64_t>;

class DaemonInProcStoreFaults : public InProcDaemonTest {
 protected:
  void SetUp() override {
    InProcDaemonTest::SetUp();
    settings_.store_busy_timeout_s = 0.1;
  }
  std::string Db() const { return paths_.state_dir + "/jobs.db"; }
  std::string Marker() const { return paths_.state_dir + "/jobs.db.known"; }
  void ExecSql(const std::string& sql) {
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(Db().c_str(), &raw), SQLITE_OK);
    EXPECT_EQ(sqlite3_exec(raw, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(raw);
    sqlite3_close(raw);
  }
};

// Was DaemonStoreFaults.ASubmissionWhileTheStoreIsLockedIsRefusedAndNothingIsQueued.
TEST_F(DaemonInProcStoreFaults, ASubmissionWhileTheStoreIsLockedIsRefusedAndNothingIsQueued) {
  StartDaemon();
  SqliteLocker lock(Db(), 10000);
  json refused;
  EXPECT_TRUE(Submit(Root(), {}, &refused).empty());
  EXPECT_TRUE(Contains(refused.value("error", ""), "the job could not be stored: ")) << refused.dump();
  EXPECT_TRUE(Contains(refused.value("error", ""), "database is locked")) << refused.dump();
  lock.Release();
  Turn();
  EXPECT_EQ(Queue(Root(), {{"all", true}}).size(), 0u) << "an unacknowledged submission is not queued";
  EXPECT_TRUE(Launched().empty());
}

// Was DaemonStoreFaults.AReleaseTheStoreRefusesIsReportedAsFailedAndTheJobStaysHeld: a release is
// stored first; a part the store refuses is reported as failed and its jobs stay held, also once
// the store takes writes again.
TEST_F(DaemonInProcStoreFaults, AReleaseTheStoreRefusesIsReportedAsFailedAndTheJobStaysHeld) {
  StartDaemon();
  const std::int64_t id = SubmitOne({.hold = true});
  auto lock = std::make_unique<SqliteLocker>(Db(), 10000);
  json reply = Control(Root(), "release", {id});
  EXPECT_FALSE(reply.value("ok", true)) << reply.dump();
  EXPECT_TRUE(Contains(reply.dump(), "the job store refused to record the release of 1 job")) << reply.dump();
  EXPECT_TRUE(Contains(reply.dump(), "they are not released; try again")) << reply.dump();
  EXPECT_FALSE(reply.contains("changed") && !reply["changed"].empty()) << "nothing reported released: " << reply.dump();
  EXPECT_EQ(State(id), "held");
  lock.reset();
  clock_.Advance(10 * settings_.tick_s);
  Turn(10);
  EXPECT_EQ(State(id), "held") << "not released behind the client's back once the store takes writes";
  EXPECT_EQ(StoredState(id), "held");
  EXPECT_TRUE(Launched().empty());
  reply = Control(Root(), "release", {id});
  EXPECT_TRUE(reply.value("ok", false)) << reply.dump();
  EXPECT_EQ(Launched(), Ids{id});
}

// Was DaemonStoreFaults.ACancelTheStoreRefusesLeavesItsRunningJobRunning: a part's running jobs are
// signalled only once its write is stored; the refused cancel leaves the job running, and it ends
// as its own command ends.
TEST_F(DaemonInProcStoreFaults, ACancelTheStoreRefusesLeavesItsRunningJobRunning) {
  StartDaemon();
  const std::int64_t running = SubmitOne();
  Running(running);
  Turn();
  ASSERT_EQ(State(running), "running");
  const std::int64_t held = SubmitOne({.hold = true});
  auto lock = std::make_unique<SqliteLocker>(Db(), 10000);
  json reply = Control(Root(), "cancel", {running, held});
  EXPECT_FALSE(reply.value("ok", true)) << reply.dump();
  EXPECT_TRUE(Contains(reply.dump(), "the job store refused to record the cancellation of 2 jobs")) << reply.dump();
  EXPECT_FALSE(reply.contains("cancelled") && !reply["cancelled"].empty()) << "nothing reported cancelled: " << reply.dump();
  EXPECT_TRUE(SignalsTo(running).empty()) << "its supervisor was signalled";
  lock.reset();
  Turn();
  EXPECT_TRUE(SignalsTo(running).empty()) << "nor later";
  Done(running, 5);  // its own command ends
  Turn();
  json shown = ShowJob(running);
  EXPECT_EQ(shown["state"], "failed") << "ended by its own command, not by the refused cancel: " << shown.dump();
  EXPECT_EQ(shown["exit_code"], 5);
  EXPECT_EQ(State(held), "held");
  EXPECT_EQ(Launched(), Ids{running});
}

// ---- a store that cannot be trusted at start ---------------------------------------------------

// Was DaemonStoreFaults.AZeroLengthStoreWhereAStoreWithJobsWasIsRefused.
TEST_F(DaemonInProcStoreFaults, AZeroLengthStoreWhereAStoreWithJobsWasIsRefused) {
  StartDaemon();
  const std::int64_t id = SubmitOne({.hold = true});
  Crash();
  StartDaemon();  // records the store's ids at start
  Crash();
  fs::resize_file(Db(), 0);
  fs::remove(Db() + "-wal");
  fs::remove(Db() + "-shm");
  Status refused = TryStartDaemon();
  ASSERT_FALSE(refused.ok());
  const std::string& why = refused.error().message;
  EXPECT_TRUE(Contains(why, "is empty (0 bytes), but " + Marker() + " records a store with job ids up to " +
                                std::to_string(id)))
      << why;
  EXPECT_TRUE(Contains(why, "remove " + Marker() + " to start afresh")) << why;
  EXPECT_EQ(why.find('\n'), std::string::npos) << "one line: " << why;
  // The admin's way out: without the marker it starts on the empty store.
  fs::remove(Marker());
  StartDaemon();
  EXPECT_EQ(Queue(Root(), {{"all", true}}).size(), 0u);
}

// Was DaemonLifecycle.DamagedDatabaseStopsTheDaemonWithAClearMessage (how `gpulane daemon` prints a
// start it refuses, one line and its exit code, stays through the binary as
// DaemonLifecycle.SecondDaemonOnTheSameStateIsRefused): a jobs.db whose header was overwritten stops
// the start, naming the file and saying it is damaged, instead of starting on an empty queue; the
// file is left for the admin as it was, and no daemon serves.
TEST_F(DaemonInProcStoreFaults, ADamagedDatabaseStopsTheStartWithAClearMessage) {
  StartDaemon();
  SubmitOne({.hold = true});
  Crash();
  fs::remove(Db() + "-wal");
  fs::remove(Db() + "-shm");
  {
    std::fstream f(Db(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(0);
    f << "this is not an SQLite database, it is damaged";
  }
  const std::string before = ReadFile(Db());
  Status refused = TryStartDaemon();
  ASSERT_FALSE(refused.ok()) << "a daemon started on a damaged job database";
  const std::string& why = refused.error().message;
  EXPECT_TRUE(Contains(why, Db())) << why;
  EXPECT_TRUE(Contains(why, "damaged")) << why;
  EXPECT_EQ(why.find('\n'), std::string::npos) << "one line: " << why;
  EXPECT_EQ(ReadFile(Db()), before) << "the damaged file is left for the admin, not replaced";
  EXPECT_EQ(daemon_, nullptr) << "no daemon serves";
}

// Was DaemonStoreFaults.AStoreWithFewerJobsThanTheMarkerRecordsIsRefused: as an older backup would
// have it, without the newest job and with AUTOINCREMENT's record of the largest id as it was.
TEST_F(DaemonInProcStoreFaults, AStoreWithFewerJobsThanTheMarkerRecordsIsRefused) {
  StartDaemon();
  SubmitOne({.hold = true});
  const std::int64_t second = SubmitOne({.hold = true});
  Crash();
  StartDaemon();
  Crash();
  ExecSql("DELETE FROM jobs WHERE id = " + std::to_string(second) + "; UPDATE sqlite_sequence SET seq = " +
          std::to_string(second - 1) + " WHERE name = 'jobs'");
  Status refused = TryStartDaemon();
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(Contains(refused.error().message, "has job ids up to " + std::to_string(second - 1) + ", but"))
      << refused.error().message;
  EXPECT_TRUE(Contains(refused.error().message, "records ids up to " + std::to_string(second))) << refused.error().message;
}

// Was DaemonStoreFaults.ARowThatCannotBeReadIsReportedByIdAndKept: logged, named by show, warned of
// by queue, its id never given again, its row left as it was.
TEST_F(DaemonInProcStoreFaults, ARowThatCannotBeReadIsReportedByIdAndKept) {
  StartDaemon();
  const std::int64_t good = SubmitOne({.name = "good", .hold = true});
  const std::int64_t bad = SubmitOne({.name = "bad", .hold = true});
  Crash();
  ExecSql("UPDATE jobs SET spec = '{broken' WHERE id = " + std::to_string(bad));
  CaptureLog();
  StartDaemon();
  const std::string logged = Logged();
  EXPECT_TRUE(Contains(logged, "job " + std::to_string(bad) +
                                   " is damaged in the database (its spec is not JSON): kept there as it is and not run"))
      << logged;
  json show = Call(Root(), {{"op", "show"}, {"id", bad}});
  EXPECT_FALSE(show.value("ok", true)) << show.dump();
  EXPECT_EQ(show.value("error", ""), "job " + std::to_string(bad) +
                                         " is damaged in the database (its spec is not JSON): it is kept there as it is "
                                         "and not run; see the daemon's log")
      << "not 'no job " << bad << "'";
  json queue = Call(Root(), {{"op", "queue"}});
  ASSERT_TRUE(queue.value("ok", false)) << queue.dump();
  ASSERT_EQ(queue["jobs"].size(), 1u) << queue.dump();
  EXPECT_EQ(queue["jobs"][0]["id"], good);
  EXPECT_TRUE(Contains(queue["warnings"].dump(), "job " + std::to_string(bad) +
                                                     " cannot be read from the job store: kept there as it is, not run "
                                                     "(see the daemon's log)"))
      << queue.dump();
  EXPECT_GT(SubmitOne({.hold = true}), bad) << "new jobs never take its id";
  Crash();
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(Db().c_str(), &raw), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(raw, ("SELECT spec FROM jobs WHERE id = " + std::to_string(bad)).c_str(), -1, &stmt, nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW) << "kept, not dropped";
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0)), "{broken");
  sqlite3_finalize(stmt);
  sqlite3_close(raw);
}

// ---- a submission sent twice ------------------------------------------------------------------

// Was DaemonStoreFaults.ASubmissionRetriedWithItsKeyAfterTheClientDiedIsQueuedOnce.
TEST_F(DaemonInProcStoreFaults, ASubmissionRetriedWithItsKeyAfterTheClientDiedIsQueuedOnce) {
  StartDaemon();
  json request = SubmitRequest({.hold = true});
  request["idempotency_key"] = "0123456789abcdef0123456789abcdef";
  const int dying = Connect(Root());
  Send(dying, FrameOf(request));
  Disconnect(dying);  // the client is gone before its answer
  Turn(5);
  json reply = Call(Root(), request);
  ASSERT_TRUE(reply.value("ok", false)) << reply.dump();
  EXPECT_EQ(reply["repeated"], true);
  json all = Queue(Root(), {{"all", true}});
  ASSERT_EQ(all.size(), 1u) << "one job for the two sends: " << all.dump();
  EXPECT_EQ(reply["ids"], json::array({all[0]["id"]}));

  // Both sent before either is answered (two connections; often one group commit): one job.
  request["idempotency_key"] = "same-turn";
  const int a = Connect(Root()), b = Connect(Root());
  Send(a, FrameOf(request));
  Send(b, FrameOf(request));
  auto first = Read(a), second = Read(b);
  ASSERT_TRUE(first && second && first->value("ok", false) && second->value("ok", false));
  EXPECT_EQ((*first)["ids"], (*second)["ids"]);
  EXPECT_EQ(Queue(Root(), {{"all", true}}).size(), 2u);

  // An array's key: the repeat gets every task's id and the array's id.
  request["idempotency_key"] = "an-array";
  request["array"] = {0, 1, 2};
  json tasks = Call(Root(), request), again = Call(Root(), request);
  ASSERT_TRUE(tasks.value("ok", false)) << tasks.dump();
  EXPECT_EQ(again["ids"], tasks["ids"]);
  EXPECT_EQ(again["array_job_id"], tasks["array_job_id"]);
  EXPECT_EQ(Queue(Root(), {{"all", true}}).size(), 5u);
}

}  // namespace
}  // namespace gpulane::test
