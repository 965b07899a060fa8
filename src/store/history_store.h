#pragma once
// The daemon's telemetry database (<state>/history.db, apart from jobs.db so that history never
// competes with the job queue for its lock): GPU history rows at each kept resolution, every
// finished job's usage record (`gpulane report`), and anomaly events (`gpulane events`). Only the
// daemon's sampler thread uses it (one connection, one thread).
#include <sqlite3.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "telemetry/history.h"
#include "telemetry/report.h"
#include "util/result.h"

namespace gpulane::store {

/// An anomaly or health event (issue 11, item 3).
struct Event {
  std::int64_t id = 0;             ///< increasing; 0 until stored
  double time_s = 0;               ///< seconds since the epoch when it was raised
  std::string kind;                ///< "idle", "stuck", "leak", "ghost_memory", "foreign", "throttle", "xid", "gpu_lost"
  std::string gpu_uuid;            ///< "" when not about one GPU
  std::optional<unsigned> gpu_index;
  std::string job_id;              ///< "" when not about a job
  std::string user;
  std::string message;             ///< one line for people: what, who, where, what to check
  std::optional<double> cleared_s; ///< when the condition ended (nullopt: still current)
};

/// Which usage records a report reads.
struct UsageFilter {
  double since_s = 0;                 ///< jobs that ended at or after this
  std::optional<std::string> user;    ///< only this user's
  std::size_t limit = 1000000;        ///< at most this many
  bool names = true;                  ///< read each job's name (a report does not need it: faster)
};

class HistoryStore {
 public:
  /// Opens (creating) the database at `path` (":memory:" in tests). A damaged file is moved aside
  /// (<path>.damaged) and a new one started: history is not worth stopping the daemon for (jobs.db
  /// is). Errors: kIo when neither works.
  static Result<std::unique_ptr<HistoryStore>> Open(const std::string& path);
  ~HistoryStore();
  HistoryStore(const HistoryStore&) = delete;
  HistoryStore& operator=(const HistoryStore&) = delete;

  /// Stores rows of GPU history (per GPU UUID), in one transaction.
  Status AddRows(const std::vector<std::pair<std::string, telemetry::HistoryRow>>& rows);
  /// Rows of `length_s` of GPU `uuid` starting in [since_s, until_s), oldest first.
  Result<std::vector<telemetry::HistoryRow>> Rows(const std::string& uuid, double length_s, double since_s, double until_s);
  /// Removes rows of `length_s` that started before `before_s`, and usage records and events older
  /// than `records_before_s`.
  Status Prune(double length_s, double before_s);
  Status PruneRecords(double records_before_s);

  /// Stores a finished job's usage record.
  Status AddUsage(const telemetry::UsageRecord& record);
  /// The latest usage record of job `job_id` (ids of `gpulane run` jobs, pids, come back over
  /// time: the newest); nullopt when there is none.
  Result<std::optional<telemetry::UsageRecord>> UsageOfJob(const std::string& job_id);
  /// Calls `each` with every usage record by `filter`, in the order Usage gives (one record object,
  /// refilled for each row: copy what must outlive the call).
  Status ForEachUsage(const UsageFilter& filter, const std::function<void(const telemetry::UsageRecord&)>& each);
  /// Usage records by `filter`, in the order they were stored (the order their jobs ended), the
  /// oldest `filter.limit` of them.
  Result<std::vector<telemetry::UsageRecord>> Usage(const UsageFilter& filter);

  /// Stores a new event (its id is set) or, for a stored one, its cleared_s.
  Status AddEvent(Event& event);
  Status ClearEvent(std::int64_t id, double cleared_s);
  /// Events with id > after_id raised at or after since_s, oldest first, at most `limit`.
  Result<std::vector<Event>> Events(std::int64_t after_id, double since_s, std::size_t limit);

 private:
  explicit HistoryStore(sqlite3* db) : db_(db) {}
  Status Exec(const char* sql);
  sqlite3* db_;
};

}  // namespace gpulane::store
