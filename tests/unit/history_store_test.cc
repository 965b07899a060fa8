// store/history_store: GPU history rows, usage records and events survive a reopen (the daemon's
// restart), keep absent fields absent, and are pruned by age; report rows are summed right.
#include <unistd.h>

#include <filesystem>

#include <gtest/gtest.h>
#include <sqlite3.h>

#include "store/history_store.h"
#include "telemetry/report.h"

namespace gpulane::store {
namespace {

namespace fs = std::filesystem;

struct HistoryDbDir {
  fs::path dir = fs::temp_directory_path() / ("gpulane-history-" + std::to_string(::getpid()) + "-" +
                                             ::testing::UnitTest::GetInstance()->current_test_info()->name());
  HistoryDbDir() { fs::create_directories(dir); }
  ~HistoryDbDir() { fs::remove_all(dir); }
  std::string path() const { return (dir / "history.db").string(); }
};

telemetry::UsageRecord Record(const std::string& job, const std::string& user, double end_s, double gpu_s,
                              std::optional<double> util) {
  telemetry::UsageRecord r;
  r.job_id = job;
  r.user = user;
  r.uid = 1000;
  r.name = "python train.py";
  r.gpu_uuids = {"GPU-a", "GPU-b"};
  r.gpu_indices = {0, 1};
  r.start_s = end_s - gpu_s / 2;
  r.end_s = end_s;
  r.usage.run_s = gpu_s / 2;
  r.usage.gpus = 2;
  r.usage.gpu_s = gpu_s;
  r.usage.mean_util_pct = util;
  r.usage.energy_j = gpu_s * 300;
  r.usage.samples = 5;
  return r;
}

TEST(HistoryStore, RowsUsageAndEventsSurviveAReopen) {
  HistoryDbDir tmp;
  {
    auto store = HistoryStore::Open(tmp.path());
    ASSERT_TRUE(store) << store.error().message;
    telemetry::HistoryRow row;
    row.start_s = 1000;
    row.length_s = 10;
    row.samples = 10;
    row.util_gpu_mean_pct = 55.5;
    row.energy_mj = 123456;
    row.xid_errors = 2;
    ASSERT_TRUE((*store)->AddRows({{"GPU-a", row}}).ok());
    ASSERT_TRUE((*store)->AddUsage(Record("12", "alice", 5000, 7200, 80)).ok());
    Event e;
    e.time_s = 4000;
    e.kind = "idle";
    e.gpu_uuid = "GPU-a";
    e.gpu_index = 0;
    e.job_id = "12";
    e.user = "alice";
    e.message = "job 12 (alice) has used GPU 0 under 5 % for 10m 00s: data loading or a hang?";
    ASSERT_TRUE((*store)->AddEvent(e).ok());
    EXPECT_GT(e.id, 0);
    ASSERT_TRUE((*store)->ClearEvent(e.id, 4100).ok());
  }
  auto store = HistoryStore::Open(tmp.path());
  ASSERT_TRUE(store) << store.error().message;
  auto rows = (*store)->Rows("GPU-a", 10, 0, 1e12);
  ASSERT_TRUE(rows);
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_DOUBLE_EQ(*(*rows)[0].util_gpu_mean_pct, 55.5);
  EXPECT_FALSE((*rows)[0].power_mean_mw) << "absent stays absent";
  EXPECT_EQ((*rows)[0].energy_mj, 123456u);
  EXPECT_EQ((*rows)[0].xid_errors, 2u);
  EXPECT_TRUE((*store)->Rows("GPU-a", 60, 0, 1e12)->empty()) << "another resolution";
  auto usage = (*store)->Usage(UsageFilter{});
  ASSERT_TRUE(usage);
  ASSERT_EQ(usage->size(), 1u);
  EXPECT_EQ((*usage)[0].job_id, "12");
  EXPECT_EQ((*usage)[0].gpu_uuids, (std::vector<std::string>{"GPU-a", "GPU-b"}));
  EXPECT_DOUBLE_EQ((*usage)[0].usage.gpu_s, 7200);
  EXPECT_FALSE((*usage)[0].usage.peak_memory_bytes);
  auto events = (*store)->Events(0, 0, 100);
  ASSERT_TRUE(events);
  ASSERT_EQ(events->size(), 1u);
  EXPECT_EQ((*events)[0].kind, "idle");
  EXPECT_EQ((*events)[0].cleared_s, 4100);
}

// An array task's usage is kept under its name ("12_3"), which `report --by job` shows; a history
// file from before the column gets it on open, its records read with none (named by job_id).
TEST(HistoryStore, AnArrayTasksNameIsKeptAndAnOlderFileGetsTheColumn) {
  HistoryDbDir tmp;
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(tmp.path().c_str(), &db), SQLITE_OK);
    const char* old_schema =
        "CREATE TABLE job_usage (id INTEGER PRIMARY KEY AUTOINCREMENT, job_id TEXT NOT NULL, uid INTEGER NOT NULL,"
        " user TEXT NOT NULL, name TEXT NOT NULL, gpu_uuids TEXT NOT NULL, gpu_indices TEXT NOT NULL, start_s REAL NOT NULL,"
        " end_s REAL NOT NULL, wait_s REAL, gpus REAL NOT NULL, gpu_s REAL NOT NULL, energy_j REAL, peak_memory_bytes INTEGER,"
        " mean_memory_bytes REAL, mean_util_pct REAL, p10_util_pct REAL, idle_fraction REAL, samples INTEGER NOT NULL);"
        "INSERT INTO job_usage (job_id, uid, user, name, gpu_uuids, gpu_indices, start_s, end_s, gpus, gpu_s, samples)"
        " VALUES ('40', 1000, 'alice', 'old', 'GPU-a', '0', 10, 20, 1, 10, 3);";
    ASSERT_EQ(sqlite3_exec(db, old_schema, nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  auto store = HistoryStore::Open(tmp.path());
  ASSERT_TRUE(store) << store.error().message;
  telemetry::UsageRecord task = Record("13", "alice", 5000, 100, 50);
  task.job_text = "12_1";
  ASSERT_TRUE((*store)->AddUsage(task).ok());
  auto usage = (*store)->Usage(UsageFilter{});
  ASSERT_TRUE(usage) << usage.error().message;
  ASSERT_EQ(usage->size(), 2u);
  EXPECT_EQ((*usage)[0].job_id, "40");
  EXPECT_EQ((*usage)[0].job_text, "") << "an older record has no name but its id";
  EXPECT_EQ((*usage)[1].job_id, "13");
  EXPECT_EQ((*usage)[1].job_text, "12_1");
  auto rows = telemetry::Summarize(*usage, telemetry::ReportBy::kJob, [](double) { return std::string(); });
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].key, "40");
  EXPECT_EQ(rows[1].key, "12_1") << "by job, a task is named as people write it";
  auto by_id = (*store)->UsageOfJob("13");
  ASSERT_TRUE(by_id && *by_id);
  EXPECT_EQ((**by_id).job_text, "12_1");
}

TEST(HistoryStore, PrunesByAgeAndFiltersUsageByUserAndTime) {
  auto store = HistoryStore::Open(":memory:");
  ASSERT_TRUE(store);
  telemetry::HistoryRow old_row, new_row;
  old_row.start_s = 100;
  old_row.length_s = new_row.length_s = 10;
  new_row.start_s = 900;
  old_row.samples = new_row.samples = 1;
  ASSERT_TRUE((*store)->AddRows({{"GPU-a", old_row}, {"GPU-a", new_row}}).ok());
  ASSERT_TRUE((*store)->Prune(10, 500).ok());
  auto rows = (*store)->Rows("GPU-a", 10, 0, 1e12);
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].start_s, 900);
  ASSERT_TRUE((*store)->AddUsage(Record("1", "alice", 100, 10, 50)).ok());
  ASSERT_TRUE((*store)->AddUsage(Record("2", "bob", 200, 10, 50)).ok());
  ASSERT_TRUE((*store)->AddUsage(Record("3", "alice", 300, 10, 50)).ok());
  auto alice = (*store)->Usage(UsageFilter{150, std::string("alice")});
  ASSERT_EQ(alice->size(), 1u);
  EXPECT_EQ((*alice)[0].job_id, "3");
  ASSERT_TRUE((*store)->PruneRecords(250).ok());
  EXPECT_EQ((*store)->Usage(UsageFilter{})->size(), 1u);
}

TEST(HistoryStore, ADamagedFileIsMovedAsideAndHistoryStartsAfresh) {
  HistoryDbDir tmp;
  {
    std::FILE* f = std::fopen(tmp.path().c_str(), "w");
    std::fputs("this is not a database, but long enough to look like a damaged one ....................", f);
    std::fclose(f);
  }
  auto store = HistoryStore::Open(tmp.path());
  ASSERT_TRUE(store) << store.error().message;
  EXPECT_TRUE(fs::exists(tmp.path() + ".damaged"));
  EXPECT_TRUE((*store)->Usage(UsageFilter{})->empty());
}

TEST(Report, SumsByUserWeightsUtilisationByGpuSecondsAndSplitsJobsOverTheirGpus) {
  std::vector<telemetry::UsageRecord> records = {Record("1", "alice", 86400 + 10, 3600, 90),
                                                 Record("2", "bob", 86400 + 20, 7200, 30),
                                                 Record("3", "alice", 2 * 86400 + 5, 1800, std::nullopt)};
  auto day = [](double t) { return std::to_string(static_cast<long long>(t / 86400)); };
  auto by_user = telemetry::Summarize(records, telemetry::ReportBy::kUser, day);
  ASSERT_EQ(by_user.size(), 2u);
  EXPECT_EQ(by_user[0].key, "bob") << "the largest GPU-seconds first";
  EXPECT_EQ(by_user[1].key, "alice");
  EXPECT_EQ(by_user[1].jobs, 2u);
  EXPECT_DOUBLE_EQ(by_user[1].gpu_s, 5400);
  EXPECT_DOUBLE_EQ(*by_user[1].mean_util_pct, 90) << "job 3 has no figure: it weighs nothing";
  EXPECT_DOUBLE_EQ(*by_user[1].energy_j, 5400 * 300);
  auto by_gpu = telemetry::Summarize(records, telemetry::ReportBy::kGpu, day);
  ASSERT_EQ(by_gpu.size(), 2u);
  EXPECT_DOUBLE_EQ(by_gpu[0].gpu_s + by_gpu[1].gpu_s, 3600 + 7200 + 1800);
  EXPECT_EQ(by_gpu[0].jobs, 3u);
  auto by_day = telemetry::Summarize(records, telemetry::ReportBy::kDay, day);
  ASSERT_EQ(by_day.size(), 2u);
  EXPECT_EQ(by_day[0].key, "1");
  EXPECT_DOUBLE_EQ(by_day[0].gpu_s, 10800);
  auto by_job = telemetry::Summarize(records, telemetry::ReportBy::kJob, day);
  ASSERT_EQ(by_job.size(), 3u);
  EXPECT_EQ(by_job[2].key, "3");
}

}  // namespace
}  // namespace gpulane::store
