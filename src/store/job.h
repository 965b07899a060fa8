#pragma once
// A queued job as the daemon, its store and its supervisor see it.
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sched/request.h"
#include "util/notify_target.h"
#include "store/job_id.h"

namespace gpulane::store {

/// Life of a job: pending -> (held) -> launching -> running -> completed | failed | timeout;
/// cancelled from any state before the end.
enum class JobState { kPending, kHeld, kLaunching, kRunning, kCompleted, kFailed, kCancelled, kTimeout };

const char* StateName(JobState s);              ///< "pending", "held", ...
std::optional<JobState> ParseState(const std::string& name);
bool IsFinished(JobState s);                    ///< completed, failed, cancelled, timeout

/// A list that the copies of a spec share (an array's 1,000 tasks hold one environment between
/// them, in the daemon and in the store): copying is cheap, and a change replaces the whole list.
template <typename T>
class SharedList {
 public:
  SharedList() = default;
  SharedList(std::vector<T> items) : items_(std::make_shared<const std::vector<T>>(std::move(items))) {}  // NOLINT: implicit
  SharedList(std::initializer_list<T> items) : SharedList(std::vector<T>(items)) {}
  const std::vector<T>& get() const { return items_ ? *items_ : Empty(); }
  operator const std::vector<T>&() const { return get(); }  // NOLINT: implicit
  auto begin() const { return get().begin(); }
  auto end() const { return get().end(); }
  const T* data() const { return get().data(); }
  std::size_t size() const { return get().size(); }
  bool empty() const { return get().empty(); }
  const T& front() const { return get().front(); }
  const T& back() const { return get().back(); }
  const T& operator[](std::size_t i) const { return get()[i]; }
  friend bool operator==(const SharedList& a, const SharedList& b) { return a.get() == b.get(); }
  friend bool operator==(const SharedList& a, const std::vector<T>& b) { return a.get() == b; }
  /// True when both hold the very same list (not just equal ones).
  bool SharesWith(const SharedList& other) const { return items_ == other.items_; }

 private:
  static const std::vector<T>& Empty() {
    static const std::vector<T> empty;
    return empty;
  }
  std::shared_ptr<const std::vector<T>> items_;
};

/// What one submission may carry (checked at submission, by the client and by the daemon; specs
/// stored before these limits are still read). Bytes count each string with its terminating NUL,
/// as execve does.
inline constexpr std::size_t kMaxArgvBytes = 1u << 20;  ///< the command line: 1 MiB
inline constexpr std::size_t kMaxEnvBytes = 1u << 20;   ///< the environment: 1 MiB
/// Jobs one job may wait for: --after and --after-any together, after duplicates are removed and
/// ranges ("12_[1-500]") expanded.
inline constexpr std::size_t kMaxDependencies = 1000;
/// The most retries one job may ask for (--retry N: 0 to this).
inline constexpr int kMaxRetries = 100;

/// Bytes of `strings` as execve counts them (each with its NUL).
std::size_t StringBytes(const std::vector<std::string>& strings);

/// Everything captured at submission.
struct JobSpec {
  SharedList<std::string> argv;
  std::string cwd;
  SharedList<std::string> env;  ///< "KEY=VALUE", as the submitting shell had it
  sched::Request request;        ///< GPUs, priority, time limit: the one request type, stored as given
  std::string name;
  /// Start only after these completed with exit code 0 (a job, an array's id: all its tasks, or
  /// one task "12_3"); in JSON numbers, and "12_3" strings for tasks.
  SharedList<JobRef> after_ok;
  SharedList<JobRef> after_any;  ///< start only after these ended, however
  std::string output_path;       ///< stdout log, placeholders expanded; "" = <cwd>/gpulane-<id>.out
  std::string error_path;        ///< stderr log; "" = the same file as stdout
  double kill_grace_s = 10;
  /// Runs again after a failure (a non-zero exit, or a command that could not be started), at most
  /// this many times (--retry N, 0 to kMaxRetries); never after a cancel or a timeout.
  int retries = 0;
  /// Where its notifications go (submit --notify with the user's [notify]); nullopt: none.
  std::optional<NotifyTarget> notify;
  bool operator==(const JobSpec&) const = default;
};

/// The log files a job's command writes to, as its supervisor opened them (exec::OpenedLogs).
struct JobLogs {
  std::string stdout_path, stderr_path;  ///< "" until the job's command has opened them
  std::uint64_t stdout_offset = 0;       ///< where this job's output starts in the file (an appended -o file)
  std::uint64_t stderr_offset = 0;
  /// Where it ends: the file's size when the job ended (none while it runs), so that a later job
  /// appending to the same -o file does not show up in this one's `gpulane logs`.
  std::optional<std::uint64_t> stdout_end, stderr_end;
  /// Stored before gpulane recorded log files: they are where OutputPath/ErrorPath say.
  bool unrecorded = false;
  bool operator==(const JobLogs&) const = default;
};

/// One earlier run of a job that was retried (--retry): how it went. The job's current (or last)
/// attempt is the job's own fields (start_time, end_time, exit_code, gpu_uuids).
struct JobAttempt {
  JobState state = JobState::kFailed;  ///< how it ended (only failures are retried)
  std::string reason;                  ///< what went wrong, for people ("" for a plain non-zero exit)
  std::optional<double> start_time, end_time;
  std::optional<int> exit_code;        ///< exit status, or 128 + signal; none when the command did not start
  std::vector<std::string> gpu_uuids;
  /// It gave way to a job that needed its GPUs (submit --preemptible): the next attempt gets
  /// GPULANE_PREEMPTED=1.
  bool preempted = false;
  bool operator==(const JobAttempt&) const = default;
};

/// How one attempt of a job ended, as far as a retry is concerned.
enum class AttemptEnd {
  kCompleted,    ///< exit status 0
  kFailedExit,   ///< a non-zero exit status (also 128 + signal: killed)
  kStartFailed,  ///< recorded as never started: the command or its logs could not be opened, the
                 ///< GPUs could not be waited for (a node fault); the job provably did not run
  kCancelled,    ///< gpulane cancel, or its supervisor stopped by a signal
  kTimeout,      ///< --time-limit ran out
  kLost,         ///< no record of its end (its supervisor died while it ran): it may have
                 ///< completed, so it is never run again
};

/// Whether a job whose attempt `attempt` (0: the first run, 1: the first retry, ...) ended `end`
/// runs again, when it may be retried `retries` times: only a recorded failure (kFailedExit,
/// kStartFailed) is, and only while attempt < retries. Pure: the daemon's and the tests' one rule.
bool ShouldRetry(AttemptEnd end, int attempt, int retries);

/// "attempt 2 of 4 (retry 1 of 3) after exit code 1": the line a retried job's log gets before
/// attempt `attempt` (1 or more) of a job with `retries`, after `previous` ended, `failed` of its
/// earlier attempts having failed (-1: all of them). After a requeue (`previous` not failed: its
/// partition closed) "attempt 3, requeued: partition night closed at 08:00 (Tue) (...)"; with
/// requeues among the earlier attempts "attempt 3 (retry 1 of 3) after exit code 1".
std::string RetryLine(int attempt, int retries, const JobAttempt& previous, int failed = -1);

/// A job: its spec, who owns it, and where it stands.
struct Job {
  std::int64_t id = 0;
  std::optional<std::int64_t> array_job_id;  ///< id of the array's first task
  std::optional<int> array_index;
  /// An array task with a command of its own (submit --array-file: one command line per task):
  /// spec.argv is this task's, stored with the task; the rest of the spec is the array's, stored once.
  bool own_argv = false;
  std::uint32_t gid = 0;           ///< its owner's group, from the kernel as the uid is
  JobSpec spec;
  JobState state = JobState::kPending;
  std::string reason;              ///< why pending/held/failed, for people
  std::optional<double> start_time, end_time;
  std::optional<int> exit_code;    ///< exit status, or 128 + signal
  std::vector<std::string> gpu_uuids;
  std::optional<pid_t> supervisor_pid;
  JobLogs logs;                    ///< the files its output went to (default names are never reused)
  /// The attempts before the current one, oldest first (retries): the current attempt's number is
  /// attempts.size() (0 for the first run), its GPULANE_RETRY.
  std::vector<JobAttempt> attempts;
  /// What device isolation its current (or last) attempt was given, as its supervisor recorded it
  /// ("devices: GPU1 only (...)", "off", "advice-only (...)", "not applied, started with a warning:
  /// ..."; docs/security.md); "" = not recorded (not started yet, or stored before schema 9).
  std::string isolation;
  /// When it was submitted (seconds since the epoch): its request's, the one copy, stamped once by
  /// the daemon (daemon/ops/submit.cc); the store's submit_time column is read into it.
  double submit_time_s() const { return spec.request.submit_time_s; }
  /// Who owns it: its request's uid and login name, the one copy, set once by the daemon from the
  /// kernel (SO_PEERCRED; daemon/ops/submit.cc), never from a client's input; the store's uid and
  /// user columns are read into it.
  std::uint32_t uid() const { return spec.request.uid; }
  const std::string& user() const { return spec.request.user; }
  bool operator==(const Job&) const = default;
};

/// The earlier attempts of `job` that failed: what --retry counts (an attempt requeued because its
/// partition closed does not count).
int FailedAttempts(const Job& job);

/// The earlier attempts of `job` that gave way to another job (submit --preemptible): its
/// preemptions, kept with its attempts in the store (a daemon restart keeps them).
int Preemptions(const Job& job);

/// Earlier attempts as stored (a JSON list of {state, reason, start_time, end_time, exit_code,
/// gpu_uuids, preempted}) and back. Errors: kInvalidArgument naming the attempt and the member.
nlohmann::json AttemptsToJson(const std::vector<JobAttempt>& attempts);
Result<std::vector<JobAttempt>> ParseAttempts(const nlohmann::json& j);
/// ParseAttempts for the store's column: what cannot be read reads as no attempts.
std::vector<JobAttempt> AttemptsFromJson(const nlohmann::json& j);
/// Every attempt of the job for clients (show's "attempts"): the earlier ones, then the current
/// one once it has started or ended, each with "attempt" (0, 1, ...).
nlohmann::json AllAttemptsToJson(const Job& job);

/// Expands %j (job id), %a (array index), %A (array job id), %u (user) and %% in a log path
/// pattern; a relative result is taken from the job's working directory.
std::string ExpandLogPath(const std::string& pattern, const Job& job);
/// Where the job asks its stdout to go (default <cwd>/gpulane-<id>.out) and its stderr (default:
/// the same). A default name is only a first choice: when that file exists, the job's output goes
/// to a new file next to it (exec::JobSpec::stdout_new_file); LogsOf says where it went.
std::string OutputPath(const Job& job);
std::string ErrorPath(const Job& job);
/// Whether the job's stdout log has the default name (which is never appended to).
bool HasDefaultOutputPath(const Job& job);
/// The files the job's output went to: the recorded ones; for jobs stored before gpulane
/// recorded them, OutputPath and ErrorPath (from offset 0).
JobLogs LogsOf(const Job& job);
/// Logs as stored (JSON: stdout_path, stderr_path, stdout_offset, stderr_offset, stdout_end,
/// stderr_end) and back. Errors: kInvalidArgument naming the member.
nlohmann::json LogsToJson(const JobLogs& logs);
Result<JobLogs> ParseLogs(const nlohmann::json& j);
/// ParseLogs for the store's column and the supervisor's status file: what cannot be read reads
/// as no logs recorded.
JobLogs LogsFromJson(const nlohmann::json& j);

/// The job's id as people write it: "12_3" for the task with array index 3 of array 12, "12" for
/// any other job (the array's own id names the whole array, never its first task alone).
std::string JobIdText(const Job& job);

/// The jobs one job id of a request or spec names: a number (a job's id, > 0) or a string in the
/// notation ("12", "12_3", "12_[1-3,7]"; ParseJobRefs). Errors: kInvalidArgument naming the value.
Result<std::vector<JobRef>> JobRefsFromJson(const nlohmann::json& value);

/// A submission's "array": 1 to kMaxArrayTasks different JSON integers from 0 to kMaxArrayIndex,
/// in the order given. Anything else (not an array, a float, an integer out of that range, a
/// repeated index) is kInvalidArgument "--array: give 1 to ... different task indices from 0 to ...".
Result<std::vector<int>> ArrayIndicesFromJson(const nlohmann::json& value);

/// The most bytes the commands of one array from a command file (submit --array-file) may hold
/// together, counted as execve counts argv (each word with its NUL): 4 MiB, well within a request.
inline constexpr std::size_t kMaxArrayArgvBytes = 4u << 20;

/// A submission's "array_argv" (submit --array-file): one command (a list of words, each as the
/// spec's argv: util/bytes_json.h) per task, in the order of "array"'s `tasks` indices. Errors:
/// kInvalidArgument naming the problem: not a list of `tasks` non-empty commands, a NUL byte, one
/// command over kMaxArgvBytes or all of them over kMaxArrayArgvBytes.
Result<std::vector<SharedList<std::string>>> ArrayArgvFromJson(const nlohmann::json& value, std::size_t tasks);

/// The spec as JSON; without the environment and the notification target unless `with_env`.
nlohmann::json SpecToJson(const JobSpec& spec, bool with_env = true);
/// Which limits SpecFromJson applies.
enum class SpecLimits {
  kStored,     ///< a spec the store or a supervisor reads: accepted as it was accepted once
  kSubmitted,  ///< a new submission: kMaxArgvBytes, kMaxEnvBytes, kMaxDependencies
};
/// Parse a spec; dependencies named twice are kept once (in the order first given). Errors:
/// kInvalidArgument naming the missing, mistyped or out-of-range field, and for kSubmitted a
/// command line, environment or dependency list over its limit (CheckSpecLimits).
Status SpecFromJson(const nlohmann::json& j, JobSpec* spec, SpecLimits limits = SpecLimits::kStored);
/// kMaxArgvBytes and kMaxEnvBytes (dependencies are checked as they are parsed). Errors:
/// kInvalidArgument, one line naming the size, the limit and what to do instead.
Status CheckSpecLimits(const JobSpec& spec);
/// The job for clients (without the environment and the notification target unless `with_env`).
nlohmann::json JobToJson(const Job& job, bool with_env);

/// The whole job, every field of Job: the one codec of a job as one JSON object (the supervisor's
/// spec file, daemon/job_files.h). JobToJson(job, true)'s members, plus what a client is not sent:
/// "gid", the earlier "attempts", "own_argv" (when set), "supervisor_pid" (when known),
/// "isolation" (when recorded), and "logs" as recorded (not LogsOf's guess) with
/// "logs_unrecorded": true for a job stored before gpulane recorded log files.
nlohmann::json JobToStoredJson(const Job& job);
/// Reads JobToStoredJson's object back, and the spec file of earlier gpulane versions (JobToJson
/// with the environment, "gid" and "attempts"). Required: the members every version wrote (id,
/// uid, gid, user, state, reason, submit_time, gpu_uuids, spec); the rest when present. Members a
/// client gets derived from the others (id_text, attempt, preemptions) are not read. Errors:
/// kInvalidArgument "job: " and the member: missing, of the wrong type, or not readable by its own
/// codec (SpecFromJson, ParseLogs, ParseAttempts).
Result<Job> JobFromJson(const nlohmann::json& j);

}  // namespace gpulane::store
