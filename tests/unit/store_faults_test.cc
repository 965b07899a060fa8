// Storage faults, in-process: a job table on a file-backed store that another connection locks
// (BEGIN EXCLUSIVE, as an admin's sqlite3 shell or a backup tool may), rows that cannot be read,
// read-only files, the store's marker, and the idempotency keys of schema 5 with its migration; and
// the table's cancels, holds and idle cancels when their writes fail (nothing changed, nobody
// signalled).
#include <fcntl.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>

#include "daemon/job_files.h"
#include "daemon/job_table.h"
#include "daemon/store_marker.h"
#include "os/file_system.h"
#include "store/job_store.h"
#include "support/harness.h"
#include "support/recording_launcher.h"
#include "support/sqlite_locker.h"
#include "util/clock.h"

namespace gpulane::daemon {
namespace {

namespace fs = std::filesystem;
using store::Job;
using store::JobState;

using Locker = test::SqliteLocker;

Job MakeJob(std::uint32_t uid = 1000) {
  Job job;
  job.spec.request.uid = uid;
  job.gid = uid;
  job.spec.request.user = "alice";
  job.spec.argv = {"true"};
  job.spec.cwd = "/tmp";
  job.spec.request.submit_time_s = 1.0;
  return job;
}

class StoreFaultsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/gpulane-store-faults-test-XXXXXX";
    dir_ = mkdtemp(dir);
    fs::create_directories(jobs_dir());
    OpenStore();
  }
  void TearDown() override {
    for (auto& [id, fd] : locks_) close(fd);
    table_.reset();
    store_.reset();
    fs::remove_all(dir_);
  }
  void OpenStore() {
    auto store = store::JobStore::Open(db_path());
    ASSERT_TRUE(store) << store.error().message;
    store_ = std::move(store).value();
  }

  std::string db_path() const { return (dir_ / "jobs.db").string(); }
  std::string jobs_dir() const { return (dir_ / "jobs").string(); }
  JobFiles Files(std::int64_t id) { return JobFiles(files_, jobs_dir(), id); }

  JobTable& Table() {
    if (!table_)
      table_ = std::make_unique<JobTable>(*store_, jobs_dir(), clock_, files_, launcher_, limits_,
                                          [this](const std::string& line) { log_.push_back(line); });
    return *table_;
  }
  // A daemon that dies: its table is gone, the store and the files stay.
  void DropTable() { table_.reset(); }

  std::int64_t Stored(JobState state) {
    std::vector<Job> jobs = {MakeJob()};
    auto ids = store_->Insert(jobs, false);
    EXPECT_TRUE(ids) << ids.error().message;
    jobs[0].state = state;
    EXPECT_TRUE(store_->Update({&jobs[0]}).ok());
    return jobs[0].id;
  }
  Job StoredJob(std::int64_t id) {
    auto job = store_->Get(id);
    EXPECT_TRUE(job && *job) << "job " << id;
    return job && *job ? **job : Job{};
  }
  std::string StoredState(std::int64_t id) { return store::StateName(StoredJob(id).state); }
  std::string TableState(std::int64_t id) {
    auto it = Table().active().find(id);
    return it == Table().active().end() ? "" : store::StateName(it->second.state);
  }
  int CountLogged(const std::string& part) const {
    int n = 0;
    for (const auto& line : log_) n += line.find(part) != std::string::npos;
    return n;
  }

  void HoldLock(std::int64_t id) {
    int fd = open(Files(id).lock_path().c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(flock(fd, LOCK_EX | LOCK_NB), 0);
    locks_[id] = fd;
  }
  void ReleaseLock(std::int64_t id) {
    close(locks_.at(id));
    locks_.erase(id);
  }
  void Report(std::int64_t id, SupervisorStatus status) { ASSERT_TRUE(Files(id).WriteStatus(status).ok()); }
  static SupervisorStatus Running() {
    SupervisorStatus s;
    s.phase = "running";
    s.pid = static_cast<pid_t>(test::UnusedPid());
    s.start_time = 1'700'000'100.0;
    s.gpu_uuids = {"GPU-1"};
    return s;
  }
  static SupervisorStatus Done(int exit_code) {
    SupervisorStatus s = Running();
    s.phase = "done";
    s.exit_code = exit_code;
    s.end_time = 1'700'000'200.0;
    return s;
  }
  // A job the table adopted as running, its supervisor (the test) holding its lock.
  std::int64_t AdoptedRunningJob() {
    const std::int64_t id = Stored(JobState::kLaunching);
    HoldLock(id);
    Report(id, Running());
    EXPECT_TRUE(Table().Recover());
    EXPECT_EQ(StoredState(id), "running");
    return id;
  }
  // The supervisor reports the end and exits.
  void SupervisorEnds(std::int64_t id, int exit_code) {
    Report(id, Done(exit_code));
    ReleaseLock(id);
  }
  void Turn() {
    Table().CheckSupervisors();
    Table().LaunchEligible();
    Table().FlushDirty();
  }

  fs::path dir_;
  os::SystemFileSystem files_;  ///< the marker's and the job files: the real ones, beside the real store
  std::unique_ptr<store::JobStore> store_;
  FakeClock clock_;
  test::RecordingLauncher launcher_;
  // Short lock waits: each failed write costs the test 20 ms, each retry 5 ms; retried every turn
  // (the fake clock stands still).
  JobTableLimits limits_{10, 4, 20, 5, 0};
  std::vector<std::string> log_;
  std::map<std::int64_t, int> locks_;
  std::unique_ptr<JobTable> table_;
};

// ---- item 15: failed writes ----------------------------------------------------------------

// A failure to retry (--retry) whose retry cannot be stored: the job stays as it was, with its
// supervisor's record, until a turn stores the retry; only then are the files removed.
TEST_F(StoreFaultsTest, ARetryThatCannotBeStoredWaitsWithItsRecordForALaterTurn) {
  std::vector<Job> jobs = {MakeJob()};
  jobs[0].spec.retries = 1;
  ASSERT_TRUE(store_->Insert(jobs, false));
  const std::int64_t id = jobs[0].id;
  jobs[0].state = JobState::kLaunching;
  ASSERT_TRUE(store_->Update({&jobs[0]}).ok());
  HoldLock(id);
  Report(id, Running());
  ASSERT_TRUE(Table().Recover());
  Locker lock(db_path());
  SupervisorEnds(id, 3);
  for (int i = 0; i < 3; ++i) Turn();
  EXPECT_EQ(StoredState(id), "running");
  EXPECT_EQ(TableState(id), "running") << "not requeued before the retry is durable";
  EXPECT_TRUE(fs::exists(Files(id).status_path())) << "the attempt's record stays";
  EXPECT_TRUE(launcher_.started.empty());
  EXPECT_EQ(CountLogged("cannot store the retry of job"), 1);
  lock.Release();
  Turn();
  Job stored = StoredJob(id);
  EXPECT_EQ(std::string(store::StateName(stored.state)), "launching") << "retried, and launched in the same turn";
  ASSERT_EQ(stored.attempts.size(), 1u);
  EXPECT_EQ(stored.attempts[0].exit_code, 3);
  EXPECT_EQ(launcher_.started, std::vector<std::int64_t>{id});
}

TEST_F(StoreFaultsTest, AnEndThatCannotBeStoredKeepsTheJobAndItsFilesUntilALaterTurnStoresIt) {
  const std::int64_t id = AdoptedRunningJob();
  Locker lock(db_path());
  SupervisorEnds(id, 3);
  Turn();
  EXPECT_EQ(StoredState(id), "running") << "the store was locked: nothing could be written";
  EXPECT_EQ(TableState(id), "failed") << "the table keeps the ended job until its end is stored";
  EXPECT_TRUE(Table().EndUnstored(id));
  EXPECT_TRUE(fs::exists(Files(id).status_path())) << "its record stays until the end is durable";
  ASSERT_TRUE(Table().store_trouble());
  EXPECT_EQ(Table().UnstoredUpdates(), 1u);
  const std::string line = Table().StoreTroubleLine();
  EXPECT_EQ(line.rfind("the job store is unavailable since ", 0), 0u) << line;
  EXPECT_NE(line.find(": database is locked; 1 job update waiting"), std::string::npos) << line;
  EXPECT_EQ(CountLogged("the job store is unavailable: "), 1);
  // Every later turn tries again; said once, not on every turn.
  for (int i = 0; i < 3; ++i) Turn();
  EXPECT_EQ(StoredState(id), "running");
  EXPECT_EQ(CountLogged("the job store is unavailable: "), 1);
  EXPECT_EQ(CountLogged("cannot store the end of job"), 1);

  lock.Release();
  Turn();
  Job stored = StoredJob(id);
  EXPECT_EQ(std::string(store::StateName(stored.state)), "failed");
  EXPECT_EQ(stored.exit_code, 3);
  EXPECT_EQ(stored.end_time, 1'700'000'200.0);
  EXPECT_EQ(TableState(id), "") << "forgotten once stored";
  EXPECT_FALSE(fs::exists(Files(id).status_path())) << "its files go once its end is durable";
  EXPECT_FALSE(Table().store_trouble());
  EXPECT_EQ(Table().StoreTroubleLine(), "");
  EXPECT_EQ(CountLogged("the job store takes writes again"), 1);
  EXPECT_TRUE(launcher_.started.empty());
}

TEST_F(StoreFaultsTest, ADaemonThatDiesBeforeTheEndIsStoredCollectsItAfterTheRestartAndNeverStartsItAgain) {
  const std::int64_t id = AdoptedRunningJob();
  {
    Locker lock(db_path());
    SupervisorEnds(id, 4);
    Turn();
    ASSERT_TRUE(Table().EndUnstored(id));
    DropTable();
  }
  ASSERT_TRUE(Table().Recover());
  Job stored = StoredJob(id);
  EXPECT_EQ(std::string(store::StateName(stored.state)), "failed");
  EXPECT_EQ(stored.exit_code, 4);
  for (int i = 0; i < 3; ++i) {
    clock_.Advance(3600);
    Turn();
  }
  EXPECT_TRUE(launcher_.started.empty()) << "an ended job is never started again";
}

TEST_F(StoreFaultsTest, NothingIsLaunchedWhileTheStoreTakesNoWritesAndTheQueueSaysWhy) {
  const std::int64_t id = Stored(JobState::kPending);
  ASSERT_TRUE(Table().Recover());
  {
    Locker lock(db_path());
    Turn();
    EXPECT_TRUE(launcher_.started.empty()) << "a launch must be stored before its supervisor starts";
    EXPECT_EQ(TableState(id), "pending") << "not left 'launching' without a supervisor";
    EXPECT_EQ(Table().active().at(id).reason, "not started: the job store is unavailable");
    EXPECT_TRUE(Table().store_trouble());
    Turn();
    EXPECT_TRUE(launcher_.started.empty());
  }
  Turn();  // the launch's own write finds the store free again
  EXPECT_FALSE(Table().store_trouble());
  EXPECT_EQ(launcher_.started, std::vector<std::int64_t>{id});
  EXPECT_EQ(StoredState(id), "launching");
  EXPECT_EQ(Table().active().at(id).reason, "joining the line for GPUs (its supervisor is starting)");
}

TEST_F(StoreFaultsTest, ARunningJobWhoseRecordIsGoneIsFailedNotRequeued) {
  // Stored as running, but no status file and no supervisor (the files of the old bug were removed).
  const std::int64_t id = Stored(JobState::kRunning);
  ASSERT_TRUE(Table().Recover());
  clock_.Advance(limits_.requeue_grace_s * 10);
  Turn();
  EXPECT_EQ(StoredState(id), "failed");
  EXPECT_TRUE(launcher_.started.empty()) << "a job that ran is never started again";
}

// Invariant 3 of the job table (job_table.h): a cancel part whose write the store refuses leaves
// every job of it as it was, in the table and the store, signals no supervisor and logs nothing as
// cancelled; its pending job may start again, and the same cancel succeeds once the store is back.
TEST_F(StoreFaultsTest, ACancelPartTheStoreRefusesLeavesEveryJobAsItWasAndSignalsNobody) {
  const std::int64_t pending = Stored(JobState::kPending), held = Stored(JobState::kHeld);
  const std::int64_t running = AdoptedRunningJob();
  const std::vector<std::int64_t> ids = {running, pending, held};
  Table().BeginParts(PartsOp::kCancel, ids);
  {
    Locker lock(db_path());
    const PartResult part = Table().CancelPart(ids, "bob");
    ASSERT_TRUE(part.refused);
    EXPECT_EQ(part.refused_jobs, 3u);
    EXPECT_TRUE(part.changed.empty());
    EXPECT_TRUE(launcher_.signals.empty()) << "a refused part signals nobody";
    EXPECT_EQ(TableState(running), "running");
    EXPECT_EQ(TableState(pending), "pending");
    EXPECT_EQ(TableState(held), "held");
    EXPECT_NE(Table().active().at(running).reason, "cancelling (by bob)");
    EXPECT_EQ(CountLogged("cancelled by bob"), 0);
  }
  EXPECT_EQ(StoredState(pending), "pending");
  EXPECT_EQ(StoredState(held), "held");
  Turn();
  EXPECT_EQ(launcher_.started, std::vector<std::int64_t>{pending}) << "no longer kept back by the cancel";
  const PartResult again = Table().CancelPart(ids, "bob");
  EXPECT_FALSE(again.refused);
  EXPECT_EQ(StoredState(held), "cancelled");
  EXPECT_EQ(launcher_.SignalsTo(running), std::vector<int>{SIGTERM});
}

// The same for a hold: a refused part holds nothing and asks no supervisor to leave the line.
TEST_F(StoreFaultsTest, AHoldPartTheStoreRefusesLeavesEveryJobAsItWasAndSignalsNobody) {
  const std::int64_t pending = Stored(JobState::kPending), waiting = Stored(JobState::kLaunching);
  HoldLock(waiting);
  SupervisorStatus status;
  status.pid = static_cast<pid_t>(test::UnusedPid());
  status.reason = "waiting for GPUs";
  Report(waiting, status);
  ASSERT_TRUE(Table().Recover());
  const std::vector<std::int64_t> ids = {pending, waiting};
  Table().BeginParts(PartsOp::kHold, ids);
  {
    Locker lock(db_path());
    const PartResult part = Table().HoldPart(ids, "bob", true);
    ASSERT_TRUE(part.refused);
    EXPECT_EQ(part.refused_jobs, 2u);
    EXPECT_TRUE(launcher_.signals.empty());
    EXPECT_FALSE(Table().HoldRequested(waiting));
    EXPECT_EQ(TableState(pending), "pending");
    EXPECT_EQ(CountLogged("held by bob"), 0);
  }
  EXPECT_EQ(StoredState(pending), "pending");
  Turn();
  EXPECT_EQ(launcher_.started, std::vector<std::int64_t>{pending});
}

// An idle cancel while the store takes no writes: its reason is kept, and the supervisor is
// signalled once, only when a later turn has stored it.
TEST_F(StoreFaultsTest, AnIdleCancelIsSignalledOnlyOnceItsReasonIsStored) {
  const std::int64_t id = AdoptedRunningJob();
  const std::string why = "idle (0% GPU) for 2h0m: cancelled";
  {
    Locker lock(db_path());
    EXPECT_TRUE(Table().CancelIdle(id, why));
    Turn();
    EXPECT_TRUE(launcher_.signals.empty()) << "not signalled before its reason is stored";
  }
  EXPECT_NE(StoredJob(id).reason, why);
  Turn();
  EXPECT_EQ(StoredJob(id).reason, why);
  EXPECT_EQ(launcher_.SignalsTo(id), std::vector<int>{SIGTERM});
  Turn();
  EXPECT_EQ(launcher_.SignalsTo(id), std::vector<int>{SIGTERM}) << "once";
  SupervisorEnds(id, 143);
  Turn();
  EXPECT_EQ(StoredState(id), "cancelled");
}

// ---- item 16: rows that cannot be read, read-only files, the marker ---------------------------

TEST_F(StoreFaultsTest, RowsThatCannotBeReadAreReportedByIdAndKept) {
  const std::int64_t good = Stored(JobState::kPending);
  const std::int64_t bad = Stored(JobState::kPending);
  const std::int64_t odd = Stored(JobState::kHeld);
  {
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(db_path().c_str(), &raw), SQLITE_OK);
    const std::string sql = "UPDATE jobs SET spec = '{broken' WHERE id = " + std::to_string(bad) +
                            "; UPDATE jobs SET state = 'sleeping' WHERE id = " + std::to_string(odd) + ";";
    ASSERT_EQ(sqlite3_exec(raw, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(raw);
    sqlite3_close(raw);
  }
  std::vector<store::DamagedRow> damaged;
  auto jobs = store_->LoadUnfinished(&damaged);
  ASSERT_TRUE(jobs) << jobs.error().message;
  ASSERT_EQ(jobs->size(), 1u);
  EXPECT_EQ((*jobs)[0].id, good);
  ASSERT_EQ(damaged.size(), 2u);
  EXPECT_EQ(damaged[0].id, bad);
  EXPECT_EQ(damaged[0].why, "its spec is not JSON");
  EXPECT_EQ(damaged[1].id, odd);
  EXPECT_EQ(damaged[1].why, "its state 'sleeping' is unknown");
  auto one = store_->Get(bad);
  ASSERT_FALSE(one);
  EXPECT_EQ(one.error().kind, ErrorKind::kStore);
  EXPECT_NE(one.error().message.find("job " + std::to_string(bad) + " is damaged in the database (its spec is not JSON)"),
            std::string::npos)
      << one.error().message;
  // The table reports them and never writes them: after a turn the rows are as they were.
  ASSERT_TRUE(Table().Recover());
  ASSERT_EQ(Table().damaged().size(), 2u);
  EXPECT_EQ(CountLogged("job " + std::to_string(bad) + " is damaged in the database (its spec is not JSON)"), 1);
  Turn();
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(db_path().c_str(), &raw), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(raw, ("SELECT spec FROM jobs WHERE id = " + std::to_string(bad)).c_str(), -1, &stmt, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW) << "kept, not dropped";
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0)), "{broken");
  sqlite3_finalize(stmt);
  sqlite3_close(raw);
}

TEST_F(StoreFaultsTest, AReadOnlyDatabaseIsRefusedAtOpen) {
  store_.reset();
  ASSERT_EQ(chmod(db_path().c_str(), 0444), 0);
  auto store = store::JobStore::Open(db_path());
  ASSERT_FALSE(store) << "a read-only store would fail at the daemon's first write";
  EXPECT_EQ(store.error().kind, ErrorKind::kStore);
  EXPECT_NE(store.error().message.find("is read-only (mode 0444)"), std::string::npos) << store.error().message;
}

TEST_F(StoreFaultsTest, TheMarkerRefusesAZeroLengthMissingOrOlderDatabase) {
  EXPECT_TRUE(CheckStoreFileAgainstMarker(files_, db_path()).ok()) << "no marker: nothing is known of an older store";
  ASSERT_TRUE(WriteStoreMarker(files_, db_path(), 7).ok());
  auto recorded = ReadStoreMarker(files_, StoreMarkerPath(db_path()));
  ASSERT_TRUE(recorded && *recorded);
  EXPECT_EQ(**recorded, 7);
  EXPECT_TRUE(CheckStoreFileAgainstMarker(files_, db_path()).ok()) << "the database is there and not empty";
  EXPECT_TRUE(CheckStoreIdsAgainstMarker(files_, db_path(), 7).ok());
  EXPECT_TRUE(CheckStoreIdsAgainstMarker(files_, db_path(), 9).ok()) << "ids used since the marker was written";
  Status older = CheckStoreIdsAgainstMarker(files_, db_path(), 3);
  ASSERT_FALSE(older.ok());
  EXPECT_EQ(older.error().kind, ErrorKind::kStore);
  EXPECT_NE(older.error().message.find("has job ids up to 3, but"), std::string::npos) << older.error().message;

  store_.reset();
  fs::resize_file(db_path(), 0);
  fs::remove(db_path() + "-wal");
  Status empty = CheckStoreFileAgainstMarker(files_, db_path());
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.error().kind, ErrorKind::kStore);
  EXPECT_NE(empty.error().message.find("is empty (0 bytes), but " + StoreMarkerPath(db_path()) + " records a store with job ids up to 7"),
            std::string::npos)
      << empty.error().message;
  fs::remove(db_path());
  Status missing = CheckStoreFileAgainstMarker(files_, db_path());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("is missing"), std::string::npos) << missing.error().message;
  fs::remove(StoreMarkerPath(db_path()));
  EXPECT_TRUE(CheckStoreFileAgainstMarker(files_, db_path()).ok()) << "removing the marker is how an admin starts afresh";
}

// ---- item 17: idempotency keys -------------------------------------------------------------

TEST_F(StoreFaultsTest, AnIdempotencyKeyIsRecordedWithItsIdsOncePerUid) {
  std::vector<Job> jobs = {MakeJob(1000), MakeJob(1000), MakeJob(1000)};
  // Three submissions in one group commit: alice's "k1" (one job), alice's "k2" (two jobs).
  auto ids = store_->Insert(jobs, false, {{1000, "k1", 0, 1}, {1000, "k2", 1, 2}});
  ASSERT_TRUE(ids) << ids.error().message;
  auto k1 = store_->FindSubmission(1000, "k1");
  auto k2 = store_->FindSubmission(1000, "k2");
  ASSERT_TRUE(k1 && *k1 && k2 && *k2);
  EXPECT_EQ(**k1, std::vector<std::int64_t>{(*ids)[0]});
  EXPECT_EQ(**k2, (std::vector<std::int64_t>{(*ids)[1], (*ids)[2]}));
  auto other_user = store_->FindSubmission(1001, "k1");
  ASSERT_TRUE(other_user);
  EXPECT_FALSE(*other_user) << "keys are per uid";

  // The same key again is refused by the store itself: nothing of that transaction is stored.
  std::vector<Job> again = {MakeJob(1000)};
  auto max_before = store_->MaxId();
  auto repeated = store_->Insert(again, false, {{1000, "k1", 0, 1}});
  EXPECT_FALSE(repeated);
  EXPECT_EQ(*store_->MaxId(), *max_before) << "rolled back";
  // Another user may use the same key; an array's key names all its tasks.
  std::vector<Job> array = {MakeJob(1001), MakeJob(1001)};
  array[0].array_index = 0;
  array[1].array_index = 1;
  auto tasks = store_->Insert(array, true, {{1001, "k1", 0, 2}});
  ASSERT_TRUE(tasks) << tasks.error().message;
  EXPECT_EQ(**store_->FindSubmission(1001, "k1"), *tasks);
}

TEST_F(StoreFaultsTest, SchemaThreeMigratesToTheSubmissionsTableKeepingEveryJob) {
  store_.reset();
  fs::remove(db_path());
  fs::remove(db_path() + "-wal");
  fs::remove(db_path() + "-shm");
  {
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(db_path().c_str(), &raw), SQLITE_OK);
    const char* v3 =
        "CREATE TABLE jobs (id INTEGER PRIMARY KEY AUTOINCREMENT, array_job_id INTEGER, array_index INTEGER,"
        " uid INTEGER NOT NULL, gid INTEGER NOT NULL, user TEXT NOT NULL, spec TEXT NOT NULL, state TEXT NOT NULL,"
        " reason TEXT NOT NULL DEFAULT '', submit_time REAL NOT NULL, start_time REAL, end_time REAL,"
        " exit_code INTEGER, gpus TEXT NOT NULL DEFAULT '[]', supervisor_pid INTEGER, logs TEXT);"
        "INSERT INTO jobs (uid, gid, user, spec, state, submit_time) VALUES (1000, 1000, 'alice',"
        " '{\"argv\":[\"true\"],\"cwd\":\"/home/alice\",\"request\":{\"count\":1}}', 'pending', 1.0);"
        "PRAGMA user_version=3;";
    ASSERT_EQ(sqlite3_exec(raw, v3, nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(raw);
    sqlite3_close(raw);
  }
  OpenStore();
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(db_path().c_str(), &raw), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(raw, "PRAGMA user_version", -1, &stmt, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int(stmt, 0), store::JobStore::kSchemaVersion);
  sqlite3_finalize(stmt);
  sqlite3_close(raw);
  auto jobs = store_->LoadUnfinished();
  ASSERT_TRUE(jobs) << jobs.error().message;
  ASSERT_EQ(jobs->size(), 1u) << "the old job is kept";
  auto none = store_->FindSubmission(1000, "k");
  ASSERT_TRUE(none) << none.error().message;
  EXPECT_FALSE(*none);
  std::vector<Job> keyed = {MakeJob()};
  auto ids = store_->Insert(keyed, false, {{1000, "k", 0, 1}});
  ASSERT_TRUE(ids) << ids.error().message;
  EXPECT_EQ((*ids)[0], 2);
  EXPECT_EQ(**store_->FindSubmission(1000, "k"), std::vector<std::int64_t>{2});
}

}  // namespace
}  // namespace gpulane::daemon
