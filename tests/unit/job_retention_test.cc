// Retention of finished jobs in the job store (daemon.keep_finished): JobStore::PruneFinished
// removes finished jobs whose end is older than the bound, in slices, never an unfinished job, and
// records what it removed so that a removed id is told apart from one that never was.
#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>

#include <gtest/gtest.h>

#include "store/job_store.h"

namespace gpulane::store {
namespace {

namespace fs = std::filesystem;

class RetentionStore : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/gpulane-retention-test-XXXXXX";
    dir_ = mkdtemp(dir);
    auto opened = JobStore::Open(path());
    ASSERT_TRUE(opened) << opened.error().message;
    store_ = std::move(opened).value();
  }
  void TearDown() override {
    store_.reset();
    fs::remove_all(dir_);
  }
  std::string path() const { return (dir_ / "jobs.db").string(); }

  static Job Pending() {
    Job job;
    job.spec.request.uid = 1000;
    job.gid = 1000;
    job.spec.request.user = "alice";
    job.spec.argv = {"true"};
    job.spec.cwd = "/home/alice";
    job.spec.request.submit_time_s = 1.0;
    return job;
  }
  // One job, ended at `end_s` in `state` (or left pending when state is kPending); its id.
  std::int64_t Add(JobState state, double end_s, const std::string& key = "") {
    std::vector<Job> jobs = {Pending()};
    std::vector<SubmissionKey> keys;
    if (!key.empty()) keys.push_back({1000, key, 0, 1});
    EXPECT_TRUE(store_->Insert(jobs, false, keys));
    End(jobs[0], state, end_s);
    return jobs[0].id;
  }
  void End(Job& job, JobState state, double end_s) {
    if (state == JobState::kPending) return;
    job.state = state;
    job.end_time = end_s;
    ASSERT_TRUE(store_->Update({&job}).ok());
  }
  // An array of `n` tasks, each ended at `end_s` in `state`; their jobs.
  std::vector<Job> AddArray(std::size_t n, JobState state, double end_s, const std::string& key = "") {
    std::vector<Job> tasks;
    for (std::size_t i = 0; i < n; ++i) {
      tasks.push_back(Pending());
      tasks.back().array_index = static_cast<int>(i);
    }
    std::vector<SubmissionKey> keys;
    if (!key.empty()) keys.push_back({1000, key, 0, n});
    EXPECT_TRUE(store_->Insert(tasks, true, keys));
    for (Job& task : tasks) End(task, state, end_s);
    return tasks;
  }
  bool Exists(std::int64_t id) {
    auto got = store_->Get(id);
    return got && got->has_value();
  }
  std::int64_t Count(const char* sql) {
    sqlite3* db = nullptr;
    sqlite3_open(path().c_str(), &db);
    sqlite3_stmt* st = nullptr;
    sqlite3_prepare_v2(db, sql, -1, &st, nullptr);
    std::int64_t n = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
    sqlite3_finalize(st);
    sqlite3_close(db);
    return n;
  }
  std::optional<double> PrunedAfter(std::int64_t id) {
    auto pruned = store_->PrunedAfter(id);
    EXPECT_TRUE(pruned) << pruned.error().message;
    return pruned ? *pruned : std::nullopt;
  }

  fs::path dir_;
  std::unique_ptr<JobStore> store_;
};

TEST_F(RetentionStore, FinishedJobsEndedBeforeTheBoundGoAndTheRestStay) {
  const std::int64_t old_done = Add(JobState::kCompleted, 100);
  const std::int64_t old_failed = Add(JobState::kFailed, 200);
  const std::int64_t old_cancelled = Add(JobState::kCancelled, 300);
  const std::int64_t old_timeout = Add(JobState::kTimeout, 400);
  const std::int64_t at_bound = Add(JobState::kCompleted, 1000);
  const std::int64_t recent = Add(JobState::kCompleted, 5000);
  const std::int64_t pending = Add(JobState::kPending, 0);
  auto slice = store_->PruneFinished(1000, 100, 86400);
  ASSERT_TRUE(slice) << slice.error().message;
  EXPECT_EQ(slice->jobs, 4u);
  EXPECT_FALSE(slice->more);
  for (std::int64_t id : {old_done, old_failed, old_cancelled, old_timeout}) {
    EXPECT_FALSE(Exists(id)) << "job " << id << " ended before the bound";
    EXPECT_EQ(PrunedAfter(id), 86400.0) << "job " << id << " is recorded as removed, with the setting";
  }
  EXPECT_TRUE(Exists(at_bound)) << "a job that ended exactly at the bound is kept";
  EXPECT_TRUE(Exists(recent));
  EXPECT_TRUE(Exists(pending));
  for (std::int64_t id : {at_bound, recent, pending}) EXPECT_EQ(PrunedAfter(id), std::nullopt);
  EXPECT_EQ(PrunedAfter(pending + 1), std::nullopt) << "an id never used is not 'removed'";
  auto max = store_->MaxId();
  ASSERT_TRUE(max);
  EXPECT_EQ(*max, pending) << "removing jobs gives no id back";
}

TEST_F(RetentionStore, UnfinishedJobsAreNeverRemovedHoweverOld) {
  std::vector<Job> jobs;
  for (JobState state : {JobState::kPending, JobState::kHeld, JobState::kLaunching, JobState::kRunning}) {
    std::vector<Job> one = {Pending()};
    ASSERT_TRUE(store_->Insert(one, false));
    one[0].state = state;
    one[0].end_time = 1;  // even with an end recorded
    ASSERT_TRUE(store_->Update({&one[0]}).ok());
    jobs.push_back(one[0]);
  }
  auto slice = store_->PruneFinished(1e12, 100, 1);
  ASSERT_TRUE(slice);
  EXPECT_EQ(slice->jobs, 0u);
  for (const Job& job : jobs) EXPECT_TRUE(Exists(job.id)) << StateName(job.state);
}

TEST_F(RetentionStore, SlicesAreBoundedAndOldestEndsGoFirst) {
  std::vector<std::int64_t> ids;
  for (int i = 0; i < 25; ++i) ids.push_back(Add(JobState::kCompleted, 1000 - i));  // later ids ended earlier
  auto first = store_->PruneFinished(2000, 10, 60);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->jobs, 10u);
  EXPECT_TRUE(first->more) << "a full slice says there may be more";
  for (int i = 0; i < 25; ++i) EXPECT_EQ(Exists(ids[i]), i < 15) << "the 10 oldest ends went first: job " << ids[i];
  auto second = store_->PruneFinished(2000, 10, 60);
  auto third = store_->PruneFinished(2000, 10, 60);
  ASSERT_TRUE(second && third);
  EXPECT_EQ(second->jobs, 10u);
  EXPECT_EQ(third->jobs, 5u);
  EXPECT_FALSE(third->more);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM jobs"), 0);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM pruned_ids"), 1) << "consecutive ids are one run, however they were removed";
}

TEST_F(RetentionStore, AnArraysSpecAndKeysGoWithItsLastTask) {
  std::vector<Job> tasks = AddArray(6, JobState::kCancelled, 100, "array-key");
  const std::int64_t array = *tasks[0].array_job_id;
  tasks[5].end_time = 900;  // one task ended later
  ASSERT_TRUE(store_->Update({&tasks[5]}).ok());
  auto first = store_->PruneFinished(500, 100, 60);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->jobs, 5u);
  EXPECT_EQ(first->arrays, 0u) << "a task is left: the array's spec stays";
  EXPECT_EQ(first->submissions, 0u);
  auto left = store_->Get(tasks[5].id);
  ASSERT_TRUE(left && *left) << "the task left is still read with its array's spec";
  EXPECT_EQ((*left)->spec.argv, std::vector<std::string>{"true"});
  auto found = store_->FindSubmission(1000, "array-key");
  ASSERT_TRUE(found && *found);
  auto second = store_->PruneFinished(1000, 100, 60);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->jobs, 1u);
  EXPECT_EQ(second->arrays, 1u);
  EXPECT_EQ(second->submissions, 1u);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM array_specs"), 0);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM submissions"), 0);
  found = store_->FindSubmission(1000, "array-key");
  ASSERT_TRUE(found);
  EXPECT_FALSE(*found);
  EXPECT_EQ(PrunedAfter(array), 60.0);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM pruned_ids"), 1);
}

TEST_F(RetentionStore, ASubmissionKeyStaysWhileAJobOfItIsLeft) {
  const std::int64_t gone = Add(JobState::kCompleted, 100, "gone-key");
  const std::int64_t kept = Add(JobState::kCompleted, 5000, "kept-key");
  auto slice = store_->PruneFinished(1000, 100, 60);
  ASSERT_TRUE(slice);
  EXPECT_EQ(slice->submissions, 1u);
  auto found = store_->FindSubmission(1000, "kept-key");
  ASSERT_TRUE(found && *found);
  EXPECT_EQ(**found, std::vector<std::int64_t>{kept});
  found = store_->FindSubmission(1000, "gone-key");
  ASSERT_TRUE(found);
  EXPECT_FALSE(*found) << "job " << gone << " is gone: its key too";
}

TEST_F(RetentionStore, SparedIdsAreKeptAndTheSliceGoesPastThem) {
  const std::int64_t spared = Add(JobState::kCompleted, 10);  // the oldest end
  std::vector<std::int64_t> others;
  for (int i = 0; i < 5; ++i) others.push_back(Add(JobState::kCompleted, 20 + i));
  auto slice = store_->PruneFinished(1000, 3, 60, {{spared, spared}});
  ASSERT_TRUE(slice);
  EXPECT_EQ(slice->jobs, 3u) << "the spared job does not take a place in the slice";
  EXPECT_TRUE(Exists(spared));
  EXPECT_FALSE(Exists(others[0]));
  EXPECT_EQ(PrunedAfter(spared), std::nullopt);
}

TEST_F(RetentionStore, AFinishedJobWithNoEndIsKept) {
  std::vector<Job> jobs = {Pending()};
  ASSERT_TRUE(store_->Insert(jobs, false));
  jobs[0].state = JobState::kFailed;  // an end nobody recorded
  ASSERT_TRUE(store_->Update({&jobs[0]}).ok());
  auto slice = store_->PruneFinished(1e12, 100, 60);
  ASSERT_TRUE(slice);
  EXPECT_EQ(slice->jobs, 0u);
  EXPECT_TRUE(Exists(jobs[0].id));
}

TEST_F(RetentionStore, RemovedIdsStayKnownAcrossAReopen) {
  const std::int64_t id = Add(JobState::kCompleted, 100);
  ASSERT_TRUE(store_->PruneFinished(1000, 100, 3600));
  store_.reset();
  auto reopened = JobStore::Open(path());
  ASSERT_TRUE(reopened);
  store_ = std::move(reopened).value();
  EXPECT_EQ(PrunedAfter(id), 3600.0);
}

}  // namespace
}  // namespace gpulane::store
