#pragma once
// Durable job state in SQLite: WAL journal, synchronous=FULL (a submission is acknowledged only
// once it is on disk), schema versioned with PRAGMA user_version and migrated forward, quick_check
// at open (a damaged database is an error, never silently replaced), busy_timeout so a reader
// (an admin's sqlite3 shell) does not break the daemon. A row that cannot be read is reported by
// its id (DamagedRow) and left in the database as it is, never dropped or overwritten.
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "store/job.h"
#include "util/result.h"

struct sqlite3;
struct sqlite3_stmt;

namespace gpulane::store {

/// Which jobs List() returns.
struct JobFilter {
  bool include_finished = false;
  std::optional<std::uint32_t> uid;
  std::optional<std::int64_t> min_id;  ///< only ids >= this
  std::optional<std::int64_t> max_id;  ///< only ids <= this
  std::size_t limit = 0;               ///< 0: no limit (newest finished first when include_finished)
};

/// A stored row that could not be read (its spec or state does not parse): kept in the database,
/// left out of what List returns, and reported by id.
struct DamagedRow {
  std::int64_t id = 0;
  std::string why;  ///< "its spec is not JSON", "its state 'x' is unknown"
};

/// A submission's idempotency key (docs/protocol.md, "submit"): the client's name for one
/// submission, unique per uid. A repeated key gets the ids of the first submission.
struct SubmissionKey {
  std::uint32_t uid = 0;
  std::string key;
  std::size_t first = 0;  ///< index into Insert's `jobs` of the submission's first job
  std::size_t count = 0;  ///< how many jobs (array tasks) it has, from `first` on
};

/// How long a statement waits for another connection's lock before it fails with "database is
/// locked" (SQLite's busy_timeout), in milliseconds.
inline constexpr int kDefaultBusyTimeoutMs = 5000;

class JobStore {
 public:
  /// Opens (creating) the database at `path` (":memory:" for tests), waiting up to
  /// `busy_timeout_ms` milliseconds for another connection's lock at each statement. Errors: kIo
  /// when it cannot be opened; kStore when quick_check fails ("database ... is damaged"), the
  /// schema is newer than this gpulane knows, or the file is read-only (its mode has no owner write
  /// bit, or SQLite could open it only for reading): a daemon would fail at its first write.
  static Result<std::unique_ptr<JobStore>> Open(const std::string& path, int busy_timeout_ms = kDefaultBusyTimeoutMs);
  ~JobStore();

  /// The schema version this code writes (4: an array's spec stored once, in array_specs; 5:
  /// submissions' idempotency keys; 6: retried jobs' earlier attempts; 7: arrays being stored in
  /// parts, incomplete_arrays; 8: an array task's own command, jobs.argv, for submit --array-file; 9: isolation;
  /// 10: retention, pruned_ids).
  static constexpr int kSchemaVersion = 10;

  /// Changes how long each later statement waits for another connection's lock (milliseconds).
  void SetBusyTimeout(int busy_timeout_ms);

  /// Inserts jobs in one transaction (one fsync), assigning ids in order; array tasks get their
  /// array_job_id set to the first task's id when `array` is true, and then share one stored
  /// spec: the first job's (every task of an array has the same but for the command of a task with
  /// Job::own_argv, stored with that task alone). Records each of `keys` with the
  /// ids of its jobs in the same transaction (kIo, nothing stored, when one is already there:
  /// callers look keys up with FindSubmission first). Returns the ids.
  Result<std::vector<std::int64_t>> Insert(std::vector<Job>& jobs, bool array, const std::vector<SubmissionKey>& keys = {});
  /// Where one part of an array goes (InsertArrayPart). A large array is stored in parts of a few
  /// hundred tasks, a transaction each, so that the daemon serves other clients between them.
  struct ArrayPart {
    std::int64_t array_job_id = 0;  ///< 0 for the first part (the array's id is taken then); the array's id after
    std::size_t offset = 0;         ///< the position, among the array's tasks, of this part's first task
    std::size_t total = 0;          ///< how many tasks the whole array has
  };
  /// Stores `tasks` as tasks `offset`.. of an array of `total` tasks, in one transaction: task i
  /// gets id array_job_id + offset + i. The first part (array_job_id 0) takes the next id as the
  /// array's, reserves the ids of all `total` tasks (no other job gets one of them, in between
  /// or ever), stores the spec once (tasks[0]'s: every task has the same) and, unless it is the
  /// whole array, marks the array incomplete: until its last part is stored every read here
  /// leaves its tasks out (List, ListIds, Get, Head, ArrayTasks, TaskId), and DropIncompleteArrays
  /// removes them. `keys` are recorded with the last part (SubmissionKey::first 0, count
  /// `total`). Sets each task's id and array_job_id; returns the array's id. Errors: kIo (nothing
  /// of this part stored); kInvalidArgument for a part that does not fit the array.
  Result<std::int64_t> InsertArrayPart(std::vector<Job>& tasks, const ArrayPart& part,
                                       const std::vector<SubmissionKey>& keys = {});
  /// Removes incomplete arrays (whose last part was never stored: their submission was never
  /// acknowledged), their tasks and spec; their ids stay used (MaxId). All of them (the daemon, at
  /// its start: a daemon stopped or killed while storing one), or only `array_job_id` (a part
  /// failed). Returns how many arrays were removed. Errors: kIo.
  Result<std::size_t> DropIncompleteArrays(std::optional<std::int64_t> array_job_id = std::nullopt);
  /// The ids of the submission stored with idempotency key `key` of user `uid`, in order; nullopt
  /// when there is none.
  Result<std::optional<std::vector<std::int64_t>>> FindSubmission(std::uint32_t uid, const std::string& key);
  /// Writes the mutable fields (state, reason, times, exit code, GPUs, supervisor, logs, earlier
  /// attempts) of each job in one transaction.
  Status Update(const std::vector<const Job*>& jobs);
  /// Every job not finished, oldest first; rows that cannot be read are added to `damaged` (when
  /// given) instead.
  Result<std::vector<Job>> LoadUnfinished(std::vector<DamagedRow>* damaged = nullptr);
  /// Adds to `damaged` the rows whose state is none of gpulane's (neither finished nor unfinished);
  /// LoadUnfinished does, and the daemon's start in parts (daemon/job_table.h) once all are loaded.
  Status AddUnknownStates(std::vector<DamagedRow>* damaged);
  /// One job, or nullopt. Errors: kStore "job N is damaged in the database: ..." for a row that
  /// cannot be read; kIo.
  Result<std::optional<Job>> Get(std::int64_t id);
  /// What a dependency check needs of a job, read without its spec.
  struct JobHead {
    std::int64_t id = 0;
    std::optional<std::int64_t> array_job_id;
    JobState state = JobState::kPending;
  };
  /// Job `id`'s head, or nullopt when there is no such job.
  Result<std::optional<JobHead>> Head(std::int64_t id);
  /// Jobs matching `filter`, by id; rows that cannot be read are added to `damaged` (when given).
  Result<std::vector<Job>> List(const JobFilter& filter, std::vector<DamagedRow>* damaged = nullptr);
  /// The ids of List(filter), read without the jobs (8 bytes a job, not a spec each).
  Result<std::vector<std::int64_t>> ListIds(const JobFilter& filter);
  /// How many jobs List(filter) would return without its limit (one COUNT, no row read; job_counts.cc).
  Result<std::size_t> Count(JobFilter filter);
  /// The end states of the tasks of array `array_job_id` that have finished.
  Result<std::vector<JobState>> FinishedArrayStates(std::int64_t array_job_id);
  /// One task of an array: its job id and array index.
  struct Task {
    std::int64_t id = 0;
    int index = 0;
  };
  /// The tasks of array `array_job_id` (the id of its first task), finished ones included, by id;
  /// empty when `array_job_id` is not an array's id. Reads at most the kMaxArrayTasks rows from
  /// `array_job_id` on (tasks take consecutive ids).
  Result<std::vector<Task>> ArrayTasks(std::int64_t array_job_id);
  /// The job id of task `index` of array `array_job_id` (an index lookup); nullopt when none.
  Result<std::optional<std::int64_t>> TaskId(std::int64_t array_job_id, int index);
  /// Takes the write lock and lets it go (an empty write transaction): whether writes would get
  /// through now. Errors: kIo ("database is locked").
  Status CheckWritable();
  /// One ended job's use of GPUs, for fair share (sched/fairshare.h): who, when, how many GPUs it
  /// held (its recorded GPUs, else its request's count) and its --mem declaration.
  struct UsageRow {
    std::string user;
    double start_time = 0;  ///< seconds since the epoch
    double end_time = 0;
    unsigned gpus = 1;
    std::optional<std::uint64_t> mem_bytes;
  };
  /// Every finished job that ran (a start time) and ended at or after `end_after_s`, by id. Read
  /// from the columns the jobs already have (no schema change): the GPUs recorded, the spec's request.
  Result<std::vector<UsageRow>> UsageSince(double end_after_s);
  /// The largest id ever used or reserved for an array (0 when none): it never goes back.
  Result<std::int64_t> MaxId();

  // Retention (job_retention.cc; the daemon's daemon.keep_finished). The store reads no clock:
  // the caller says which ends are old enough.
  /// What one PruneFinished slice removed.
  struct PruneSlice {
    std::size_t jobs = 0;         ///< finished jobs removed
    std::size_t arrays = 0;       ///< array specs removed (no task of theirs left)
    std::size_t submissions = 0;  ///< idempotency keys removed (no job of theirs left)
    bool more = false;            ///< the slice was full: more jobs may be old enough
  };
  /// Removes at most `max_jobs` finished jobs (completed, failed, cancelled, timeout) whose end is
  /// before `ended_before_s` (a job that ended exactly then is kept), oldest end first, in one
  /// transaction; then the spec of each of their arrays and the idempotency key of each of their
  /// submissions of which no job is left. The ids removed are recorded with `keep_s` (the setting
  /// that removed them, for PrunedAfter): an id is never "no such job" once it was one. Unfinished
  /// jobs (and so arrays still being stored) and finished jobs without a recorded end are never
  /// removed, nor are the ids in `spared` (first..last, inclusive: what unfinished jobs wait for).
  /// Errors: kIo (nothing removed).
  Result<PruneSlice> PruneFinished(double ended_before_s, std::size_t max_jobs, double keep_s,
                                   const std::vector<std::pair<std::int64_t, std::int64_t>>& spared = {});
  /// When job `id` was removed by PruneFinished: the keep_s it was removed with; nullopt when it
  /// was not (it is still there, or never was a job). Errors: kIo.
  Result<std::optional<double>> PrunedAfter(std::int64_t id);

 private:
  explicit JobStore(sqlite3* db) : db_(db) {}
  Status Exec(const char* sql);
  /// ROLLBACK after a failed statement, its own failure ignored (the first error is reported).
  void Rollback();
  Status Migrate();
  /// The statement of `sql` (a string constant: told apart by its address), prepared on first use
  /// and kept until the store closes; nullptr when it cannot be prepared.
  sqlite3_stmt* Cached(const char* sql);
  /// Runs `sql` (a statement without results) through Cached.
  Status Run(const char* sql);
  /// The stored spec of array `array_job_id`, parsed once and shared by every task read
  /// (array_specs_); nullptr when there is none or it cannot be read.
  std::shared_ptr<const JobSpec> ArraySpec(std::int64_t array_job_id);
  /// Reads incomplete_arrays into incomplete_.
  Status LoadIncomplete();
  /// Whether `id` is one of an incomplete array's reserved ids (left out of every read).
  bool IsIncomplete(std::int64_t id) const;
  /// " AND id NOT BETWEEN a AND b" for each incomplete array: its reserved ids ("" when none).
  std::string NotIncompleteSql() const;
  /// The SELECT of `what` over the jobs `filter` picks, and `also` (more conditions, " AND ...").
  static std::string FilterSql(const char* what, const JobFilter& filter, const std::string& also);
  /// Records the removed `ids` (sorted) as runs in pruned_ids, merged with the runs next to them.
  Status RecordPruned(const std::vector<std::int64_t>& ids, double keep_s);
  /// Removes the specs of `arrays` and the keys of the submissions of `heads` none of whose jobs is
  /// left; counts them into `slice`.
  Status DropOrphans(const std::vector<std::int64_t>& arrays, const std::vector<std::int64_t>& heads, PruneSlice& slice);
  /// The first id of the next job stored: one past every id used or reserved.
  Result<std::int64_t> NextId();
  /// InsertArrayPart's first part, in its transaction: takes the next id as the array's, stores
  /// `spec` as the array's, reserves the ids of its `total` tasks and, when `incomplete` (more
  /// parts follow), marks the array incomplete. Returns the array's id.
  Result<std::int64_t> ReserveArray(const JobSpec& spec, std::size_t total, bool incomplete);
  /// Inserts `tasks` as the array's tasks from position `offset` on (ids array_job_id + offset ..),
  /// in the open transaction.
  Status InsertTasks(const std::vector<Job>& tasks, std::int64_t array_job_id, std::size_t offset);
  sqlite3* db_;
  std::map<std::int64_t, std::size_t> incomplete_;  ///< incomplete arrays: id -> task count (ids reserved)
  std::vector<std::pair<const char*, sqlite3_stmt*>> cached_;
  static constexpr std::size_t kArraySpecsKept = 64;  ///< array specs kept parsed at most
  std::map<std::int64_t, std::shared_ptr<const JobSpec>> array_specs_;
};

}  // namespace gpulane::store
