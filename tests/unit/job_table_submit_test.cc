// The submitted event on the job table itself (job_table.h, JobTable::Submit and StoreArrayPart):
// a round of submissions is stored in one transaction with consecutive ids, a known idempotency
// key answers with the earlier ids and stores nothing, and a store that refuses the write fails
// every submission of the round and adds nothing (invariant 2: an acknowledged job is durable).
// The store is a file in a temporary folder (its WAL tells how many transactions committed, and a
// second connection can lock it), with a FakeClock and a launcher that records.
#include "daemon/job_table.h"
#include "os/file_system.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <variant>

#include "store/job_store.h"
#include "support/recording_launcher.h"
#include "support/sqlite_locker.h"
#include "util/clock.h"

namespace gpulane::daemon {
namespace {

namespace fs = std::filesystem;
using store::Job;
using Ids = std::vector<std::int64_t>;

std::uint32_t BigEndian32(const unsigned char* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) | p[3];
}

// The transactions committed to the database at `db_path` since its write-ahead log last started
// over: the log's commit frames (a frame header's second word is non-zero only in the last frame
// of a commit; frames of an earlier generation of the log carry other salts).
int WalCommits(const std::string& db_path) {
  std::ifstream in(db_path + "-wal", std::ios::binary);
  std::vector<unsigned char> wal((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (wal.size() < 32) return 0;
  const std::size_t page_bytes = BigEndian32(&wal[8]);
  const std::uint32_t salt1 = BigEndian32(&wal[16]), salt2 = BigEndian32(&wal[20]);
  int commits = 0;
  for (std::size_t at = 32; at + 24 + page_bytes <= wal.size(); at += 24 + page_bytes) {
    if (BigEndian32(&wal[at + 8]) != salt1 || BigEndian32(&wal[at + 12]) != salt2) break;
    commits += BigEndian32(&wal[at + 4]) != 0;
  }
  return commits;
}

class JobTableSubmitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/gpulane-job-table-submit-test-XXXXXX";
    dir_ = mkdtemp(dir);
    fs::create_directories(dir_ / "jobs");
    auto store = store::JobStore::Open(db_path());
    ASSERT_TRUE(store) << store.error().message;
    store_ = std::move(store).value();
    table_ = std::make_unique<JobTable>(*store_, (dir_ / "jobs").string(), clock_, files_, launcher_, limits_,
                                        [this](const std::string& line) { log_.push_back(line); });
  }
  void TearDown() override {
    table_.reset();
    store_.reset();
    fs::remove_all(dir_);
  }
  std::string db_path() const { return (dir_ / "jobs.db").string(); }

  // A plain submission of `user` (uid 1000 for alice, 1001 for bob) running `command`, from the
  // connection `fd`, with idempotency key `key`.
  static Submission Plain(int fd, const std::string& command, const std::string& key = "",
                          const std::string& user = "alice") {
    Submission sub;
    Job job;
    job.spec.request.uid = job.gid = user == "alice" ? 1000 : 1001;
    job.spec.request.user = user;
    job.spec.argv = {command};
    job.spec.cwd = "/tmp";
    job.spec.request.submit_time_s = 1.0;
    sub.jobs.push_back(std::move(job));
    sub.key = key;
    sub.from = {fd, static_cast<std::uint64_t>(fd) + 100};
    return sub;
  }
  // An array of `tasks` tasks running `command`.
  static Submission Array(int fd, const std::string& command, std::size_t tasks, const std::string& key = "") {
    Submission sub = Plain(fd, command, key);
    sub.array = true;
    for (std::size_t i = 0; i < tasks; ++i) sub.indices.push_back(static_cast<int>(i));
    return sub;
  }
  std::vector<SubmitOutcome> Submit(std::vector<Submission> round) { return table_->Submit(round); }

  // Every job in the store, finished or not.
  std::vector<Job> StoredJobs() {
    store::JobFilter all;
    all.include_finished = true;
    auto jobs = store_->List(all);
    EXPECT_TRUE(jobs) << jobs.error().message;
    return jobs ? *jobs : std::vector<Job>{};
  }
  Ids TableIds() const {
    Ids ids;
    for (const auto& [id, job] : table_->active()) ids.push_back(id);
    return ids;
  }
  static Ids StoredIds(const SubmitOutcome& outcome) {
    const auto* stored = std::get_if<SubmitStored>(&outcome.result);
    return stored ? stored->ids : Ids{};
  }
  static Ids RepeatedIds(const SubmitOutcome& outcome) {
    const auto* repeated = std::get_if<SubmitRepeated>(&outcome.result);
    return repeated ? repeated->ids : Ids{};
  }
  static const Error* FailedWith(const SubmitOutcome& outcome) {
    const auto* failed = std::get_if<SubmitFailed>(&outcome.result);
    return failed ? &failed->error : nullptr;
  }

  fs::path dir_;
  std::unique_ptr<store::JobStore> store_;
  FakeClock clock_;
  os::SystemFileSystem files_;  ///< the job files: real ones in dir_
  test::RecordingLauncher launcher_;
  // Short lock waits: a refused write costs the test 20 ms.
  JobTableLimits limits_{10, 4, 20, 5, 0};
  std::vector<std::string> log_;
  std::unique_ptr<JobTable> table_;
};

// The group commit: the submissions read in one turn are stored in one transaction (one fsync),
// each gets its jobs' ids (consecutive, in the round's order), and its jobs are in the table.
TEST_F(JobTableSubmitTest, ARoundOfSubmissionsIsStoredInOneTransactionWithConsecutiveIds) {
  const int commits_before = WalCommits(db_path());
  const auto outcomes = Submit({Plain(7, "first"), Plain(8, "second", "key-2"), Plain(9, "third", "", "bob")});
  EXPECT_EQ(WalCommits(db_path()) - commits_before, 1) << "one transaction for the whole round";
  ASSERT_EQ(outcomes.size(), 3u);
  const Ids first = StoredIds(outcomes[0]);
  ASSERT_EQ(first.size(), 1u);
  const std::int64_t id = first[0];
  EXPECT_EQ(StoredIds(outcomes[1]), Ids{id + 1});
  EXPECT_EQ(StoredIds(outcomes[2]), Ids{id + 2});
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(outcomes[i].to.fd, 7 + i) << "each outcome goes to its own submitter, in the round's order";
    EXPECT_EQ(outcomes[i].to.serial, static_cast<std::uint64_t>(107 + i));
    EXPECT_FALSE(outcomes[i].array);
  }
  const auto stored = StoredJobs();
  ASSERT_EQ(stored.size(), 3u);
  EXPECT_EQ(stored[1].id, id + 1);
  EXPECT_EQ(stored[1].spec.argv, (std::vector<std::string>{"second"}));
  EXPECT_EQ(stored[2].user(), "bob");
  EXPECT_EQ(TableIds(), (Ids{id, id + 1, id + 2})) << "added to the table once stored";
  auto key = store_->FindSubmission(1000, "key-2");
  ASSERT_TRUE(key && *key) << "the key stored with its jobs";
  EXPECT_EQ(**key, Ids{id + 1});
  EXPECT_TRUE(table_->TakeScheduleNeeded()) << "new pending jobs ask for a launch decision";
}

// A key stored before answers with the earlier submission's ids: nothing is stored, nothing added.
TEST_F(JobTableSubmitTest, AKnownKeyAnswersWithTheOldIdsAndStoresNothing) {
  const Ids first = StoredIds(Submit({Plain(7, "train", "nightly")}).at(0));
  ASSERT_EQ(first.size(), 1u);
  const int commits_before = WalCommits(db_path());
  const auto again = Submit({Plain(8, "train again", "nightly")});
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(RepeatedIds(again[0]), first);
  EXPECT_EQ(again[0].to.fd, 8);
  EXPECT_EQ(WalCommits(db_path()), commits_before) << "nothing written";
  EXPECT_EQ(StoredJobs().size(), 1u);
  EXPECT_EQ(TableIds(), first);
  EXPECT_EQ(table_->active().at(first[0]).spec.argv, (std::vector<std::string>{"train"}));
  EXPECT_EQ(log_.back(), "submission of alice with a known idempotency key: answered with job " +
                             std::to_string(first[0]) + " again");
  // The same key of another user is another submission.
  const auto bobs = Submit({Plain(9, "train", "nightly", "bob")});
  EXPECT_EQ(StoredIds(bobs.at(0)), Ids{first[0] + 1});
}

// A key repeated within one round: stored once, the repeat answered with the first's ids.
TEST_F(JobTableSubmitTest, AKeyRepeatedWithinARoundAnswersWithTheFirstsIdsOnceStored) {
  const auto outcomes = Submit({Plain(7, "train", "k"), Plain(8, "other"), Plain(9, "train twice", "k")});
  ASSERT_EQ(outcomes.size(), 3u);
  const Ids first = StoredIds(outcomes[0]);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(StoredIds(outcomes[1]), Ids{first[0] + 1});
  EXPECT_EQ(RepeatedIds(outcomes[2]), first);
  EXPECT_EQ(outcomes[2].to.fd, 9);
  EXPECT_EQ(StoredJobs().size(), 2u);
  EXPECT_EQ(TableIds(), (Ids{first[0], first[0] + 1}));
}

// A store that refuses the round's transaction: every submission of it fails, the table gets none
// of their jobs, nothing is stored (a key included), and the trouble is said; once the store takes
// writes again the same submissions are stored.
TEST_F(JobTableSubmitTest, AStoreThatRefusesFailsEverySubmissionOfTheRoundAndAddsNothing) {
  std::vector<SubmitOutcome> outcomes;
  {
    test::SqliteLocker lock(db_path());
    outcomes = Submit({Plain(7, "first"), Plain(8, "second", "k"), Plain(9, "third", "k")});
  }
  ASSERT_EQ(outcomes.size(), 3u);
  for (const SubmitOutcome& outcome : outcomes) {
    const Error* error = FailedWith(outcome);
    ASSERT_NE(error, nullptr) << "fd " << outcome.to.fd;
    EXPECT_EQ(error->kind, ErrorKind::kIo);
    EXPECT_NE(error->message.find("could not be stored"), std::string::npos) << error->message;
  }
  EXPECT_EQ(outcomes[2].to.fd, 9) << "the repeat of the key fails with its first";
  EXPECT_TRUE(table_->active().empty());
  EXPECT_TRUE(StoredJobs().empty());
  EXPECT_FALSE(*store_->FindSubmission(1000, "k")) << "the key was not stored";
  EXPECT_TRUE(table_->store_trouble());
  const auto retried = Submit({Plain(8, "second", "k")});
  EXPECT_EQ(StoredIds(retried.at(0)).size(), 1u);
  EXPECT_EQ(table_->active().size(), 1u);
  EXPECT_FALSE(table_->store_trouble()) << "the trouble ends with a write that succeeds";
}

// An array is stored in parts and added once its last part is: a repeat of its key (in its round
// or a later one) waits for it and gets its ids.
TEST_F(JobTableSubmitTest, AnArrayIsAddedOnlyOnceItsLastPartIsStoredAndItsRepeatsGetItsIds) {
  const std::size_t tasks = JobTable::kArrayPartTasks + 10;
  EXPECT_TRUE(Submit({Array(7, "sweep", tasks, "a"), Plain(8, "sweep again", "a")}).empty()) << "answered once stored";
  EXPECT_TRUE(table_->storing_arrays());
  EXPECT_TRUE(table_->StoreArrayPart().empty());
  EXPECT_TRUE(table_->active().empty()) << "no task before the last part";
  EXPECT_TRUE(Submit({Plain(9, "sweep a third time", "a")}).empty()) << "waits for the array";
  const auto outcomes = table_->StoreArrayPart();
  EXPECT_FALSE(table_->storing_arrays());
  ASSERT_EQ(outcomes.size(), 3u);
  const Ids ids = StoredIds(outcomes[0]);
  ASSERT_EQ(ids.size(), tasks);
  EXPECT_EQ(ids.back() - ids.front(), static_cast<std::int64_t>(tasks - 1));
  EXPECT_TRUE(outcomes[0].array);
  EXPECT_EQ(outcomes[1].to.fd, 8);
  EXPECT_EQ(RepeatedIds(outcomes[1]), ids);
  EXPECT_EQ(outcomes[2].to.fd, 9);
  EXPECT_EQ(RepeatedIds(outcomes[2]), ids);
  EXPECT_EQ(TableIds(), ids);
  EXPECT_EQ(StoredJobs().size(), tasks);
}

}  // namespace
}  // namespace gpulane::daemon
