#include "store/history_store.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "store/sqlite_stmt.h"

namespace gpulane::store {
namespace {

// A job's GPUs (UUIDs, indices) as one column: "a,b" (neither has a comma). Read 100,000 times
// for a month's report, so no JSON parser per row.
std::string JoinList(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ",") + item;
  return out;
}

void SplitList(const char* text, std::vector<std::string>& out) {
  for (const char* p = text; *p;) {
    const char* comma = std::strchr(p, ',');
    const char* end = comma ? comma : p + std::strlen(p);
    if (end > p) out.emplace_back(p, end);
    p = comma ? comma + 1 : end;
  }
}

// Column `i` as C text ("" for NULL).
const char* Column(sqlite3_stmt* s, int i) {
  const unsigned char* t = sqlite3_column_text(s, i);
  return t ? reinterpret_cast<const char*>(t) : "";
}

constexpr const char* kSchema[] = {
    "CREATE TABLE IF NOT EXISTS gpu_history ("
    " length_s REAL NOT NULL, gpu_uuid TEXT NOT NULL, start_s REAL NOT NULL, samples INTEGER NOT NULL,"
    " util_gpu_mean REAL, util_gpu_max REAL, util_memory_mean REAL, memory_used_mean REAL, memory_used_max REAL,"
    " power_mean_mw REAL, temperature_max_c REAL, clock_sm_mean REAL, energy_mj INTEGER,"
    " clocks_event_reasons INTEGER NOT NULL, xid_errors INTEGER NOT NULL, failed_samples INTEGER NOT NULL,"
    " PRIMARY KEY (length_s, gpu_uuid, start_s)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS job_usage ("
    " id INTEGER PRIMARY KEY AUTOINCREMENT, job_id TEXT NOT NULL, uid INTEGER NOT NULL, user TEXT NOT NULL,"
    " name TEXT NOT NULL, gpu_uuids TEXT NOT NULL, gpu_indices TEXT NOT NULL, start_s REAL NOT NULL, end_s REAL NOT NULL,"
    "   /* gpu_uuids, gpu_indices: comma-separated */"
    " wait_s REAL, gpus REAL NOT NULL, gpu_s REAL NOT NULL, energy_j REAL, peak_memory_bytes INTEGER,"
    " mean_memory_bytes REAL, mean_util_pct REAL, p10_util_pct REAL, idle_fraction REAL, samples INTEGER NOT NULL,"
    " job_text TEXT)",  // an array task's "12_3"; NULL for other jobs (AddJobTextColumn adds it to older files)
    "CREATE INDEX IF NOT EXISTS job_usage_end ON job_usage (end_s)",
    "CREATE INDEX IF NOT EXISTS job_usage_job ON job_usage (job_id)",
    "CREATE TABLE IF NOT EXISTS events ("
    " id INTEGER PRIMARY KEY AUTOINCREMENT, time_s REAL NOT NULL, kind TEXT NOT NULL, gpu_uuid TEXT NOT NULL,"
    " gpu_index INTEGER, job_id TEXT NOT NULL, user TEXT NOT NULL, message TEXT NOT NULL, cleared_s REAL)",
    "CREATE INDEX IF NOT EXISTS events_time ON events (time_s)",
};

// A history file from before job_usage had job_text (2026-12-07) gets the column, NULL in its rows:
// their array tasks keep the number they were recorded by.
bool HasJobTextColumn(sqlite3* db) {
  Stmt info(db, "PRAGMA table_info(job_usage)");
  while (info.ok() && info.Step() == SQLITE_ROW)
    if (std::strcmp(Column(info.get(), 1), "job_text") == 0) return true;
  return false;
}

Result<sqlite3*> OpenChecked(const std::string& path) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr) !=
      SQLITE_OK) {
    std::string why = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return MakeError(ErrorKind::kIo, fmt::format("cannot open the history database {}: {}", path, why));
  }
  sqlite3_busy_timeout(db, 1000);
  Stmt check(db, "PRAGMA quick_check");
  const std::string result = check.ok() && check.Step() == SQLITE_ROW ? Text(check.get(), 0) : sqlite3_errmsg(db);
  if (result != "ok") {
    sqlite3_close(db);
    return MakeError(ErrorKind::kStore, result);
  }
  return db;
}

}  // namespace

Result<std::unique_ptr<HistoryStore>> HistoryStore::Open(const std::string& path) {
  auto db = OpenChecked(path);
  if (!db && db.error().kind == ErrorKind::kStore && path != ":memory:") {
    const std::string aside = path + ".damaged";
    if (std::rename(path.c_str(), aside.c_str()) == 0) {
      std::remove((path + "-wal").c_str());
      std::remove((path + "-shm").c_str());
      db = OpenChecked(path);
    }
  }
  if (!db) return MakeError(ErrorKind::kIo, fmt::format("the history database {}: {}", path, db.error().message));
  std::unique_ptr<HistoryStore> store(new HistoryStore(*db));
  // History is not the queue: a power loss may cost its last seconds, never its consistency.
  for (const char* pragma : {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL"})
    if (Status s = store->Exec(pragma); !s.ok()) return s.error();
  for (const char* sql : kSchema)
    if (Status s = store->Exec(sql); !s.ok()) return s.error();
  if (!HasJobTextColumn(store->db_))
    if (Status s = store->Exec("ALTER TABLE job_usage ADD COLUMN job_text TEXT"); !s.ok()) return s.error();
  return store;
}

HistoryStore::~HistoryStore() { sqlite3_close(db_); }

Status HistoryStore::Exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) == SQLITE_OK) return Status::Ok();
  std::string why = err ? err : sqlite3_errmsg(db_);
  sqlite3_free(err);
  return MakeError(ErrorKind::kIo, fmt::format("history database: {}", why));
}

Status HistoryStore::AddRows(const std::vector<std::pair<std::string, telemetry::HistoryRow>>& rows) {
  if (rows.empty()) return Status::Ok();
  if (Status s = Exec("BEGIN"); !s.ok()) return s;
  Stmt st(db_,
          "INSERT OR REPLACE INTO gpu_history VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)");
  bool ok = st.ok();
  for (const auto& [uuid, r] : rows) {
    if (!ok) break;
    st.Bind(1, r.length_s);
    st.Bind(2, uuid);
    st.Bind(3, r.start_s);
    st.Bind(4, static_cast<std::int64_t>(r.samples));
    st.BindOpt(5, r.util_gpu_mean_pct);
    st.BindOpt(6, r.util_gpu_max_pct);
    st.BindOpt(7, r.util_memory_mean_pct);
    st.BindOpt(8, r.memory_used_mean_bytes);
    st.BindOpt(9, r.memory_used_max_bytes);
    st.BindOpt(10, r.power_mean_mw);
    st.BindOpt(11, r.temperature_max_c);
    st.BindOpt(12, r.clock_sm_mean_mhz);
    st.BindOpt(13, r.energy_mj);
    st.Bind(14, static_cast<std::int64_t>(r.clocks_event_reasons));
    st.Bind(15, static_cast<std::int64_t>(r.xid_errors));
    st.Bind(16, static_cast<std::int64_t>(r.failed_samples));
    ok = st.Step() == SQLITE_DONE;
    st.Reset();
  }
  if (!ok) {
    const std::string why = sqlite3_errmsg(db_);
    (void)Exec("ROLLBACK");
    return MakeError(ErrorKind::kIo, fmt::format("history database: cannot store GPU history: {}", why));
  }
  return Exec("COMMIT");
}

Result<std::vector<telemetry::HistoryRow>> HistoryStore::Rows(const std::string& uuid, double length_s, double since_s,
                                                             double until_s) {
  Stmt st(db_,
          "SELECT start_s, samples, util_gpu_mean, util_gpu_max, util_memory_mean, memory_used_mean, memory_used_max,"
          " power_mean_mw, temperature_max_c, clock_sm_mean, energy_mj, clocks_event_reasons, xid_errors, failed_samples"
          " FROM gpu_history WHERE length_s = ?1 AND gpu_uuid = ?2 AND start_s >= ?3 AND start_s < ?4 ORDER BY start_s");
  if (!st.ok()) return MakeError(ErrorKind::kIo, fmt::format("history database: {}", sqlite3_errmsg(db_)));
  st.Bind(1, length_s);
  st.Bind(2, uuid);
  st.Bind(3, since_s);
  st.Bind(4, until_s);
  std::vector<telemetry::HistoryRow> rows;
  while (st.Step() == SQLITE_ROW) {
    sqlite3_stmt* s = st.get();
    telemetry::HistoryRow r;
    r.length_s = length_s;
    r.start_s = sqlite3_column_double(s, 0);
    r.samples = static_cast<std::uint32_t>(sqlite3_column_int64(s, 1));
    r.util_gpu_mean_pct = OptDouble(s, 2);
    r.util_gpu_max_pct = OptDouble(s, 3);
    r.util_memory_mean_pct = OptDouble(s, 4);
    r.memory_used_mean_bytes = OptDouble(s, 5);
    r.memory_used_max_bytes = OptDouble(s, 6);
    r.power_mean_mw = OptDouble(s, 7);
    r.temperature_max_c = OptDouble(s, 8);
    r.clock_sm_mean_mhz = OptDouble(s, 9);
    if (auto e = OptInt(s, 10)) r.energy_mj = static_cast<std::uint64_t>(*e);
    r.clocks_event_reasons = static_cast<std::uint64_t>(sqlite3_column_int64(s, 11));
    r.xid_errors = static_cast<std::uint32_t>(sqlite3_column_int64(s, 12));
    r.failed_samples = static_cast<std::uint32_t>(sqlite3_column_int64(s, 13));
    rows.push_back(r);
  }
  return rows;
}

Status HistoryStore::Prune(double length_s, double before_s) {
  Stmt st(db_, "DELETE FROM gpu_history WHERE length_s = ?1 AND start_s < ?2");
  st.Bind(1, length_s);
  st.Bind(2, before_s);
  if (!st.ok() || st.Step() != SQLITE_DONE)
    return MakeError(ErrorKind::kIo, fmt::format("history database: {}", sqlite3_errmsg(db_)));
  return Status::Ok();
}

Status HistoryStore::PruneRecords(double records_before_s) {
  for (const char* sql : {"DELETE FROM job_usage WHERE end_s < ?1", "DELETE FROM events WHERE time_s < ?1"}) {
    Stmt st(db_, sql);
    st.Bind(1, records_before_s);
    if (!st.ok() || st.Step() != SQLITE_DONE)
      return MakeError(ErrorKind::kIo, fmt::format("history database: {}", sqlite3_errmsg(db_)));
  }
  return Status::Ok();
}

Status HistoryStore::AddUsage(const telemetry::UsageRecord& r) {
  Stmt st(db_,
          "INSERT INTO job_usage (job_id, uid, user, name, gpu_uuids, gpu_indices, start_s, end_s, wait_s, gpus, gpu_s,"
          " energy_j, peak_memory_bytes, mean_memory_bytes, mean_util_pct, p10_util_pct, idle_fraction, samples, job_text)"
          " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19)");
  const telemetry::JobUsage& u = r.usage;
  st.Bind(1, r.job_id);
  st.Bind(2, static_cast<std::int64_t>(r.uid));
  st.Bind(3, r.user);
  st.Bind(4, r.name);
  st.Bind(5, JoinList(r.gpu_uuids));
  std::vector<std::string> indices;
  for (unsigned i : r.gpu_indices) indices.push_back(std::to_string(i));
  st.Bind(6, JoinList(indices));
  st.Bind(7, r.start_s);
  st.Bind(8, r.end_s);
  st.BindOpt(9, u.wait_s);
  st.Bind(10, u.gpus);
  st.Bind(11, u.gpu_s);
  st.BindOpt(12, u.energy_j);
  st.BindOpt(13, u.peak_memory_bytes);
  st.BindOpt(14, u.mean_memory_bytes);
  st.BindOpt(15, u.mean_util_pct);
  st.BindOpt(16, u.p10_util_pct);
  st.BindOpt(17, u.idle_fraction);
  st.Bind(18, static_cast<std::int64_t>(u.samples));
  if (r.job_text.empty()) st.BindNull(19);
  else st.Bind(19, r.job_text);
  if (!st.ok() || st.Step() != SQLITE_DONE)
    return MakeError(ErrorKind::kIo, fmt::format("history database: cannot record job {}'s usage: {}", r.job_id,
                                                 sqlite3_errmsg(db_)));
  return Status::Ok();
}

namespace {

constexpr const char* kUsageColumns =
    "job_id, uid, user, name, gpu_uuids, gpu_indices, start_s, end_s, wait_s, gpus, gpu_s,"
    " energy_j, peak_memory_bytes, mean_memory_bytes, mean_util_pct, p10_util_pct, idle_fraction, samples, id, job_text";

// Fills `r` (reused from row to row: its strings and vectors keep their capacity) from the current row.
void FillUsageRow(sqlite3_stmt* s, telemetry::UsageRecord& r) {
  r.gpu_uuids.clear();
  r.gpu_indices.clear();
  r.usage = telemetry::JobUsage{};
  r.job_id = Column(s, 0);
  r.uid = static_cast<std::uint32_t>(sqlite3_column_int64(s, 1));
  r.user = Column(s, 2);
  r.name = Column(s, 3);
  SplitList(Column(s, 4), r.gpu_uuids);
  for (const char* p = Column(s, 5); *p;) {
    char* end = nullptr;
    r.gpu_indices.push_back(static_cast<unsigned>(std::strtoul(p, &end, 10)));
    if (end == p) break;
    p = *end == ',' ? end + 1 : end;
  }
  r.start_s = sqlite3_column_double(s, 6);
  r.end_s = sqlite3_column_double(s, 7);
  telemetry::JobUsage& u = r.usage;
  u.run_s = r.end_s - r.start_s;
  u.wait_s = OptDouble(s, 8);
  u.gpus = sqlite3_column_double(s, 9);
  u.gpu_s = sqlite3_column_double(s, 10);
  u.energy_j = OptDouble(s, 11);
  if (auto v = OptInt(s, 12)) u.peak_memory_bytes = static_cast<std::uint64_t>(*v);
  u.mean_memory_bytes = OptDouble(s, 13);
  u.mean_util_pct = OptDouble(s, 14);
  u.p10_util_pct = OptDouble(s, 15);
  u.idle_fraction = OptDouble(s, 16);
  u.samples = static_cast<std::uint64_t>(sqlite3_column_int64(s, 17));
  r.job_text = Column(s, 19);
}

telemetry::UsageRecord UsageRow(sqlite3_stmt* s) {
  telemetry::UsageRecord r;
  FillUsageRow(s, r);
  return r;
}

}  // namespace

Result<std::optional<telemetry::UsageRecord>> HistoryStore::UsageOfJob(const std::string& job_id) {
  const std::string sql = fmt::format("SELECT {} FROM job_usage WHERE job_id = ?1 ORDER BY end_s DESC, id DESC LIMIT 1", kUsageColumns);
  Stmt st(db_, sql.c_str());
  if (!st.ok()) return MakeError(ErrorKind::kIo, fmt::format("history database: {}", sqlite3_errmsg(db_)));
  st.Bind(1, job_id);
  if (st.Step() != SQLITE_ROW) return std::optional<telemetry::UsageRecord>();
  return std::optional<telemetry::UsageRecord>(UsageRow(st.get()));
}

Status HistoryStore::ForEachUsage(const UsageFilter& filter, const std::function<void(const telemetry::UsageRecord&)>& each) {
  // Records are stored as jobs end, so id order is (nearly) end order: the rows from the first id
  // that ended in time on are read in one sequential pass over the table, not one index lookup a
  // row (100,000 records: 800 ms that way, bench/telemetry_footprint.py).
  std::string columns = kUsageColumns;
  if (!filter.names) columns.replace(columns.find(" name,"), 6, " '',");
  const std::string sql = fmt::format(
      "SELECT {} FROM job_usage WHERE id >= coalesce((SELECT min(id) FROM job_usage WHERE end_s >= ?1), 9e18)"
      " AND end_s >= ?1 AND (?2 IS NULL OR user = ?2) ORDER BY id LIMIT ?3",
      columns);
  Stmt st(db_, sql.c_str());
  if (!st.ok()) return MakeError(ErrorKind::kIo, fmt::format("history database: {}", sqlite3_errmsg(db_)));
  st.Bind(1, filter.since_s);
  if (filter.user) st.Bind(2, *filter.user);
  else st.BindNull(2);
  st.Bind(3, static_cast<std::int64_t>(filter.limit));
  telemetry::UsageRecord record;
  int rc;
  while ((rc = st.Step()) == SQLITE_ROW) {
    FillUsageRow(st.get(), record);
    each(record);
  }
  if (rc != SQLITE_DONE) return MakeError(ErrorKind::kIo, fmt::format("history database: {}", sqlite3_errmsg(db_)));
  return Status::Ok();
}

Result<std::vector<telemetry::UsageRecord>> HistoryStore::Usage(const UsageFilter& filter) {
  std::vector<telemetry::UsageRecord> out;
  if (Status s = ForEachUsage(filter, [&](const telemetry::UsageRecord& r) { out.push_back(r); }); !s.ok()) return s.error();
  return out;
}

Status HistoryStore::AddEvent(Event& e) {
  Stmt st(db_,
          "INSERT INTO events (time_s, kind, gpu_uuid, gpu_index, job_id, user, message, cleared_s)"
          " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)");
  st.Bind(1, e.time_s);
  st.Bind(2, e.kind);
  st.Bind(3, e.gpu_uuid);
  st.BindOpt(4, e.gpu_index);
  st.Bind(5, e.job_id);
  st.Bind(6, e.user);
  st.Bind(7, e.message);
  st.BindOpt(8, e.cleared_s);
  if (!st.ok() || st.Step() != SQLITE_DONE)
    return MakeError(ErrorKind::kIo, fmt::format("history database: cannot record an event: {}", sqlite3_errmsg(db_)));
  e.id = sqlite3_last_insert_rowid(db_);
  return Status::Ok();
}

Status HistoryStore::ClearEvent(std::int64_t id, double cleared_s) {
  Stmt st(db_, "UPDATE events SET cleared_s = ?2 WHERE id = ?1");
  st.Bind(1, id);
  st.Bind(2, cleared_s);
  if (!st.ok() || st.Step() != SQLITE_DONE)
    return MakeError(ErrorKind::kIo, fmt::format("history database: {}", sqlite3_errmsg(db_)));
  return Status::Ok();
}

Result<std::vector<Event>> HistoryStore::Events(std::int64_t after_id, double since_s, std::size_t limit) {
  Stmt st(db_,
          "SELECT id, time_s, kind, gpu_uuid, gpu_index, job_id, user, message, cleared_s FROM events"
          " WHERE id > ?1 AND time_s >= ?2 ORDER BY id LIMIT ?3");
  if (!st.ok()) return MakeError(ErrorKind::kIo, fmt::format("history database: {}", sqlite3_errmsg(db_)));
  st.Bind(1, after_id);
  st.Bind(2, since_s);
  st.Bind(3, static_cast<std::int64_t>(limit));
  std::vector<Event> out;
  while (st.Step() == SQLITE_ROW) {
    sqlite3_stmt* s = st.get();
    Event e;
    e.id = sqlite3_column_int64(s, 0);
    e.time_s = sqlite3_column_double(s, 1);
    e.kind = Text(s, 2);
    e.gpu_uuid = Text(s, 3);
    if (auto v = OptInt(s, 4)) e.gpu_index = static_cast<unsigned>(*v);
    e.job_id = Text(s, 5);
    e.user = Text(s, 6);
    e.message = Text(s, 7);
    e.cleared_s = OptDouble(s, 8);
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace gpulane::store
