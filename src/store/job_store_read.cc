// Reading stored jobs: rows (an array task's spec is its array's, parsed once), lists, heads,
// array tasks, usage and submissions' keys; an incomplete array's reserved ids are left out.
#include <sqlite3.h>

#include <algorithm>
#include <functional>
#include <memory>

#include <fmt/format.h>

#include "store/job_store.h"
#include "store/sqlite_stmt.h"
#include "util/bytes_json.h"

namespace gpulane::store {
namespace {

constexpr const char* kSelectArraySpec = "SELECT spec FROM array_specs WHERE array_job_id = ?1";
constexpr const char* kSelectHead = "SELECT id, array_job_id, state FROM jobs WHERE id = ?1";
constexpr const char* kSelectTaskId = "SELECT id FROM jobs WHERE array_job_id = ?1 AND array_index = ?2";

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

}  // namespace

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

}  // namespace gpulane::store
