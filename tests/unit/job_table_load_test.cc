// The job table loaded in parts at the daemon's start (issue 23, item 8: a restart with 600,000
// unfinished jobs answered nothing for 14 s): every unfinished job loaded exactly once, finished
// and damaged rows between the parts skipped, how far it is said truthfully, and nothing adopted or
// launched until the last part is in.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>

#include "daemon/job_files.h"
#include "daemon/job_table.h"
#include "os/file_system.h"
#include "support/recording_launcher.h"
#include "util/clock.h"

namespace gpulane::daemon {
namespace {

namespace fs = std::filesystem;
using store::Job;
using store::JobState;

class JobTableLoadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/gpulane-job-table-load-XXXXXX";
    dir_ = mkdtemp(dir);
    fs::create_directories(dir_ / "jobs");
    auto store = store::JobStore::Open(":memory:");
    ASSERT_TRUE(store) << store.error().message;
    store_ = std::move(store).value();
    table_ = std::make_unique<JobTable>(*store_, (dir_ / "jobs").string(), clock_, files_, launcher_,
                                        JobTableLimits{10, 4}, [](const std::string&) {});
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Stores a job in `state`; its id.
  std::int64_t Stored(JobState state) {
    Job job;
    job.spec.request.uid = job.gid = 1000;
    job.spec.request.user = "alice";
    job.spec.argv = {"true"};
    job.spec.cwd = "/tmp";
    std::vector<Job> jobs = {job};
    EXPECT_TRUE(store_->Insert(jobs, false));
    jobs[0].state = state;
    if (store::IsFinished(state)) jobs[0].end_time = 1.0;
    EXPECT_TRUE(store_->Update({&jobs[0]}).ok());
    return jobs[0].id;
  }

  fs::path dir_;
  std::unique_ptr<store::JobStore> store_;
  FakeClock clock_;
  os::SystemFileSystem files_;  ///< the job files: real ones in dir_
  test::RecordingLauncher launcher_;
  std::unique_ptr<JobTable> table_;
};

TEST_F(JobTableLoadTest, EveryUnfinishedJobIsLoadedOnceAcrossPartsAndTheProgressIsTruthful) {
  std::vector<std::int64_t> unfinished;
  for (int i = 0; i < 7; ++i) {
    unfinished.push_back(Stored(i % 2 ? JobState::kHeld : JobState::kPending));
    Stored(JobState::kCompleted);  // finished ones between them are not loaded nor counted
  }
  ASSERT_TRUE(table_->BeginRecover().ok());
  ASSERT_TRUE(table_->loading());
  EXPECT_EQ(table_->loading()->total, 7u);
  EXPECT_EQ(table_->loading()->loaded, 0u);
  std::vector<std::size_t> seen;
  while (true) {
    auto done = table_->LoadRecoverPart(3);
    ASSERT_TRUE(done) << done.error().message;
    seen.push_back(table_->loading()->loaded);
    EXPECT_EQ(table_->active().size(), table_->loading()->loaded);
    if (*done) break;
  }
  EXPECT_EQ(seen, (std::vector<std::size_t>{3, 6, 7}));
  ASSERT_TRUE(table_->FinishRecover());
  EXPECT_FALSE(table_->loading()) << "loaded: the table is complete";
  ASSERT_EQ(table_->active().size(), unfinished.size());
  for (std::int64_t id : unfinished) EXPECT_TRUE(table_->active().count(id)) << id;
}

TEST_F(JobTableLoadTest, APartEndingAtTheLastJobEndsTheLoadingAndAnotherLoadsNothingTwice) {
  for (int i = 0; i < 4; ++i) Stored(JobState::kPending);
  ASSERT_TRUE(table_->BeginRecover().ok());
  auto first = table_->LoadRecoverPart(2), second = table_->LoadRecoverPart(2), third = table_->LoadRecoverPart(2);
  ASSERT_TRUE(first && second && third);
  EXPECT_FALSE(*first);
  EXPECT_TRUE(*second);
  EXPECT_TRUE(*third);
  EXPECT_EQ(table_->loading()->loaded, 4u);
  EXPECT_EQ(table_->active().size(), 4u);
}

TEST_F(JobTableLoadTest, NothingIsAdoptedOrLaunchedBeforeTheLastPart) {
  const std::int64_t launching = Stored(JobState::kLaunching);
  for (int i = 0; i < 5; ++i) Stored(JobState::kPending);
  ASSERT_TRUE(table_->BeginRecover().ok());
  ASSERT_TRUE(table_->LoadRecoverPart(2));
  // The launching job's supervisor is not asked about yet, and nothing is launched.
  EXPECT_TRUE(launcher_.started.empty());
  EXPECT_EQ(store::StateName(table_->active().at(launching).state), std::string("launching"));
  while (!*table_->LoadRecoverPart(2)) {
  }
  auto handed = table_->FinishRecover();
  ASSERT_TRUE(handed);
  EXPECT_EQ(*handed, 1u) << "its status is read once all are in";
}

}  // namespace
}  // namespace gpulane::daemon
