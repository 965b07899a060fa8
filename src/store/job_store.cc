// The job store's connection: opening and checking the database, its schema's migrations, the
// statement cache and transactions, and the updates of stored jobs. New jobs and arrays are stored
// by job_store_insert.cc, jobs read by job_store_read.cc.
#include "store/job_store.h"

#include <sqlite3.h>
#include <sys/stat.h>

#include <iterator>
#include <memory>

#include <fmt/format.h>

#include "store/job_retention.h"
#include "store/sqlite_stmt.h"

namespace gpulane::store {

Result<std::unique_ptr<JobStore>> JobStore::Open(const std::string& path, int busy_timeout_ms) {
  // A file nobody may write: SQLite would open it for reading only (or root would write it
  // anyway); either way it is not a store to run a daemon on.
  struct stat st {};
  if (path != ":memory:" && stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && !(st.st_mode & S_IWUSR))
    return MakeError(ErrorKind::kStore, fmt::format("the job database {} is read-only (mode {:04o}): make it writable "
                                                    "(chmod u+w) or restore a writable copy",
                                                    path, st.st_mode & 07777));
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string why = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return MakeError(ErrorKind::kIo, fmt::format("cannot open the job database {}: {}", path, why));
  }
  std::unique_ptr<JobStore> store(new JobStore(db));
  if (sqlite3_db_readonly(db, "main") == 1)
    return MakeError(ErrorKind::kStore, fmt::format("the job database {} can only be opened for reading (a read-only "
                                                    "file system or folder?): gpulane needs to write it",
                                                    path));
  sqlite3_busy_timeout(db, busy_timeout_ms);
  // quick_check first: on a damaged file it (or the pragmas) fail, and we stop instead of starting empty.
  {
    Stmt check(db, "PRAGMA quick_check");
    std::string result = check.ok() && check.Step() == SQLITE_ROW ? Text(check.get(), 0) : sqlite3_errmsg(db);
    if (result != "ok")
      return MakeError(ErrorKind::kStore,
                       fmt::format("the job database {} is damaged ({}): move it aside and restore a backup, or "
                                   "start afresh by removing it (queued jobs would be lost)",
                                   path, result));
  }
  for (const char* pragma : {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL", "PRAGMA foreign_keys=ON"}) {
    Status s = store->Exec(pragma);
    if (!s.ok()) return s.error();
  }
  Status migrated = store->Migrate();
  if (!migrated.ok()) return migrated.error();
  if (Status loaded = store->LoadIncomplete(); !loaded.ok()) return loaded.error();
  return store;
}

void JobStore::SetBusyTimeout(int busy_timeout_ms) { sqlite3_busy_timeout(db_, busy_timeout_ms); }

JobStore::~JobStore() {
  for (auto& [sql, stmt] : cached_) sqlite3_finalize(stmt);
  sqlite3_close(db_);
}

sqlite3_stmt* JobStore::Cached(const char* sql) {
  for (auto& [text, stmt] : cached_)
    if (text == sql) return stmt;
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &stmt, nullptr) != SQLITE_OK) {
    sqlite3_finalize(stmt);
    return nullptr;
  }
  cached_.emplace_back(sql, stmt);
  return stmt;
}

Status JobStore::Run(const char* sql) {
  Stmt stmt(Cached(sql));
  if (stmt.ok() && stmt.Step() == SQLITE_DONE) return Status::Ok();
  return DbError(db_, fmt::format("database: {}", sql));
}

void JobStore::Rollback() {
  // After a failed statement: nothing to do when the rollback fails too (SQLite has rolled the
  // transaction back itself, or the connection is gone); the caller reports the first error.
  Status ignored = Exec("ROLLBACK");
  (void)ignored;
}

Status JobStore::Exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string message = fmt::format("database: {} ({})", err ? err : "error", sql);
    sqlite3_free(err);
    return MakeError(ErrorKind::kIo, message);
  }
  return Status::Ok();
}

Status JobStore::Migrate() {
  Stmt version(db_, "PRAGMA user_version");
  int current = version.Step() == SQLITE_ROW ? sqlite3_column_int(version.get(), 0) : 0;
  if (current > kSchemaVersion)
    return MakeError(ErrorKind::kStore, fmt::format("the job database has schema version {}, newer than this "
                                                       "gpulane's {}: run the newer gpulane",
                                                       current, kSchemaVersion));
  // Each step moves the schema from version i to i + 1 inside one transaction.
  static const char* const kSteps[] = {
      "CREATE TABLE jobs ("
      " id INTEGER PRIMARY KEY AUTOINCREMENT,"
      " array_job_id INTEGER, array_index INTEGER,"
      " uid INTEGER NOT NULL, gid INTEGER NOT NULL, user TEXT NOT NULL,"
      " spec TEXT NOT NULL, state TEXT NOT NULL, reason TEXT NOT NULL DEFAULT '',"
      " submit_time REAL NOT NULL, start_time REAL, end_time REAL, exit_code INTEGER,"
      " gpus TEXT NOT NULL DEFAULT '[]', supervisor_pid INTEGER);"
      "CREATE INDEX jobs_unfinished ON jobs(state) WHERE state IN ('pending','held','launching','running');"
      "CREATE INDEX jobs_uid ON jobs(uid);",
      // 2: the log files each job's output went to (JSON, store::LogsToJson); NULL for older jobs.
      "ALTER TABLE jobs ADD COLUMN logs TEXT;",
      // 3: the spec holds the one request type (sched::Request, proto/request_json.h) instead of
      // "gpus", "priority" and "time_limit_s" of its own.
      "UPDATE jobs SET spec = json_remove(json_set(spec, '$.request', json_object("
      " 'count', coalesce(json_extract(spec, '$.gpus.count'), 1),"
      " 'mem_bytes', json_extract(spec, '$.gpus.mem_bytes'),"
      " 'min_free_bytes', json_extract(spec, '$.gpus.min_free_bytes'),"
      " 'max_util_pct', json_extract(spec, '$.gpus.max_util_pct'),"
      " 'share_foreign', json(CASE WHEN json_extract(spec, '$.gpus.share_foreign') THEN 'true' ELSE 'false' END),"
      " 'order', 'memory',"
      " 'gpu_list', coalesce(json_extract(spec, '$.gpus.gpu_list'), ''),"
      " 'uid', uid, 'user', user,"
      " 'priority', coalesce(json_extract(spec, '$.priority'), 0),"
      " 'submit_time_s', submit_time,"
      " 'time_limit_s', json_extract(spec, '$.time_limit_s'))),"
      " '$.gpus', '$.priority', '$.time_limit_s');",
      // 4: an array's spec is stored once, in array_specs, and its tasks' spec column is empty (a
      // 1 MiB environment times 1,000 tasks was 1 GB); a task is found by array and index.
      "CREATE TABLE array_specs (array_job_id INTEGER PRIMARY KEY, spec TEXT NOT NULL);"
      "INSERT INTO array_specs (array_job_id, spec) SELECT id, spec FROM jobs WHERE array_job_id = id;"
      "UPDATE jobs SET spec = '' WHERE array_job_id IS NOT NULL AND array_job_id IN (SELECT array_job_id FROM array_specs);"
      "CREATE INDEX jobs_array_task ON jobs(array_job_id, array_index) WHERE array_job_id IS NOT NULL;",
      // 5: submissions' idempotency keys (unique per uid) and the ids each one got; its jobs take
      // consecutive ids (one transaction of the one writer).
      "CREATE TABLE submissions ("
      " uid INTEGER NOT NULL, key TEXT NOT NULL,"
      " first_id INTEGER NOT NULL, count INTEGER NOT NULL,"
      " PRIMARY KEY (uid, key)) WITHOUT ROWID;",
      // 6: the earlier attempts of retried jobs (--retry; JSON, store::AttemptsToJson).
      "ALTER TABLE jobs ADD COLUMN attempts TEXT NOT NULL DEFAULT '[]';",
      // 7: arrays being stored in parts (InsertArrayPart), until their last part is: their ids
      // array_job_id .. array_job_id + count - 1 are reserved and left out of every read.
      "CREATE TABLE incomplete_arrays (array_job_id INTEGER PRIMARY KEY, count INTEGER NOT NULL);",
      // 8: an array task's own command (submit --array-file: one command line per task), a JSON
      // list as the spec's argv; NULL: its array's spec's. Only the command is per task, so an
      // array of 10,000 commands stores its environment once.
      "ALTER TABLE jobs ADD COLUMN argv TEXT;",
      // 9: what device isolation each job was given, as its supervisor recorded it (Job::isolation);
      // NULL: not recorded.
      "ALTER TABLE jobs ADD COLUMN isolation TEXT;",
      kRetentionSchema,  // 10: retention of finished jobs (job_retention.h)
  };
  static_assert(std::size(kSteps) == kSchemaVersion, "one step per schema version");
  for (int v = current; v < kSchemaVersion; ++v) {
    Status s = Exec("BEGIN IMMEDIATE");
    if (!s.ok()) return s;
    s = Exec(kSteps[v]);
    if (s.ok()) s = Exec(fmt::format("PRAGMA user_version={}", v + 1).c_str());
    if (!s.ok()) {
      Rollback();
      return s;
    }
    s = Exec("COMMIT");
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

Status JobStore::Update(const std::vector<const Job*>& jobs) {
  if (jobs.empty()) return Status::Ok();
  Status s = Run("BEGIN IMMEDIATE");
  if (!s.ok()) return s;
  Stmt update(db_,
              "UPDATE jobs SET state=?2, reason=?3, start_time=?4, end_time=?5, exit_code=?6, gpus=?7, "
              "supervisor_pid=?8, logs=?9, attempts=?10, isolation=?11 WHERE id=?1");
  for (const Job* job : jobs) {
    update.Bind(1, job->id);
    update.Bind(2, std::string(StateName(job->state)));
    update.Bind(3, job->reason);
    update.BindOpt(4, job->start_time);
    update.BindOpt(5, job->end_time);
    update.BindOpt(6, job->exit_code);
    update.Bind(7, nlohmann::json(job->gpu_uuids).dump());
    update.BindOpt(8, job->supervisor_pid);
    if (job->logs.unrecorded) update.BindNull(9);
    else update.Bind(9, LogsToJson(job->logs).dump());
    update.Bind(10, AttemptsToJson(job->attempts).dump());
    if (job->isolation.empty()) update.BindNull(11);
    else update.Bind(11, job->isolation);
    if (update.Step() != SQLITE_DONE) {
      Error e = DbError(db_, "database: update job");
      Rollback();
      return e;
    }
    update.Reset();
  }
  s = Run("COMMIT");
  if (!s.ok()) Rollback();
  return s;
}

Status JobStore::CheckWritable() {
  Status s = Run("BEGIN IMMEDIATE");
  if (!s.ok()) return s;
  s = Run("COMMIT");
  if (!s.ok()) Rollback();
  return s;
}

}  // namespace gpulane::store
