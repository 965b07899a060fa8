// The job store's record of where each job's output went, and its migration from schema 1 (which
// had none: those jobs' logs are where their default names say).
#include "store/job_store.h"

#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <fmt/format.h>

#include <gtest/gtest.h>

namespace gpulane::store {
namespace {

namespace fs = std::filesystem;

class TempDb {
 public:
  TempDb() {
    char dir[] = "/tmp/gpulane-store-test-XXXXXX";
    path_ = fs::path(mkdtemp(dir)) / "jobs.db";
  }
  ~TempDb() { fs::remove_all(path_.parent_path()); }
  std::string path() const { return path_.string(); }

 private:
  fs::path path_;
};

Job MakeJob() {
  Job job;
  job.spec.request.uid = 1000;
  job.gid = 1000;
  job.spec.request.user = "alice";
  job.spec.argv = {"true"};
  job.spec.cwd = "/home/alice/proj";
  job.spec.request.submit_time_s = 1.0;
  return job;
}

TEST(JobStore, RecordsTheLogFilesAJobUsed) {
  TempDb db;
  auto store = JobStore::Open(db.path());
  ASSERT_TRUE(store) << store.error().message;
  std::vector<Job> jobs = {MakeJob()};
  ASSERT_TRUE((*store)->Insert(jobs, false));
  auto fresh = (*store)->Get(jobs[0].id);
  ASSERT_TRUE(fresh && *fresh);
  EXPECT_EQ((**fresh).logs, JobLogs{}) << "nothing opened yet";
  EXPECT_EQ(LogsOf(**fresh).stdout_path, "") << "not the default name: it may be an older job's file";

  jobs[0].logs = {"/home/alice/proj/gpulane-1.1.out", "/home/alice/proj/gpulane-1.1.out", 0, 0, 42, 42};
  ASSERT_TRUE((*store)->Update({&jobs[0]}).ok());
  auto stored = (*store)->Get(jobs[0].id);
  ASSERT_TRUE(stored && *stored);
  EXPECT_EQ((**stored).logs, jobs[0].logs);
}

// The isolation a job was given (issue 26: per job, not the daemon's setting) survives the store,
// and a job that has not started has none recorded.
TEST(JobStore, RecordsWhatIsolationAJobWasGiven) {
  TempDb db;
  std::vector<Job> jobs = {MakeJob(), MakeJob()};
  {
    auto store = JobStore::Open(db.path());
    ASSERT_TRUE(store) << store.error().message;
    ASSERT_TRUE((*store)->Insert(jobs, false));
    jobs[0].isolation = "not applied, started with a warning: cannot isolate the job's GPUs: ...";
    ASSERT_TRUE((*store)->Update({&jobs[0], &jobs[1]}).ok());
  }
  auto store = JobStore::Open(db.path());
  ASSERT_TRUE(store) << store.error().message;
  auto given = (*store)->Get(jobs[0].id);
  auto none = (*store)->Get(jobs[1].id);
  ASSERT_TRUE(given && *given && none && *none);
  EXPECT_EQ((**given).isolation, jobs[0].isolation);
  EXPECT_EQ((**none).isolation, "");
}

TEST(JobStore, JobsFromSchemaOneKeepTheirDefaultLogNames) {
  TempDb db;
  {
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(db.path().c_str(), &raw), SQLITE_OK);
    const char* v1 =
        "CREATE TABLE jobs (id INTEGER PRIMARY KEY AUTOINCREMENT, array_job_id INTEGER, array_index INTEGER,"
        " uid INTEGER NOT NULL, gid INTEGER NOT NULL, user TEXT NOT NULL, spec TEXT NOT NULL, state TEXT NOT NULL,"
        " reason TEXT NOT NULL DEFAULT '', submit_time REAL NOT NULL, start_time REAL, end_time REAL,"
        " exit_code INTEGER, gpus TEXT NOT NULL DEFAULT '[]', supervisor_pid INTEGER);"
        "INSERT INTO jobs (uid, gid, user, spec, state, submit_time, exit_code) VALUES (1000, 1000, 'alice',"
        " '{\"argv\":[\"true\"],\"cwd\":\"/home/alice/proj\",\"gpus\":{\"count\":1}}', 'completed', 1.0, 0);"
        "PRAGMA user_version=1;";
    ASSERT_EQ(sqlite3_exec(raw, v1, nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(raw);
    sqlite3_close(raw);
  }
  auto store = JobStore::Open(db.path());
  ASSERT_TRUE(store) << store.error().message;
  auto old = (*store)->Get(1);
  ASSERT_TRUE(old && *old);
  EXPECT_TRUE((**old).logs.unrecorded);
  EXPECT_EQ(LogsOf(**old).stdout_path, "/home/alice/proj/gpulane-1.out");
  EXPECT_EQ(LogsOf(**old).stderr_path, "/home/alice/proj/gpulane-1.out");
  // Updating it (e.g. when it is adopted after the upgrade) keeps it that way.
  ASSERT_TRUE((*store)->Update({&**old}).ok());
  EXPECT_TRUE((*(*store)->Get(1))->logs.unrecorded);
}

// Specs written before the one request type (schema 1 and 2) carried "gpus", "priority" and
// "time_limit_s" of their own: the migration turns them into the request, field by field.
TEST(JobStore, OldSpecsBecomeTheOneRequestWithEveryField) {
  TempDb db;
  {
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(db.path().c_str(), &raw), SQLITE_OK);
    const char* v1 =
        "CREATE TABLE jobs (id INTEGER PRIMARY KEY AUTOINCREMENT, array_job_id INTEGER, array_index INTEGER,"
        " uid INTEGER NOT NULL, gid INTEGER NOT NULL, user TEXT NOT NULL, spec TEXT NOT NULL, state TEXT NOT NULL,"
        " reason TEXT NOT NULL DEFAULT '', submit_time REAL NOT NULL, start_time REAL, end_time REAL,"
        " exit_code INTEGER, gpus TEXT NOT NULL DEFAULT '[]', supervisor_pid INTEGER);"
        "INSERT INTO jobs (uid, gid, user, spec, state, submit_time) VALUES (1000, 1000, 'alice',"
        " '{\"argv\":[\"python\",\"train.py\"],\"cwd\":\"/home/alice\",\"priority\":-3,\"time_limit_s\":3600.0,"
        "\"gpus\":{\"count\":2,\"mem_bytes\":1073741824,\"min_free_bytes\":2147483648,\"max_util_pct\":50,"
        "\"gpu_list\":\"0,1\",\"share_foreign\":true}}', 'pending', 1764580000.5);"
        "INSERT INTO jobs (uid, gid, user, spec, state, submit_time) VALUES (1001, 1001, 'bob',"
        " '{\"argv\":[\"true\"],\"cwd\":\"/home/bob\",\"gpus\":{\"count\":1}}', 'pending', 1764580001.0);"
        "PRAGMA user_version=1;";
    ASSERT_EQ(sqlite3_exec(raw, v1, nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(raw);
    sqlite3_close(raw);
  }
  auto store = JobStore::Open(db.path());
  ASSERT_TRUE(store) << store.error().message;
  auto jobs = (*store)->LoadUnfinished();
  ASSERT_TRUE(jobs.ok()) << jobs.error().message;
  ASSERT_EQ(jobs->size(), 2u) << "no row was dropped";
  const sched::Request& r = (*jobs)[0].spec.request;
  EXPECT_EQ(r.count, 2u);
  EXPECT_EQ(r.mem_bytes, 1ULL << 30);
  EXPECT_EQ(r.min_free_bytes, 2ULL << 30);
  EXPECT_EQ(r.max_util_pct, 50u);
  EXPECT_EQ(r.gpu_list, "0,1");
  EXPECT_TRUE(r.share_foreign);
  EXPECT_EQ(r.priority, -3);
  EXPECT_EQ(r.time_limit_s, 3600.0);
  EXPECT_EQ(r.user, "alice");
  EXPECT_EQ(r.uid, 1000u);
  EXPECT_DOUBLE_EQ(r.submit_time_s, 1764580000.5);
  EXPECT_FALSE(r.allowed_uuids.has_value()) << "resolved by its supervisor from gpu_list, as before";
  const sched::Request& plain = (*jobs)[1].spec.request;
  EXPECT_EQ(plain.count, 1u);
  EXPECT_FALSE(plain.mem_bytes.has_value());
  EXPECT_FALSE(plain.share_foreign);
  EXPECT_EQ(plain.priority, 0);
}

}  // namespace
}  // namespace gpulane::store

namespace gpulane::store {
namespace {

// An array's tasks with their indices, finished ones too; nothing for a job that is not an array.
TEST(JobStoreArrays, ArrayTasksAreFoundByTheArraysId) {
  auto store = JobStore::Open(":memory:");
  ASSERT_TRUE(store) << store.error().message;
  std::vector<Job> single = {MakeJob()};
  ASSERT_TRUE((*store)->Insert(single, false));
  std::vector<Job> tasks;
  for (int index : {5, 1, 9}) {
    tasks.push_back(MakeJob());
    tasks.back().array_index = index;
  }
  auto ids = (*store)->Insert(tasks, true);
  ASSERT_TRUE(ids) << ids.error().message;
  std::vector<Job> after = {MakeJob()};
  ASSERT_TRUE((*store)->Insert(after, false));
  tasks[1].state = JobState::kCompleted;
  ASSERT_TRUE((*store)->Update({&tasks[1]}).ok());
  auto found = (*store)->ArrayTasks(ids->front());
  ASSERT_TRUE(found) << found.error().message;
  ASSERT_EQ(found->size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ((*found)[i].id, (*ids)[i]);
    EXPECT_EQ((*found)[i].index, *tasks[i].array_index);
  }
  EXPECT_TRUE((*store)->ArrayTasks(single[0].id)->empty());
  EXPECT_TRUE((*store)->ArrayTasks(ids->front() + 1)->empty()) << "a task's own id is not an array's";
  EXPECT_TRUE((*store)->ArrayTasks(after[0].id)->empty());
}

}  // namespace
}  // namespace gpulane::store

namespace gpulane::store {
namespace {

// A value of `sql`'s first row and column as text ("" when none).
std::string QueryText(const std::string& path, const char* sql) {
  sqlite3* raw = nullptr;
  std::string out;
  if (sqlite3_open(path.c_str(), &raw) == SQLITE_OK) {
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(raw, sql, -1, &stmt, nullptr) == SQLITE_OK && sqlite3_step(stmt) == SQLITE_ROW &&
        sqlite3_column_text(stmt, 0))
      out = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
    sqlite3_finalize(stmt);
  }
  sqlite3_close(raw);
  return out;
}

// Schema 3 stored every task of an array with a copy of its spec: schema 4 keeps one, in
// array_specs, and the tasks read back exactly as before.
// A retried job's earlier attempts and its --retry survive a restart (a new store on the file).
TEST(JobStore, KeepsARetriedJobsAttemptsAndRetries) {
  TempDb db;
  JobAttempt failed;
  failed.exit_code = 3;
  failed.start_time = 10;
  failed.end_time = 11;
  failed.gpu_uuids = {"GPU-1"};
  std::int64_t id = 0;
  {
    auto store = JobStore::Open(db.path());
    ASSERT_TRUE(store) << store.error().message;
    std::vector<Job> jobs = {MakeJob()};
    jobs[0].spec.retries = 3;
    ASSERT_TRUE((*store)->Insert(jobs, false));
    id = jobs[0].id;
    jobs[0].attempts = {failed, failed};
    ASSERT_TRUE((*store)->Update({&jobs[0]}).ok());
  }
  auto store = JobStore::Open(db.path());
  ASSERT_TRUE(store) << store.error().message;
  auto job = (*store)->Get(id);
  ASSERT_TRUE(job && *job);
  EXPECT_EQ((**job).spec.retries, 3);
  EXPECT_EQ((**job).attempts, (std::vector<JobAttempt>{failed, failed}));
}

// A job's owner (Job::uid, Job::user: its request's, the one copy) survives the store: a job and
// an array's tasks (whose spec is stored once, in array_specs) read back by a new store on the
// file as whose they were. The row's uid and user columns are the owner (what `queue` filters by):
// a spec whose request names someone else (as a client might claim, or an older row without them)
// reads back as the row's owner, never as the one its spec names.
TEST(JobStore, AJobKeepsItsOwner) {
  TempDb db;
  std::int64_t bobs = 0;
  std::vector<std::int64_t> tasks;
  {
    auto store = JobStore::Open(db.path());
    ASSERT_TRUE(store) << store.error().message;
    std::vector<Job> single = {MakeJob()};
    single[0].spec.request.uid = 1001;
    single[0].spec.request.user = "bob";
    ASSERT_TRUE((*store)->Insert(single, false));
    bobs = single[0].id;
    std::vector<Job> array = {MakeJob(), MakeJob()};
    array[0].array_index = 0;
    array[1].array_index = 1;
    auto ids = (*store)->Insert(array, true);
    ASSERT_TRUE(ids) << ids.error().message;
    tasks = *ids;
  }
  const auto owner_of = [&](std::int64_t id) -> std::string {  // "uid user", read by a new store
    auto store = JobStore::Open(db.path());
    if (!store) return store.error().message;
    auto job = (*store)->Get(id);
    if (!job) return job.error().message;
    return *job ? fmt::format("{} {}", (**job).uid(), (**job).user()) : "no job " + std::to_string(id);
  };
  EXPECT_EQ(owner_of(bobs), "1001 bob");
  EXPECT_EQ(owner_of(tasks[0]), "1000 alice");
  EXPECT_EQ(owner_of(tasks[1]), "1000 alice");
  {
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(db.path().c_str(), &raw), SQLITE_OK);
    const char* claimed =
        "UPDATE jobs SET spec = json_set(spec, '$.request.uid', 0, '$.request.user', 'root') WHERE spec != '';"
        "UPDATE array_specs SET spec = json_remove(spec, '$.request.uid', '$.request.user');";
    ASSERT_EQ(sqlite3_exec(raw, claimed, nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(raw);
    sqlite3_close(raw);
  }
  EXPECT_EQ(owner_of(bobs), "1001 bob") << "the row's owner, not the one its spec names";
  EXPECT_EQ(owner_of(tasks[1]), "1000 alice") << "the row's owner, not none";
}

// Schema 5 (before retries): its jobs read back with no earlier attempts and no retries, and
// take attempts afterwards.
TEST(JobStoreMigration, SchemaFiveJobsGetNoAttempts) {
  TempDb db;
  {
    auto store = JobStore::Open(db.path());
    ASSERT_TRUE(store) << store.error().message;
    std::vector<Job> jobs = {MakeJob()};
    ASSERT_TRUE((*store)->Insert(jobs, false));
  }
  {  // back to schema 5 as it was: no attempts column, no "retries" in the spec
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(db.path().c_str(), &raw), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(raw,
                           "ALTER TABLE jobs DROP COLUMN attempts; UPDATE jobs SET spec = json_remove(spec, '$.retries');"
                           "DROP TABLE incomplete_arrays; ALTER TABLE jobs DROP COLUMN argv; ALTER TABLE jobs DROP COLUMN isolation;"
                           "DROP INDEX jobs_finished_end; DROP TABLE pruned_ids; DROP INDEX submissions_first;"
                           "PRAGMA user_version=5;",
                           nullptr, nullptr, nullptr),
              SQLITE_OK)
        << sqlite3_errmsg(raw);
    sqlite3_close(raw);
  }
  auto store = JobStore::Open(db.path());
  ASSERT_TRUE(store) << store.error().message;
  auto job = (*store)->Get(1);
  ASSERT_TRUE(job && *job);
  EXPECT_TRUE((**job).attempts.empty());
  EXPECT_EQ((**job).spec.retries, 0);
  (**job).attempts = {JobAttempt{}};
  ASSERT_TRUE((*store)->Update({&**job}).ok());
  auto again = (*store)->Get(1);
  ASSERT_TRUE(again && *again);
  EXPECT_EQ((**again).attempts.size(), 1u);
}

TEST(JobStoreMigration, SchemaThreeArraysGetTheirSpecStoredOnce) {
  TempDb db;
  const std::string spec =
      R"({"argv":["python","train.py"],"cwd":"/home/alice","env":["SECRET=1","PATH=/usr/bin"],)"
      R"("request":{"count":1,"priority":0},"name":"train","after_ok":[],"after_any":[],)"
      R"("output_path":"","error_path":"","kill_grace_s":10.0})";
  {
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(db.path().c_str(), &raw), SQLITE_OK);
    std::string v3 =
        "CREATE TABLE jobs (id INTEGER PRIMARY KEY AUTOINCREMENT, array_job_id INTEGER, array_index INTEGER,"
        " uid INTEGER NOT NULL, gid INTEGER NOT NULL, user TEXT NOT NULL, spec TEXT NOT NULL, state TEXT NOT NULL,"
        " reason TEXT NOT NULL DEFAULT '', submit_time REAL NOT NULL, start_time REAL, end_time REAL,"
        " exit_code INTEGER, gpus TEXT NOT NULL DEFAULT '[]', supervisor_pid INTEGER, logs TEXT);"
        "CREATE INDEX jobs_unfinished ON jobs(state) WHERE state IN ('pending','held','launching','running');"
        "CREATE INDEX jobs_uid ON jobs(uid);";
    v3 += "INSERT INTO jobs (uid, gid, user, spec, state, submit_time) VALUES (1000, 1000, 'alice', '" + spec +
          "', 'completed', 1.0);";
    for (int index : {0, 4, 7})
      v3 += "INSERT INTO jobs (array_job_id, array_index, uid, gid, user, spec, state, submit_time) VALUES (2, " +
            std::to_string(index) + ", 1000, 1000, 'alice', '" + spec + "', 'pending', 2.0);";
    v3 += "PRAGMA user_version=3;";
    ASSERT_EQ(sqlite3_exec(raw, v3.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(raw);
    sqlite3_close(raw);
  }
  {
    auto store = JobStore::Open(db.path());
    ASSERT_TRUE(store) << store.error().message;
    auto jobs = (*store)->List({.include_finished = true});
    ASSERT_TRUE(jobs) << jobs.error().message;
    ASSERT_EQ(jobs->size(), 4u) << "no row was dropped";
    for (const Job& job : *jobs) {
      EXPECT_EQ(job.spec.argv, (std::vector<std::string>{"python", "train.py"}));
      EXPECT_EQ(job.spec.env, (std::vector<std::string>{"SECRET=1", "PATH=/usr/bin"}));
      EXPECT_EQ(job.spec.name, "train");
    }
    EXPECT_EQ((*jobs)[3].array_index, 7);
    EXPECT_TRUE((*jobs)[1].spec.env.SharesWith((*jobs)[3].spec.env)) << "the tasks share one environment";
    EXPECT_FALSE((*jobs)[0].spec.env.SharesWith((*jobs)[1].spec.env));
    auto task = (*store)->TaskId(2, 4);
    ASSERT_TRUE(task && *task);
    EXPECT_EQ(**task, 3);
  }
  // Migrated through 4 (array specs), 5 (idempotency keys), 6 (retried jobs' attempts) and 7
  // (arrays stored in parts), 8 (array tasks' own commands) and 9 (jobs' isolation) to the current
  // 10 (retention: nothing removed yet).
  EXPECT_EQ(QueryText(db.path(), "PRAGMA user_version"), "10");
  EXPECT_EQ(QueryText(db.path(), "SELECT count(*) FROM pruned_ids"), "0");
  EXPECT_EQ(QueryText(db.path(), "SELECT count(*) FROM jobs WHERE isolation IS NOT NULL"), "0") << "older jobs recorded none";
  EXPECT_EQ(QueryText(db.path(), "SELECT count(*) FROM jobs WHERE argv IS NOT NULL"), "0") << "older tasks share their array's command";
  EXPECT_EQ(QueryText(db.path(), "SELECT count(*) FROM incomplete_arrays"), "0");
  EXPECT_EQ(QueryText(db.path(), "SELECT attempts FROM jobs WHERE id = 1"), "[]") << "older jobs had no earlier attempts";
  EXPECT_EQ(QueryText(db.path(), "SELECT count(*) FROM array_specs"), "1");
  EXPECT_EQ(QueryText(db.path(), "SELECT count(*) FROM jobs WHERE spec = ''"), "3");
  EXPECT_EQ(QueryText(db.path(), "SELECT spec FROM jobs WHERE id = 1"), spec) << "a job that is no array keeps its own";
}

// New arrays: the spec once, whatever the number of tasks; each task reads it back.
TEST(JobStoreArrays, AnArraysSpecIsStoredOnce) {
  TempDb db;
  auto store = JobStore::Open(db.path());
  ASSERT_TRUE(store) << store.error().message;
  Job job = MakeJob();
  job.spec.env = std::vector<std::string>{"BIG=" + std::string(100000, 'x')};
  std::vector<Job> tasks;
  for (int i = 0; i < 200; ++i) {
    tasks.push_back(job);
    tasks.back().array_index = i;
  }
  auto ids = (*store)->Insert(tasks, true);
  ASSERT_TRUE(ids) << ids.error().message;
  EXPECT_EQ(QueryText(db.path(), "SELECT count(*) FROM array_specs"), "1");
  EXPECT_LT(std::stoll(QueryText(db.path(), "SELECT sum(length(spec)) FROM jobs")) +
                std::stoll(QueryText(db.path(), "SELECT sum(length(spec)) FROM array_specs")),
            200000);
  auto last = (*store)->Get(ids->back());
  ASSERT_TRUE(last && *last);
  EXPECT_EQ((**last).spec.env, job.spec.env);
  EXPECT_EQ((**last).array_index, 199);
  auto head = (*store)->Head(ids->front());
  ASSERT_TRUE(head && *head);
  EXPECT_EQ((**head).array_job_id, ids->front());
}

// submit --array-file: each task has a command of its own, stored with the task; the rest of the
// spec (its 100 kB environment here) is still stored once and shared by the tasks read back.
TEST(JobStoreArrays, TasksFromACommandFileKeepTheirOwnCommands) {
  TempDb db;
  auto store = JobStore::Open(db.path());
  ASSERT_TRUE(store) << store.error().message;
  Job job = MakeJob();
  job.spec.env = std::vector<std::string>{"BIG=" + std::string(100000, 'x')};
  std::vector<Job> tasks;
  for (int i = 0; i < 50; ++i) {
    tasks.push_back(job);
    tasks.back().array_index = i;
    tasks.back().spec.argv = std::vector<std::string>{"python", "sweep.py", "--seed", std::to_string(i), "\xff"};
    tasks.back().own_argv = true;
  }
  auto ids = (*store)->Insert(tasks, true);
  ASSERT_TRUE(ids) << ids.error().message;
  EXPECT_LT(std::stoll(QueryText(db.path(), "SELECT sum(length(spec)) FROM jobs")) +
                std::stoll(QueryText(db.path(), "SELECT sum(length(spec)) FROM array_specs")) +
                std::stoll(QueryText(db.path(), "SELECT sum(length(argv)) FROM jobs")),
            110000)
      << "one environment, fifty small commands";
  auto listed = (*store)->List(JobFilter{true});
  ASSERT_TRUE(listed) << listed.error().message;
  ASSERT_EQ(listed->size(), 50u);
  for (const Job& task : *listed) {
    EXPECT_EQ(task.spec.argv, (std::vector<std::string>{"python", "sweep.py", "--seed", std::to_string(*task.array_index), "\xff"}));
    EXPECT_TRUE(task.own_argv);
    EXPECT_TRUE(task.spec.env.SharesWith((*listed)[0].spec.env)) << "the environment is read once, shared";
  }
  auto one = (*store)->Get(ids->at(7));
  ASSERT_TRUE(one && *one);
  EXPECT_EQ((**one).spec.argv[3], "7");
  // A plain array's tasks have no command of their own.
  std::vector<Job> plain(3, job);
  for (int i = 0; i < 3; ++i) plain[static_cast<std::size_t>(i)].array_index = i;
  auto plain_ids = (*store)->Insert(plain, true);
  ASSERT_TRUE(plain_ids);
  EXPECT_EQ(QueryText(db.path(), fmt::format("SELECT count(*) FROM jobs WHERE argv IS NULL AND id >= {}", plain_ids->front()).c_str()), "3");
  auto plain_task = (*store)->Get(plain_ids->back());
  ASSERT_TRUE(plain_task && *plain_task);
  EXPECT_FALSE((**plain_task).own_argv);
  EXPECT_EQ((**plain_task).spec.argv, job.spec.argv);
}

}  // namespace
}  // namespace gpulane::store

namespace gpulane::store {
namespace {

std::vector<Job> Tasks(std::size_t from, std::size_t to) {
  std::vector<Job> tasks;
  for (std::size_t i = from; i < to; ++i) {
    tasks.push_back(MakeJob());
    tasks.back().array_index = static_cast<int>(i);
  }
  return tasks;
}

std::size_t Listed(JobStore& store) {
  auto jobs = store.List(JobFilter{true});
  return jobs ? jobs->size() : 0;
}

// An array stored in parts (the daemon's loop serves others between them, issue 9 item 5): its
// ids are reserved with the first part, so a job stored between two parts gets an id after the
// whole array; its tasks are read by nobody until the last part is stored.
TEST(JobStoreArrayParts, ReserveTheIdsAndStayUnseenUntilTheLastPart) {
  auto opened = JobStore::Open(":memory:");
  ASSERT_TRUE(opened) << opened.error().message;
  JobStore& store = **opened;
  std::vector<Job> before = {MakeJob()};
  ASSERT_TRUE(store.Insert(before, false));
  std::vector<Job> first = Tasks(0, 4);
  auto array_id = store.InsertArrayPart(first, {0, 0, 10}, {{1000, "key-1", 0, 10}});
  ASSERT_TRUE(array_id) << array_id.error().message;
  EXPECT_EQ(*array_id, before[0].id + 1);
  EXPECT_EQ(first[3].id, *array_id + 3);
  EXPECT_EQ(first[3].array_job_id, *array_id);
  // Between parts: another submission, and what every read sees.
  std::vector<Job> between = {MakeJob()};
  ASSERT_TRUE(store.Insert(between, false));
  EXPECT_EQ(between[0].id, *array_id + 10) << "the next id after the array's reserved ten";
  EXPECT_EQ(Listed(store), 2u) << "the array's four stored tasks are not listed";
  EXPECT_EQ(store.ListIds(JobFilter{true})->size(), 2u);
  EXPECT_FALSE(*store.Get(*array_id + 1));
  EXPECT_FALSE(*store.Head(*array_id));
  EXPECT_TRUE(store.ArrayTasks(*array_id)->empty());
  EXPECT_FALSE(*store.TaskId(*array_id, 2));
  EXPECT_FALSE(*store.FindSubmission(1000, "key-1")) << "the key is stored with the last part";
  EXPECT_EQ(*store.MaxId(), *array_id + 10);
  // A part that does not fit is refused, nothing stored.
  std::vector<Job> too_many = Tasks(4, 11);
  EXPECT_FALSE(store.InsertArrayPart(too_many, {*array_id, 4, 10}));
  std::vector<Job> second = Tasks(4, 7), last = Tasks(7, 10);
  ASSERT_TRUE(store.InsertArrayPart(second, {*array_id, 4, 10}));
  EXPECT_EQ(Listed(store), 2u);
  ASSERT_TRUE(store.InsertArrayPart(last, {*array_id, 7, 10}, {{1000, "key-1", 0, 10}}));
  EXPECT_EQ(last[2].id, *array_id + 9);
  EXPECT_EQ(Listed(store), 12u);
  auto tasks = store.ArrayTasks(*array_id);
  ASSERT_EQ(tasks->size(), 10u);
  for (int i = 0; i < 10; ++i) EXPECT_EQ((*tasks)[i].index, i);
  EXPECT_EQ(**store.TaskId(*array_id, 9), *array_id + 9);
  auto key = store.FindSubmission(1000, "key-1");
  ASSERT_TRUE(key && *key);
  EXPECT_EQ((*key)->size(), 10u);
  EXPECT_EQ((*key)->front(), *array_id);
  auto task = store.Get(*array_id + 5);
  ASSERT_TRUE(task && *task);
  EXPECT_EQ((*task)->spec.argv, first[0].spec.argv) << "the spec stored once, with the first part";
}

// A daemon killed between parts: the array was never acknowledged. The next daemon's store
// removes its tasks and spec, keeps its ids used, and finds nothing of it.
TEST(JobStoreArrayParts, AnIncompleteArrayIsRemovedAtTheNextOpenAndItsIdsStayUsed) {
  TempDb db;
  std::int64_t array_id = 0;
  {
    auto store = JobStore::Open(db.path());
    ASSERT_TRUE(store) << store.error().message;
    std::vector<Job> done = Tasks(0, 3);
    ASSERT_TRUE((*store)->InsertArrayPart(done, {0, 0, 3}));  // a whole array in one part: complete
    std::vector<Job> part = Tasks(0, 5);
    auto id = (*store)->InsertArrayPart(part, {0, 0, 1000});
    ASSERT_TRUE(id) << id.error().message;
    array_id = *id;
  }
  auto store = JobStore::Open(db.path());
  ASSERT_TRUE(store) << store.error().message;
  EXPECT_EQ(Listed(**store), 3u) << "before the removal, still unseen";
  auto dropped = (*store)->DropIncompleteArrays();
  ASSERT_TRUE(dropped) << dropped.error().message;
  EXPECT_EQ(*dropped, 1u);
  EXPECT_EQ(QueryText(db.path(), "SELECT COUNT(*) FROM jobs"), "3");
  EXPECT_EQ(QueryText(db.path(), "SELECT COUNT(*) FROM array_specs"), "1");
  EXPECT_EQ(QueryText(db.path(), "SELECT COUNT(*) FROM incomplete_arrays"), "0");
  EXPECT_EQ(*(*store)->MaxId(), array_id + 999) << "the reserved ids are never given again";
  std::vector<Job> next = {MakeJob()};
  ASSERT_TRUE((*store)->Insert(next, false));
  EXPECT_EQ(next[0].id, array_id + 1000);
  EXPECT_EQ(*(*store)->DropIncompleteArrays(), 0u);
}

}  // namespace
}  // namespace gpulane::store
