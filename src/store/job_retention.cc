// Retention: finished jobs older than the daemon's daemon.keep_finished removed in bounded slices,
// and a record of the ids removed, so that a removed job is told apart from one that never was.
#include <sqlite3.h>

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "store/job_retention.h"
#include "store/job_store.h"
#include "store/sqlite_stmt.h"

namespace gpulane::store {

const char* const kRetentionSchema =
    "CREATE INDEX jobs_finished_end ON jobs(end_time)"
    " WHERE state IN ('completed','failed','cancelled','timeout') AND end_time IS NOT NULL;"
    "CREATE TABLE pruned_ids (first_id INTEGER PRIMARY KEY, last_id INTEGER NOT NULL, keep_s REAL NOT NULL);"
    "CREATE INDEX submissions_first ON submissions(first_id);";

namespace {

// The WHERE of jobs_finished_end, word for word (SQLite uses a partial index only then).
constexpr const char* kSelectOldFinished =
    "SELECT id, array_job_id FROM jobs WHERE state IN ('completed','failed','cancelled','timeout') "
    "AND end_time IS NOT NULL AND end_time < ?1{} ORDER BY end_time LIMIT ?2";
constexpr const char* kDeleteJob = "DELETE FROM jobs WHERE id = ?1";
constexpr const char* kRunBefore = "SELECT first_id, last_id, keep_s FROM pruned_ids WHERE first_id <= ?1 ORDER BY first_id DESC LIMIT 1";
constexpr const char* kRunAt = "SELECT last_id, keep_s FROM pruned_ids WHERE first_id = ?1";
constexpr const char* kDeleteRun = "DELETE FROM pruned_ids WHERE first_id = ?1";
constexpr const char* kInsertRun = "INSERT INTO pruned_ids (first_id, last_id, keep_s) VALUES (?1, ?2, ?3)";
constexpr const char* kDropArraySpec =
    "DELETE FROM array_specs WHERE array_job_id = ?1 AND NOT EXISTS (SELECT 1 FROM jobs WHERE array_job_id = ?1)";
constexpr const char* kSubmissionOf = "SELECT uid, key, first_id, count FROM submissions WHERE first_id <= ?1 ORDER BY first_id DESC LIMIT 1";
constexpr const char* kAnyJobIn = "SELECT 1 FROM jobs WHERE id >= ?1 AND id < ?1 + ?2 LIMIT 1";
constexpr const char* kDropSubmission = "DELETE FROM submissions WHERE uid = ?1 AND key = ?2";

Error PruneDbError(sqlite3* db, const std::string& what) {
  return MakeError(ErrorKind::kIo, fmt::format("database: {}: {}", what, sqlite3_errmsg(db)));
}

}  // namespace

Result<JobStore::PruneSlice> JobStore::PruneFinished(double ended_before_s, std::size_t max_jobs, double keep_s,
                                                     const std::vector<std::pair<std::int64_t, std::int64_t>>& spared) {
  PruneSlice slice;
  if (max_jobs == 0) return slice;
  if (Status s = Run("BEGIN IMMEDIATE"); !s.ok()) return s.error();
  auto fail = [this](Error e) {
    Rollback();
    return e;
  };
  std::vector<std::int64_t> ids;
  std::set<std::int64_t> arrays, heads;  // heads: each job's submission's first id, at most
  {
    std::string not_spared;
    for (const auto& [first, last] : spared) not_spared += fmt::format(" AND id NOT BETWEEN {} AND {}", first, last);
    Stmt select(db_, fmt::format(fmt::runtime(kSelectOldFinished), not_spared).c_str());
    if (!select.ok()) return fail(PruneDbError(db_, "find finished jobs to remove"));
    select.Bind(1, ended_before_s);
    select.Bind(2, static_cast<std::int64_t>(max_jobs));
    int rc;
    while ((rc = select.Step()) == SQLITE_ROW) {
      const std::int64_t id = sqlite3_column_int64(select.get(), 0);
      ids.push_back(id);
      if (auto array = OptInt(select.get(), 1)) {
        arrays.insert(*array);
        heads.insert(*array);
      } else {
        heads.insert(id);
      }
    }
    if (rc != SQLITE_DONE) return fail(PruneDbError(db_, "find finished jobs to remove"));
  }
  if (ids.empty()) {
    Rollback();  // nothing written: the empty transaction ends
    return slice;
  }
  Stmt remove(Cached(kDeleteJob));
  for (std::int64_t id : ids) {
    remove.Bind(1, id);
    if (!remove.ok() || remove.Step() != SQLITE_DONE) return fail(PruneDbError(db_, "remove a finished job"));
    remove.Reset();
  }
  std::sort(ids.begin(), ids.end());
  if (Status s = RecordPruned(ids, keep_s); !s.ok()) return fail(s.error());
  if (Status s = DropOrphans({arrays.begin(), arrays.end()}, {heads.begin(), heads.end()}, slice); !s.ok())
    return fail(s.error());
  if (Status s = Run("COMMIT"); !s.ok()) return fail(s.error());
  for (std::int64_t array : arrays) array_specs_.erase(array);
  slice.jobs = ids.size();
  slice.more = ids.size() == max_jobs;
  return slice;
}

Status JobStore::RecordPruned(const std::vector<std::int64_t>& ids, double keep_s) {
  Stmt before(Cached(kRunBefore)), at(Cached(kRunAt)), drop(Cached(kDeleteRun)), insert(Cached(kInsertRun));
  if (!before.ok() || !at.ok() || !drop.ok() || !insert.ok()) return PruneDbError(db_, "record removed jobs");
  auto drop_run = [&](std::int64_t first) {
    drop.Bind(1, first);
    const bool done = drop.Step() == SQLITE_DONE;
    drop.Reset();
    return done;
  };
  for (std::size_t i = 0; i < ids.size();) {
    std::int64_t first = ids[i], last = ids[i];
    while (++i < ids.size() && ids[i] == last + 1) last = ids[i];
    // Joined with the run that ends right before it and the one that starts right after it, when
    // they were removed under the same setting.
    before.Bind(1, first - 1);
    if (before.Step() == SQLITE_ROW && sqlite3_column_int64(before.get(), 1) == first - 1 &&
        sqlite3_column_double(before.get(), 2) == keep_s) {
      const std::int64_t joined = sqlite3_column_int64(before.get(), 0);
      before.Reset();
      if (!drop_run(joined)) return PruneDbError(db_, "record removed jobs");
      first = joined;
    }
    before.Reset();
    at.Bind(1, last + 1);
    if (at.Step() == SQLITE_ROW && sqlite3_column_double(at.get(), 1) == keep_s) {
      const std::int64_t joined = sqlite3_column_int64(at.get(), 0);
      at.Reset();
      if (!drop_run(last + 1)) return PruneDbError(db_, "record removed jobs");
      last = joined;
    }
    at.Reset();
    insert.Bind(1, first);
    insert.Bind(2, last);
    insert.Bind(3, keep_s);
    if (insert.Step() != SQLITE_DONE) return PruneDbError(db_, "record removed jobs");
    insert.Reset();
  }
  return Status::Ok();
}

Status JobStore::DropOrphans(const std::vector<std::int64_t>& arrays, const std::vector<std::int64_t>& heads,
                             PruneSlice& slice) {
  Stmt spec(Cached(kDropArraySpec));
  for (std::int64_t array : arrays) {
    spec.Bind(1, array);
    if (!spec.ok() || spec.Step() != SQLITE_DONE) return PruneDbError(db_, "remove an array's spec");
    slice.arrays += static_cast<std::size_t>(sqlite3_changes(db_));
    spec.Reset();
  }
  Stmt find(Cached(kSubmissionOf)), any(Cached(kAnyJobIn)), drop(Cached(kDropSubmission));
  if (!find.ok() || !any.ok() || !drop.ok()) return PruneDbError(db_, "remove a submission's key");
  for (std::int64_t head : heads) {
    find.Bind(1, head);
    const int rc = find.Step();
    if (rc == SQLITE_DONE) {
      find.Reset();
      continue;
    }
    if (rc != SQLITE_ROW) return PruneDbError(db_, "find a submission's key");
    const std::int64_t uid = sqlite3_column_int64(find.get(), 0);
    const std::string key = Text(find.get(), 1);
    const std::int64_t first = sqlite3_column_int64(find.get(), 2), count = sqlite3_column_int64(find.get(), 3);
    find.Reset();
    if (head >= first + count) continue;  // the nearest submission below holds other ids
    any.Bind(1, first);
    any.Bind(2, count);
    const int left = any.Step();
    any.Reset();
    if (left == SQLITE_ROW) continue;
    if (left != SQLITE_DONE) return PruneDbError(db_, "find a submission's jobs");
    drop.Bind(1, uid);
    drop.Bind(2, key);
    if (drop.Step() != SQLITE_DONE) return PruneDbError(db_, "remove a submission's key");
    drop.Reset();
    ++slice.submissions;
  }
  return Status::Ok();
}

Result<std::optional<double>> JobStore::PrunedAfter(std::int64_t id) {
  Stmt before(Cached(kRunBefore));
  if (!before.ok()) return PruneDbError(db_, "find a removed job");
  before.Bind(1, id);
  const int rc = before.Step();
  if (rc == SQLITE_DONE) return std::optional<double>();
  if (rc != SQLITE_ROW) return PruneDbError(db_, "find a removed job");
  if (sqlite3_column_int64(before.get(), 1) < id) return std::optional<double>();
  return std::optional<double>(sqlite3_column_double(before.get(), 2));
}

}  // namespace gpulane::store
