// CountJobs, and JobStore::Count (job_store.h): the daemon's count of a listing, beside it.
#include "store/job_counts.h"

#include <sqlite3.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fmt/format.h>

#include "store/job_store.h"
#include "store/sqlite_stmt.h"

namespace gpulane::store {

Result<JobCounts> CountJobs(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return JobCounts{};
    return MakeError(ErrorKind::kStore, fmt::format("cannot read the job database {}: {}", path, std::strerror(errno)));
  }
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, nullptr);
  sqlite3_stmt* stmt = nullptr;
  if (rc == SQLITE_OK) {
    sqlite3_busy_timeout(db, 2000);
    rc = sqlite3_prepare_v2(db,
                            "SELECT COUNT(*), COALESCE(SUM(state IN ('pending','held','launching','running')), 0) FROM jobs",
                            -1, &stmt, nullptr);
  }
  if (rc == SQLITE_OK) rc = sqlite3_step(stmt);
  JobCounts counts;
  if (rc == SQLITE_ROW) {
    counts.total = sqlite3_column_int64(stmt, 0);
    counts.unfinished = sqlite3_column_int64(stmt, 1);
  }
  const std::string why = db ? sqlite3_errmsg(db) : "out of memory";
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  if (rc != SQLITE_ROW)
    return MakeError(ErrorKind::kStore, fmt::format("cannot read the job database {}: {}", path, why));
  return counts;
}

Result<std::size_t> JobStore::Count(JobFilter filter) {
  filter.limit = 0;
  const std::string sql = FilterSql("COUNT(*)", filter, NotIncompleteSql());
  Stmt count(db_, sql.c_str());
  if (!count.ok() || count.Step() != SQLITE_ROW)
    return MakeError(ErrorKind::kIo, fmt::format("database: count jobs: {}", sqlite3_errmsg(db_)));
  return static_cast<std::size_t>(sqlite3_column_int64(count.get(), 0));
}

}  // namespace gpulane::store
