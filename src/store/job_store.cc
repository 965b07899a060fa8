#include "store/job_store.h"

#include <sqlite3.h>
#include <sys/stat.h>

#include <algorithm>
#include <functional>
#include <iterator>
#include <memory>

#include <fmt/format.h>

#include "store/job_retention.h"
#include "store/sqlite_stmt.h"
#include "util/bytes_json.h"

namespace gpulane::store {
namespace {

constexpr const char* kInsertJob =
    "INSERT INTO jobs (array_job_id, array_index, uid, gid, user, spec, state, reason, submit_time, logs) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)";

// An array task: its spec is its array's (array_specs), but for its own command (argv, JSON; NULL:
// the array's) when its array came from a command file (submit --array-file).
constexpr const char* kInsertTask =
    "INSERT INTO jobs (id, array_job_id, array_index, uid, gid, user, spec, state, reason, submit_time, logs, argv) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, '', ?7, ?8, ?9, ?10, ?11)";

// The largest id used or reserved: AUTOINCREMENT's sqlite_sequence row (which an array's
// reservation raises), or the largest id (a store whose row is missing).
constexpr const char* kSelectLastId =
    "SELECT MAX(COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'jobs'), 0), COALESCE((SELECT MAX(id) FROM jobs), 0))";
constexpr const char* kRaiseSequence = "UPDATE sqlite_sequence SET seq = ?1 WHERE name = 'jobs' AND seq < ?1";
constexpr const char* kCountSequence = "SELECT COUNT(*) FROM sqlite_sequence WHERE name = 'jobs'";
constexpr const char* kInsertSequence = "INSERT INTO sqlite_sequence (name, seq) VALUES ('jobs', ?1)";
constexpr const char* kMarkIncomplete = "INSERT INTO incomplete_arrays (array_job_id, count) VALUES (?1, ?2)";
constexpr const char* kUnmarkIncomplete = "DELETE FROM incomplete_arrays WHERE array_job_id = ?1";

// An array's spec, stored once for all its tasks (whose own spec column is then empty).
constexpr const char* kInsertArraySpec = "INSERT INTO array_specs (array_job_id, spec) VALUES (?1, ?2)";
constexpr const char* kSelectArraySpec = "SELECT spec FROM array_specs WHERE array_job_id = ?1";
constexpr const char* kSelectHead = "SELECT id, array_job_id, state FROM jobs WHERE id = ?1";
constexpr const char* kSelectTaskId = "SELECT id FROM jobs WHERE array_job_id = ?1 AND array_index = ?2";

constexpr const char* kInsertKey = "INSERT INTO submissions (uid, key, first_id, count) VALUES (?1, ?2, ?3, ?4)";

constexpr const char* kFindKey = "SELECT first_id, count FROM submissions WHERE uid = ?1 AND key = ?2";

constexpr const char* kColumns =
    "id, array_job_id, array_index, uid, gid, user, spec, state, reason, submit_time, start_time, end_time, "
    "exit_code, gpus, supervisor_pid, logs, attempts, argv, isolation";

// The spec of array `array_job_id` (kSelectArraySpec), nullptr when there is none.
using ArraySpecLookup = std::function<std::shared_ptr<const JobSpec>(std::int64_t array_job_id)>;

// One row of kColumns; an array task's empty spec column is its array's spec (array_spec).
// Returns why it cannot be read ("" when it could).
std::string ReadRowFields(sqlite3_stmt* s, Job* job, const ArraySpecLookup& array_spec) {
  job->id = sqlite3_column_int64(s, 0);
  job->array_job_id = OptInt(s, 1);
  if (auto v = OptInt(s, 2)) job->array_index = static_cast<int>(*v);
  job->gid = static_cast<std::uint32_t>(sqlite3_column_int64(s, 4));
  if (job->array_job_id && sqlite3_column_bytes(s, 6) == 0) {
    auto shared = array_spec(*job->array_job_id);
    if (!shared) return fmt::format("the spec of its array {} cannot be read", *job->array_job_id);
    job->spec = *shared;  // its lists are shared, not copied
    if (sqlite3_column_type(s, 17) != SQLITE_NULL) {  // its own command (submit --array-file)
      std::vector<std::string> argv;
      auto stored = nlohmann::json::parse(Text(s, 17), nullptr, false);
      if (!BytesListFromJson(stored, &argv) || argv.empty()) return "its command (argv) cannot be read";
      job->spec.argv = std::move(argv);
      job->own_argv = true;
    }
  } else {
    auto spec = nlohmann::json::parse(Text(s, 6), nullptr, false);
    if (spec.is_discarded()) return "its spec is not JSON";
    if (Status parsed = SpecFromJson(spec, &job->spec); !parsed.ok()) return "its spec: " + parsed.error().message;
  }
  auto state = ParseState(Text(s, 7));
  if (!state) return fmt::format("its state '{}' is unknown", Text(s, 7).substr(0, 40));
  job->state = *state;
  job->reason = Text(s, 8);
  job->spec.request.submit_time_s = sqlite3_column_double(s, 9);  // Job::submit_time_s(): the one copy
  job->spec.request.uid = static_cast<std::uint32_t>(sqlite3_column_int64(s, 3));  // Job::uid(), user(): the
  job->spec.request.user = Text(s, 5);  // one copy, the row's owner, whatever its spec (or its array's) names
  job->start_time = OptDouble(s, 10);
  job->end_time = OptDouble(s, 11);
  if (auto v = OptInt(s, 12)) job->exit_code = static_cast<int>(*v);
  auto gpus = nlohmann::json::parse(Text(s, 13), nullptr, false);
  if (gpus.is_array()) job->gpu_uuids = gpus.get<std::vector<std::string>>();
  if (auto v = OptInt(s, 14)) job->supervisor_pid = static_cast<pid_t>(*v);
  // NULL: a job stored before log files were recorded (schema 1).
  if (sqlite3_column_type(s, 15) == SQLITE_NULL) job->logs.unrecorded = true;
  else job->logs = LogsFromJson(nlohmann::json::parse(Text(s, 15), nullptr, false));
  job->attempts = AttemptsFromJson(nlohmann::json::parse(Text(s, 16), nullptr, false));
  if (sqlite3_column_type(s, 18) != SQLITE_NULL) job->isolation = Text(s, 18);
  return "";
}

std::string ReadRow(sqlite3_stmt* s, Job* job, const ArraySpecLookup& array_spec) {
  try {
    return ReadRowFields(s, job, array_spec);
  } catch (const std::exception& e) {  // a value of the wrong type somewhere in its JSON
    return e.what();
  }
}

Error DbError(sqlite3* db, const std::string& what) {
  return MakeError(ErrorKind::kIo, fmt::format("{}: {}", what, sqlite3_errmsg(db)));
}

}  // namespace

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

namespace {

// Records each of `keys` (SubmissionKey::first indexes `ids`) in the open transaction.
Status RecordKeys(sqlite3* db, sqlite3_stmt* kept, const std::vector<SubmissionKey>& keys, const std::vector<std::int64_t>& ids,
                  std::size_t count) {
  Stmt record(kept);
  for (const SubmissionKey& key : keys) {
    if (!record.ok() || key.count == 0 || key.first >= ids.size() || key.first + key.count > count)
      return MakeError(ErrorKind::kInternal, "database: a submission key names no jobs");
    record.Bind(1, static_cast<std::int64_t>(key.uid));
    record.Bind(2, key.key);
    record.Bind(3, ids[key.first]);
    record.Bind(4, static_cast<std::int64_t>(key.count));
    if (record.Step() != SQLITE_DONE) return DbError(db, "database: record the submission's idempotency key");
    record.Reset();
  }
  return Status::Ok();
}

}  // namespace

Result<std::vector<std::int64_t>> JobStore::Insert(std::vector<Job>& jobs, bool array,
                                                   const std::vector<SubmissionKey>& keys) {
  if (array) {
    if (jobs.empty()) return std::vector<std::int64_t>();
    auto first = InsertArrayPart(jobs, ArrayPart{0, 0, jobs.size()}, keys);
    if (!first) return first.error();
    std::vector<std::int64_t> ids;
    ids.reserve(jobs.size());
    for (const Job& job : jobs) ids.push_back(job.id);
    return ids;
  }
  // Every submission comes through here: its statements are prepared once (Cached), not each time.
  Status s = Run("BEGIN IMMEDIATE");
  if (!s.ok()) return s.error();
  Stmt insert(Cached(kInsertJob));
  if (!insert.ok()) {
    Rollback();
    return DbError(db_, "database: prepare insert");
  }
  std::vector<std::int64_t> ids;
  for (Job& job : jobs) {
    insert.BindNull(1);
    if (job.array_index) insert.Bind(2, static_cast<std::int64_t>(*job.array_index));
    insert.Bind(3, static_cast<std::int64_t>(job.uid()));
    insert.Bind(4, static_cast<std::int64_t>(job.gid));
    insert.Bind(5, job.user());
    insert.Bind(6, SpecToJson(job.spec).dump());
    insert.Bind(7, std::string(StateName(job.state)));
    insert.Bind(8, job.reason);
    insert.Bind(9, job.submit_time_s());
    insert.Bind(10, LogsToJson(job.logs).dump());
    if (insert.Step() != SQLITE_DONE) {
      Error e = DbError(db_, "database: insert job");
      Rollback();
      return e;
    }
    insert.Reset();
    job.id = sqlite3_last_insert_rowid(db_);
    ids.push_back(job.id);
  }
  if (Status recorded = RecordKeys(db_, Cached(kInsertKey), keys, ids, ids.size()); !recorded.ok()) {
    Rollback();
    return recorded.error();
  }
  s = Run("COMMIT");
  if (!s.ok()) {
    Rollback();
    return s.error();
  }
  return ids;
}

Result<std::int64_t> JobStore::NextId() {
  Stmt last(Cached(kSelectLastId));
  if (!last.ok() || last.Step() != SQLITE_ROW) return DbError(db_, "database: next job id");
  return sqlite3_column_int64(last.get(), 0) + 1;
}

Result<std::int64_t> JobStore::InsertArrayPart(std::vector<Job>& tasks, const ArrayPart& part,
                                               const std::vector<SubmissionKey>& keys) {
  const bool first_part = part.array_job_id == 0;
  const bool last_part = part.offset + tasks.size() == part.total;
  if (tasks.empty() || part.offset + tasks.size() > part.total || (first_part && part.offset != 0) ||
      (!first_part && !incomplete_.count(part.array_job_id)))
    return MakeError(ErrorKind::kInvalidArgument,
                     fmt::format("database: tasks {} to {} are not a part of array {} of {} tasks still being stored",
                                 part.offset, part.offset + tasks.size(), part.array_job_id, part.total));
  Status s = Run("BEGIN IMMEDIATE");
  if (!s.ok()) return s.error();
  auto fail = [this](Error e) {
    Rollback();
    return e;
  };
  std::int64_t array_id = part.array_job_id;
  if (first_part) {
    auto next = NextId();
    if (!next) return fail(next.error());
    array_id = *next;
    const std::int64_t reserved = array_id + static_cast<std::int64_t>(part.total) - 1;
    Stmt spec(Cached(kInsertArraySpec));
    spec.Bind(1, array_id);
    spec.Bind(2, SpecToJson(tasks.front().spec).dump());
    if (!spec.ok() || spec.Step() != SQLITE_DONE) return fail(DbError(db_, "database: insert array spec"));
    // The reservation: AUTOINCREMENT gives the next job an id past sqlite_sequence's.
    Stmt raise(Cached(kRaiseSequence)), count(Cached(kCountSequence));
    raise.Bind(1, reserved);
    if (!raise.ok() || raise.Step() != SQLITE_DONE || !count.ok() || count.Step() != SQLITE_ROW)
      return fail(DbError(db_, "database: reserve the array's ids"));
    if (sqlite3_column_int64(count.get(), 0) == 0) {
      Stmt insert_seq(Cached(kInsertSequence));
      insert_seq.Bind(1, reserved);
      if (!insert_seq.ok() || insert_seq.Step() != SQLITE_DONE) return fail(DbError(db_, "database: reserve the array's ids"));
    }
    if (!last_part) {
      Stmt mark(Cached(kMarkIncomplete));
      mark.Bind(1, array_id);
      mark.Bind(2, static_cast<std::int64_t>(part.total));
      if (!mark.ok() || mark.Step() != SQLITE_DONE) return fail(DbError(db_, "database: mark the array incomplete"));
    }
  }
  Stmt insert(Cached(kInsertTask));
  if (!insert.ok()) return fail(DbError(db_, "database: prepare insert"));
  std::int64_t id = array_id + static_cast<std::int64_t>(part.offset);
  for (Job& job : tasks) {
    insert.Bind(1, id);
    insert.Bind(2, array_id);
    if (job.array_index) insert.Bind(3, static_cast<std::int64_t>(*job.array_index));
    insert.Bind(4, static_cast<std::int64_t>(job.uid()));
    insert.Bind(5, static_cast<std::int64_t>(job.gid));
    insert.Bind(6, job.user());
    insert.Bind(7, std::string(StateName(job.state)));
    insert.Bind(8, job.reason);
    insert.Bind(9, job.submit_time_s());
    insert.Bind(10, LogsToJson(job.logs).dump());
    if (job.own_argv) insert.Bind(11, BytesListToJson(job.spec.argv).dump());
    else insert.BindNull(11);
    if (insert.Step() != SQLITE_DONE) return fail(DbError(db_, "database: insert array task"));
    insert.Reset();
    ++id;
  }
  if (last_part) {
    if (!first_part) {
      Stmt unmark(Cached(kUnmarkIncomplete));
      unmark.Bind(1, array_id);
      if (!unmark.ok() || unmark.Step() != SQLITE_DONE) return fail(DbError(db_, "database: mark the array complete"));
    }
    const std::vector<std::int64_t> first_id{array_id};
    if (Status recorded = RecordKeys(db_, Cached(kInsertKey), keys, first_id, part.total); !recorded.ok())
      return fail(recorded.error());
  }
  s = Run("COMMIT");
  if (!s.ok()) return fail(s.error());
  if (first_part && !last_part) incomplete_.emplace(array_id, part.total);
  if (last_part) incomplete_.erase(array_id);
  id = array_id + static_cast<std::int64_t>(part.offset);
  for (Job& job : tasks) {
    job.id = id++;
    job.array_job_id = array_id;
  }
  return array_id;
}

Status JobStore::LoadIncomplete() {
  incomplete_.clear();
  Stmt select(db_, "SELECT array_job_id, count FROM incomplete_arrays");
  int rc;
  while ((rc = select.Step()) == SQLITE_ROW)
    incomplete_.emplace(sqlite3_column_int64(select.get(), 0),
                        static_cast<std::size_t>(std::max<std::int64_t>(1, sqlite3_column_int64(select.get(), 1))));
  if (rc != SQLITE_DONE) return DbError(db_, "database: read incomplete arrays");
  return Status::Ok();
}

Result<std::size_t> JobStore::DropIncompleteArrays(std::optional<std::int64_t> array_job_id) {
  std::vector<std::pair<std::int64_t, std::size_t>> doomed;
  for (const auto& [id, count] : incomplete_)
    if (!array_job_id || id == *array_job_id) doomed.emplace_back(id, count);
  if (doomed.empty()) return std::size_t{0};
  Status s = Run("BEGIN IMMEDIATE");
  if (!s.ok()) return s.error();
  Stmt tasks(db_, "DELETE FROM jobs WHERE id >= ?1 AND id < ?1 + ?2 AND array_job_id = ?1");
  Stmt spec(db_, "DELETE FROM array_specs WHERE array_job_id = ?1");
  Stmt unmark(Cached(kUnmarkIncomplete));
  for (const auto& [id, count] : doomed) {
    tasks.Bind(1, id);
    tasks.Bind(2, static_cast<std::int64_t>(count));
    spec.Bind(1, id);
    unmark.Bind(1, id);
    if (tasks.Step() != SQLITE_DONE || spec.Step() != SQLITE_DONE || !unmark.ok() || unmark.Step() != SQLITE_DONE) {
      Error e = DbError(db_, "database: remove an incomplete array");
      Rollback();
      return e;
    }
    tasks.Reset();
    spec.Reset();
    unmark.Reset();
  }
  s = Run("COMMIT");
  if (!s.ok()) {
    Rollback();
    return s.error();
  }
  for (const auto& [id, count] : doomed) {
    incomplete_.erase(id);
    array_specs_.erase(id);
  }
  return doomed.size();
}

bool JobStore::IsIncomplete(std::int64_t id) const {
  auto it = incomplete_.upper_bound(id);
  if (it == incomplete_.begin()) return false;
  --it;
  return id < it->first + static_cast<std::int64_t>(it->second);
}

std::string JobStore::NotIncompleteSql() const {
  std::string sql;
  for (const auto& [id, count] : incomplete_)
    sql += fmt::format(" AND id NOT BETWEEN {} AND {}", id, id + static_cast<std::int64_t>(count) - 1);
  return sql;
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

std::string JobStore::FilterSql(const char* what, const JobFilter& filter, const std::string& also) {
  std::string sql = fmt::format("SELECT {} FROM jobs WHERE 1{}", what, also);
  if (!filter.include_finished) sql += " AND state IN ('pending','held','launching','running')";
  if (filter.uid) sql += fmt::format(" AND uid = {}", *filter.uid);
  if (filter.min_id) sql += fmt::format(" AND id >= {}", *filter.min_id);
  if (filter.max_id) sql += fmt::format(" AND id <= {}", *filter.max_id);
  sql += filter.limit ? fmt::format(" ORDER BY id DESC LIMIT {}", filter.limit) : " ORDER BY id";
  return sql;
}

Result<std::optional<std::vector<std::int64_t>>> JobStore::FindSubmission(std::uint32_t uid, const std::string& key) {
  Stmt find(Cached(kFindKey));
  if (!find.ok()) return DbError(db_, "database: find a submission's key");
  find.Bind(1, static_cast<std::int64_t>(uid));
  find.Bind(2, key);
  const int rc = find.Step();
  if (rc == SQLITE_DONE) return std::optional<std::vector<std::int64_t>>();
  if (rc != SQLITE_ROW) return DbError(db_, "database: find a submission's key");
  const std::int64_t first = sqlite3_column_int64(find.get(), 0), count = sqlite3_column_int64(find.get(), 1);
  std::vector<std::int64_t> ids;
  for (std::int64_t i = 0; i < count; ++i) ids.push_back(first + i);
  return std::optional<std::vector<std::int64_t>>(std::move(ids));
}

Result<std::vector<Job>> JobStore::List(const JobFilter& filter, std::vector<DamagedRow>* damaged) {
  const std::string sql = FilterSql(kColumns, filter, NotIncompleteSql());
  Stmt select(db_, sql.c_str());
  if (!select.ok()) return DbError(db_, "database: list jobs");
  std::vector<Job> out;
  int rc;
  while ((rc = select.Step()) == SQLITE_ROW) {
    Job job;
    std::string why = ReadRow(select.get(), &job, [this](std::int64_t array) { return ArraySpec(array); });
    if (why.empty()) out.push_back(std::move(job));
    else if (damaged) damaged->push_back({job.id, std::move(why)});
  }
  if (rc != SQLITE_DONE) return DbError(db_, "database: list jobs");
  if (filter.limit) std::reverse(out.begin(), out.end());
  return out;
}

Result<std::vector<std::int64_t>> JobStore::ListIds(const JobFilter& filter) {
  const std::string sql = FilterSql("id", filter, NotIncompleteSql());
  Stmt select(db_, sql.c_str());
  if (!select.ok()) return DbError(db_, "database: list jobs");
  std::vector<std::int64_t> out;
  int rc;
  while ((rc = select.Step()) == SQLITE_ROW) out.push_back(sqlite3_column_int64(select.get(), 0));
  if (rc != SQLITE_DONE) return DbError(db_, "database: list jobs");
  if (filter.limit) std::reverse(out.begin(), out.end());
  return out;
}

Result<std::vector<Job>> JobStore::LoadUnfinished(std::vector<DamagedRow>* damaged) {
  auto jobs = List(JobFilter{}, damaged);
  if (!jobs || !damaged) return jobs;
  if (Status odd = AddUnknownStates(damaged); !odd.ok()) return odd.error();
  return jobs;
}

Status JobStore::AddUnknownStates(std::vector<DamagedRow>* damaged) {
  Stmt odd(db_, "SELECT id, state FROM jobs WHERE state NOT IN "
                "('pending','held','launching','running','completed','failed','cancelled','timeout') ORDER BY id");
  for (int rc = odd.Step();; rc = odd.Step())
    if (rc != SQLITE_ROW) return rc == SQLITE_DONE ? Status::Ok() : Status(DbError(db_, "database: list jobs"));
    else damaged->push_back({sqlite3_column_int64(odd.get(), 0), fmt::format("its state '{}' is unknown", Text(odd.get(), 1).substr(0, 40))});
}

Result<std::optional<Job>> JobStore::Get(std::int64_t id) {
  if (IsIncomplete(id)) return std::optional<Job>();
  Stmt select(db_, fmt::format("SELECT {} FROM jobs WHERE id = ?1", kColumns).c_str());
  select.Bind(1, id);
  int rc = select.Step();
  if (rc == SQLITE_DONE) return std::optional<Job>();
  if (rc != SQLITE_ROW) return DbError(db_, "database: get job");
  Job job;
  if (std::string why = ReadRow(select.get(), &job, [this](std::int64_t array) { return ArraySpec(array); }); !why.empty())
    return MakeError(ErrorKind::kStore, fmt::format("job {} is damaged in the database ({}): it is kept there as it is and "
                                                    "not run; see the daemon's log",
                                                    id, why));
  return std::optional<Job>(std::move(job));
}

Result<std::optional<JobStore::JobHead>> JobStore::Head(std::int64_t id) {
  if (IsIncomplete(id)) return std::optional<JobHead>();
  Stmt select(Cached(kSelectHead));
  select.Bind(1, id);
  int rc = select.Step();
  if (rc == SQLITE_DONE) return std::optional<JobHead>();
  if (rc != SQLITE_ROW) return DbError(db_, "database: get job");
  auto state = ParseState(Text(select.get(), 2));
  if (!state) return MakeError(ErrorKind::kInternal, fmt::format("job {} is damaged in the database", id));
  return std::optional<JobHead>(JobHead{id, OptInt(select.get(), 1), *state});
}

Result<std::vector<JobStore::UsageRow>> JobStore::UsageSince(double end_after_s) {
  // An array task's spec column is empty: its request is in array_specs.
  Stmt select(db_,
              "SELECT user, start_time, end_time, json_array_length(gpus),"
              " json_extract(s, '$.request.count'), json_extract(s, '$.request.mem_bytes') FROM ("
              "  SELECT user, start_time, end_time, gpus, CASE WHEN spec = '' THEN"
              "   (SELECT a.spec FROM array_specs a WHERE a.array_job_id = jobs.array_job_id) ELSE spec END AS s"
              "  FROM jobs WHERE start_time IS NOT NULL AND end_time IS NOT NULL AND end_time >= ?1"
              "  AND state NOT IN ('pending','held','launching','running') ORDER BY id)");
  select.Bind(1, end_after_s);
  std::vector<UsageRow> out;
  int rc;
  while ((rc = select.Step()) == SQLITE_ROW) {
    sqlite3_stmt* st = select.get();
    UsageRow row;
    row.user = Text(st, 0);
    row.start_time = sqlite3_column_double(st, 1);
    row.end_time = sqlite3_column_double(st, 2);
    const std::int64_t held = sqlite3_column_type(st, 3) == SQLITE_NULL ? 0 : sqlite3_column_int64(st, 3);
    const std::int64_t asked = sqlite3_column_type(st, 4) == SQLITE_NULL ? 1 : sqlite3_column_int64(st, 4);
    row.gpus = static_cast<unsigned>(std::clamp<std::int64_t>(held > 0 ? held : asked, 0, sched::kMaxGpuCount));
    if (sqlite3_column_type(st, 5) != SQLITE_NULL) row.mem_bytes = static_cast<std::uint64_t>(std::max<std::int64_t>(0, sqlite3_column_int64(st, 5)));
    out.push_back(std::move(row));
  }
  if (rc != SQLITE_DONE) return DbError(db_, "database: usage");
  return out;
}

Result<std::vector<JobState>> JobStore::FinishedArrayStates(std::int64_t array_job_id) {
  Stmt select(db_, "SELECT state FROM jobs WHERE array_job_id = ?1 AND state NOT IN ('pending','held','launching','running')");
  select.Bind(1, array_job_id);
  std::vector<JobState> out;
  int rc;
  while ((rc = select.Step()) == SQLITE_ROW)
    if (auto s = ParseState(Text(select.get(), 0))) out.push_back(*s);
  if (rc != SQLITE_DONE) return DbError(db_, "database: array states");
  return out;
}

Result<std::vector<JobStore::Task>> JobStore::ArrayTasks(std::int64_t array_job_id) {
  if (IsIncomplete(array_job_id)) return std::vector<Task>();
  Stmt select(db_,
              "SELECT id, array_index FROM jobs WHERE id >= ?1 AND id < ?1 + ?2 AND array_job_id = ?1 ORDER BY id");
  select.Bind(1, array_job_id);
  select.Bind(2, static_cast<std::int64_t>(kMaxArrayTasks));
  std::vector<Task> out;
  int rc;
  while ((rc = select.Step()) == SQLITE_ROW)
    out.push_back({sqlite3_column_int64(select.get(), 0), sqlite3_column_int(select.get(), 1)});
  if (rc != SQLITE_DONE) return DbError(db_, "database: array tasks");
  return out;
}

std::shared_ptr<const JobSpec> JobStore::ArraySpec(std::int64_t array_job_id) {
  if (auto it = array_specs_.find(array_job_id); it != array_specs_.end()) return it->second;
  Stmt select(Cached(kSelectArraySpec));
  select.Bind(1, array_job_id);
  if (select.Step() != SQLITE_ROW) return nullptr;
  auto spec = nlohmann::json::parse(Text(select.get(), 0), nullptr, false);
  auto parsed = std::make_shared<JobSpec>();
  if (spec.is_discarded() || !SpecFromJson(spec, parsed.get()).ok()) return nullptr;
  if (array_specs_.size() >= kArraySpecsKept) array_specs_.clear();  // specs never change: any may go
  array_specs_.emplace(array_job_id, parsed);
  return parsed;
}

Result<std::optional<std::int64_t>> JobStore::TaskId(std::int64_t array_job_id, int index) {
  if (IsIncomplete(array_job_id)) return std::optional<std::int64_t>();
  Stmt select(Cached(kSelectTaskId));
  select.Bind(1, array_job_id);
  select.Bind(2, static_cast<std::int64_t>(index));
  int rc = select.Step();
  if (rc == SQLITE_DONE) return std::optional<std::int64_t>();
  if (rc != SQLITE_ROW) return DbError(db_, "database: find array task");
  return std::optional<std::int64_t>(sqlite3_column_int64(select.get(), 0));
}

Status JobStore::CheckWritable() {
  Status s = Run("BEGIN IMMEDIATE");
  if (!s.ok()) return s;
  s = Run("COMMIT");
  if (!s.ok()) Rollback();
  return s;
}

Result<std::int64_t> JobStore::MaxId() {
  auto next = NextId();
  if (!next) return next.error();
  return *next - 1;
}

}  // namespace gpulane::store
