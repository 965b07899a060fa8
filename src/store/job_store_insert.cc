// Storing new jobs (JobStore::Insert) and arrays, whole or in parts (InsertArrayPart): their ids,
// the ids an array reserves, its incomplete parts, and the submissions' idempotency keys.
#include <sqlite3.h>

#include <algorithm>

#include <fmt/format.h>

#include "store/job_store.h"
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
constexpr const char* kInsertKey = "INSERT INTO submissions (uid, key, first_id, count) VALUES (?1, ?2, ?3, ?4)";

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

Result<std::int64_t> JobStore::MaxId() {
  auto next = NextId();
  if (!next) return next.error();
  return *next - 1;
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
    auto reserved = ReserveArray(tasks.front().spec, part.total, !last_part);
    if (!reserved) return fail(reserved.error());
    array_id = *reserved;
  }
  if (Status inserted = InsertTasks(tasks, array_id, part.offset); !inserted.ok()) return fail(inserted.error());
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
  std::int64_t id = array_id + static_cast<std::int64_t>(part.offset);
  for (Job& job : tasks) {
    job.id = id++;
    job.array_job_id = array_id;
  }
  return array_id;
}

Result<std::int64_t> JobStore::ReserveArray(const JobSpec& spec, std::size_t total, bool incomplete) {
  auto next = NextId();
  if (!next) return next.error();
  const std::int64_t array_id = *next;
  const std::int64_t reserved = array_id + static_cast<std::int64_t>(total) - 1;
  Stmt insert_spec(Cached(kInsertArraySpec));
  insert_spec.Bind(1, array_id);
  insert_spec.Bind(2, SpecToJson(spec).dump());
  if (!insert_spec.ok() || insert_spec.Step() != SQLITE_DONE) return DbError(db_, "database: insert array spec");
  // The reservation: AUTOINCREMENT gives the next job an id past sqlite_sequence's.
  Stmt raise(Cached(kRaiseSequence)), count(Cached(kCountSequence));
  raise.Bind(1, reserved);
  if (!raise.ok() || raise.Step() != SQLITE_DONE || !count.ok() || count.Step() != SQLITE_ROW)
    return DbError(db_, "database: reserve the array's ids");
  if (sqlite3_column_int64(count.get(), 0) == 0) {
    Stmt insert_seq(Cached(kInsertSequence));
    insert_seq.Bind(1, reserved);
    if (!insert_seq.ok() || insert_seq.Step() != SQLITE_DONE) return DbError(db_, "database: reserve the array's ids");
  }
  if (incomplete) {
    Stmt mark(Cached(kMarkIncomplete));
    mark.Bind(1, array_id);
    mark.Bind(2, static_cast<std::int64_t>(total));
    if (!mark.ok() || mark.Step() != SQLITE_DONE) return DbError(db_, "database: mark the array incomplete");
  }
  return array_id;
}

Status JobStore::InsertTasks(const std::vector<Job>& tasks, std::int64_t array_job_id, std::size_t offset) {
  Stmt insert(Cached(kInsertTask));
  if (!insert.ok()) return DbError(db_, "database: prepare insert");
  std::int64_t id = array_job_id + static_cast<std::int64_t>(offset);
  for (const Job& job : tasks) {
    insert.Bind(1, id);
    insert.Bind(2, array_job_id);
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
    if (insert.Step() != SQLITE_DONE) return DbError(db_, "database: insert array task");
    insert.Reset();
    ++id;
  }
  return Status::Ok();
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

}  // namespace gpulane::store
