#pragma once
// The daemon's table of unfinished jobs: the one owner of job state. Nothing else changes a job's
// state or fields, writes its row (from its submission on), or signals its supervisor; the daemon
// and the request handlers (daemon/ops/) read active() and drive the table by its events:
//   submitted        Submit (a round of submissions: one transaction), StoreArrayPart (an array, in
//                    parts); each returns what became of its submissions (daemon/submission.h)
//   cancelled        BeginParts, CancelPart, EndParts (a cancel in parts); CancelIdle (telemetry)
//   held, released   BeginParts, HoldPart, EndParts
//   status changed   ImportStatus (a supervisor's status file, inotify)
//   tick             CheckSupervisors, LaunchEligible, FlushDirty
//   supervisor lost  found by ImportStatus/CheckSupervisors (its lock is free)
// It owns no process and no socket: it is built from the job store, the jobs folder
// (daemon/job_files.h), a clock and a supervisor launcher (which also signals supervisors), so tests
// drive it on a :memory: store, a temporary folder, a FakeClock and a launcher that records.
//
// Invariants (tested on the table itself: tests/unit/job_table_test.cc, job_table_submit_test.cc,
// store_faults_test.cc):
//  1. A job is run at most once: it is stored "launching" before its supervisor starts, and a job
//     whose supervisor reported "running" (or marked its exec) is never started again.
//  2. An acknowledged job is durable: a submission's jobs are added, and its outcome returned (the
//     daemon's reply), only once the transaction that stores them has committed; a refused one adds
//     nothing. An end stays in the table, files and all, until it is stored.
//  3. A state change is stored before it is announced: a part of a cancel, hold or release is
//     written in one transaction before its jobs change here, before it is logged and before the
//     daemon answers; a part the store refuses changes nothing and signals nobody. An idle cancel's
//     reason is stored before the supervisor is signalled.
//  4. A supervisor is signalled only by the table (SupervisorLauncher::Signal), once per cancel or
//     hold (or once its pid is first reported); a cancelled job that runs ends only when its
//     supervisor reports its end.
//
// Recovery is the same code as normal operation: a restarted daemon reads every supervisor's
// status and lock, so it re-adopts running jobs, collects results that arrived while it was down,
// and never starts a job twice (a job whose supervisor reported "running" is never started again).
//
// A failed store write loses nothing: the jobs it was about stay changed in the table (an ended
// job stays in it, in its end state, with its files kept, so a restart would collect it again),
// FlushDirty writes them again on every later turn, nothing new is launched meanwhile, and
// StoreTroubleLine() says so for `status` and `queue` until a write succeeds.
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "daemon/job_files.h"
#include "daemon/launcher.h"
#include "daemon/parts_op.h"
#include "daemon/submission.h"
#include "os/file_system.h"
#include "sched/fairshare.h"
#include "sched/launch.h"
#include "sched/launch_past_cap.h"
#include "store/job_store.h"
#include "util/clock.h"
#include "util/result.h"

namespace gpulane::daemon {

/// Where the table writes what happens to jobs, for people ("job 12 (alice) completed ...").
using LogSink = std::function<void(const std::string& line)>;

/// A job's state as its dependents see it (sched/launch.h): unfinished until it has ended.
sched::DependencyState AsDependencyState(store::JobState state);

struct SupervisorStatus;  // daemon/job_files.h

/// How a supervisor's "done" status ended the attempt, for the retry decision (store::ShouldRetry):
/// a cancel (requested, the supervisor interrupted, or stopped as its partition closed), a
/// timeout, a command that did not start (also a "done" without an exit status), a zero or a
/// non-zero exit status.
store::AttemptEnd AttemptEndOf(const SupervisorStatus& status, bool cancel_requested);
/// The logs a supervisor reported for the current attempt of `job`, as the job's: a retry appends
/// to the first attempt's files, so where they are the same files, the job's part starts where the
/// first attempt's did.
store::JobLogs LogsOfAttempt(const store::Job& job, store::JobLogs reported);

/// The lease line now, for the jobs the cap leaves out (sched/launch_past_cap.h).
struct LineSeen {
  sched::LineNow line;  ///< its GPUs, the requests waiting there in line order, the decision's settings
  /// The daemon's jobs already there, by (uid, job text "12" or "12_3"): their tickets' and leases'.
  std::set<std::pair<std::uint32_t, std::string>> joined;
};

/// The table's timings and cap.
struct JobTableLimits {
  /// A launched job whose supervisor has not taken its lock this long after the launch (or after
  /// the daemon found it launching at start-up) is given back to the line (DaemonSettings).
  double requeue_grace_s = 10;
  /// Launched jobs that may wait for GPUs at once (daemon.max_waiting, sched::DefaultMaxWaiting).
  unsigned max_waiting = 4;
  /// How long a store write waits for another connection's lock (milliseconds): normally, and
  /// while the store is unavailable (each later turn retries, so the loop is never stalled long).
  int busy_timeout_ms = store::kDefaultBusyTimeoutMs;
  int retry_busy_timeout_ms = 100;
  /// While the store is unavailable, FlushDirty and LaunchEligible try it again at most this often
  /// (seconds; the daemon's tick).
  double retry_interval_s = 1;
  /// limits.max_gpus of a user (uid, login name; nullopt: no limit). A pending job whose user's
  /// launching and running jobs hold (or asked for) that many GPUs with it is not handed to a
  /// supervisor, so one user's flood does not fill the max_waiting slots. Unset: no limits.
  std::function<std::optional<unsigned>(std::uint32_t uid, const std::string& user)> max_gpus_of;
  /// limits.max_gpu_hours_per_day of a user (uid, login name; GPU-hours; nullopt: no limit). A
  /// pending job whose user's queued jobs used that much in the last 24 hours (ended ones and
  /// running ones so far, as fair share counts them, undecayed) is not handed to a supervisor.
  /// Unset: no such limits, and no 24 h usage is kept.
  std::function<std::optional<double>(std::uint32_t uid, const std::string& user)> max_gpu_hours_of;
  /// The priority's settings ([sched] and [shares]): pending jobs are ordered by it within their
  /// --priority class (sched/fairshare.h).
  sched::FairShareSettings fair_share;
  /// sched.max_preemptions_per_minute (0: no bound; sched::LaunchLimits).
  unsigned max_preemptions_per_minute = 0;
  /// Memory of the machine's GPUs (the smallest), for the fraction of a GPU a --mem job uses;
  /// nullopt: unknown (a --mem job counts as its whole GPUs).
  std::optional<std::uint64_t> gpu_total_bytes;
  /// CheckSupervisors reads at most this many jobs' files a tick, round robin (CPU-only jobs are
  /// launched past max_waiting and --mem jobs share GPUs: nothing else bounds the jobs launched or
  /// running at once). A status change is read at once anyway (inotify: ImportStatus).
  std::size_t supervisor_checks_per_tick = 500;
  /// The lease line now, as every decider of it gathers it (lease/decision_inputs.h): a ready job
  /// the cap leaves out is launched when the line grants it GPUs at once behind every request
  /// waiting there (sched::LaunchPastCap). nullopt: unknown (nothing is launched past the cap);
  /// unset: nothing is. (Last: the tests set the first members in order.)
  std::function<std::optional<LineSeen>()> line_now;
};

/// The groups of a user by name (for "@group" shares); the daemon asks the user database.
using GroupsLookup = std::function<std::vector<std::string>(const std::string& user, std::uint32_t uid, std::uint32_t gid)>;

/// Since when the store refuses writes, and why (nullopt in JobTable while writes succeed).
struct StoreTrouble {
  double since_wall_s = 0;  ///< seconds since the epoch of the first failed write
  std::string error;        ///< the last failure, as SQLite words it ("database is locked")
};

class JobTable {
 public:
  /// Keeps references to `store`, `clock`, `files` and `launcher`, which must outlive it. `jobs_dir`
  /// holds the jobs' spec, status and lock files, read and written through `files` (daemon/job_files.h).
  JobTable(store::JobStore& store, std::string jobs_dir, const Clock& clock, os::FileSystem& files,
           SupervisorLauncher& launcher, JobTableLimits limits, LogSink log);

  /// Start-up: loads every unfinished job from the store and reads the status of each one that had
  /// been handed to a supervisor (adopting, collecting or requeueing it as ImportStatus does).
  /// Rows that cannot be read are logged by id and left in the store (damaged()).
  /// Returns how many had been handed to supervisors. Errors: the store's (kIo).
  Result<std::size_t> Recover();
  /// Recover in parts, so that the daemon answers clients while it loads (a restart with 600,000
  /// unfinished jobs answered nothing for 14 s): BeginRecover counts the unfinished jobs,
  /// LoadRecoverPart loads the next `rows` of them (true once all are in the table), and
  /// FinishRecover does the rest of Recover (damaged rows, past use, the supervisors' status).
  /// Until FinishRecover the table is incomplete: nothing may be launched or decided from it.
  Status BeginRecover();
  Result<bool> LoadRecoverPart(std::size_t rows);
  Result<std::size_t> FinishRecover();
  /// While loading (BeginRecover to FinishRecover): jobs loaded so far and unfinished in all.
  struct RecoverProgress {
    std::size_t loaded = 0;
    std::size_t total = 0;
    std::vector<std::int64_t> ids;  ///< the unfinished jobs' ids, in order (ids[loaded] is the next)
  };
  const std::optional<RecoverProgress>& loading() const { return recover_; }
  static constexpr std::size_t kRecoverPartRows = 5000;

  // ---- Submissions: the submitted event (job_table_submit.cc) ---------------------------------
  /// One round of submissions (those the daemon read in one turn of the loop); their jobs are
  /// moved out of `round`. Idempotency keys first (per uid): a key stored before answers with its
  /// submission's ids and stores nothing (logged); one repeated within the round answers with the
  /// ids of its first submission once that is stored; one of an array being stored waits for it.
  /// Then every other plain submission goes into one transaction (one fsync: consecutive ids in
  /// the round's order, with their keys), and only once it has committed are their jobs added; a
  /// refused transaction adds nothing and fails each of them. Arrays are queued for
  /// StoreArrayPart. Returns the outcome of each submission known now, in the round's order.
  std::vector<SubmitOutcome> Submit(std::span<Submission> round);
  /// Stores the next part (kArrayPartTasks tasks, one transaction) of the oldest array being
  /// stored. The array's ids are reserved with its first part and its tasks unseen until its last
  /// (store::JobStore::InsertArrayPart); only then are they added here, and the outcomes of the
  /// array and of the submissions that repeated its key returned. A refused part ends the array:
  /// what was stored of it is removed (else at the next start) and each of them fails.
  std::vector<SubmitOutcome> StoreArrayPart();
  /// Storing the oldest array threw (std::bad_alloc): it is given up as a refused part is, each of
  /// its submissions failing with `why`.
  std::vector<SubmitOutcome> AbandonArray(const Error& why);
  /// True while arrays are being stored (StoreArrayPart has work).
  bool storing_arrays() const { return !arrays_.empty(); }
  /// Adds the tasks of the arrays being stored to their users' counts (`by_uid`: unfinished jobs).
  void CountStoringTasks(std::map<std::uint32_t, std::size_t>& by_uid) const;
  /// Tasks an array part stores in one transaction: a 100,000-task array holds the loop a few
  /// milliseconds a turn, not a second (issue 9, item 5).
  static constexpr std::size_t kArrayPartTasks = 250;
  /// The ids in active() of user `uid`'s jobs (an index kept with active(): a listing of one
  /// user's jobs never walks everyone's).
  const std::set<std::int64_t>& IdsOfUid(std::uint32_t uid) const;
  /// Every unfinished job by id, to read: only the table's events change them.
  const std::map<std::int64_t, store::Job>& active() const { return active_; }
  /// The job: unfinished ones from the table, others from the store; nullopt when there is none.
  std::optional<store::Job> Find(std::int64_t id);

  // ---- Cancel, hold and release (job_table_control.cc) -----------------------------------------
  /// A cancel, hold or release of `ids` (ops/control.cc chose them) is done in parts from now on:
  /// their pending jobs are not launched until their part (or EndParts).
  void BeginParts(PartsOp op, std::span<const std::int64_t> ids);
  /// One part of a cancel by user `by`. Its pending and held jobs are stored as cancelled in one
  /// transaction; only once that is durable are they taken out of the table and logged (one line
  /// for the part, or the job's own for one), and its launching and running jobs asked to stop
  /// (SIGTERM to their supervisors; each ends once its supervisor reports, ImportStatus). When the
  /// store refuses the part, none of its jobs changes and nobody is signalled (`refused`).
  PartResult CancelPart(std::span<const std::int64_t> ids, const std::string& by);
  /// One part of a hold (`hold`) or release by `by`: its pending (held) jobs are stored held
  /// (pending) in one transaction and changed here only once that is durable, logged in one line;
  /// then those waiting for GPUs under their supervisors (a hold) are asked to leave the line
  /// (HoldSignal(); held once the supervisor reports). A running job is never held. A refused
  /// part changes nothing and signals nobody. A release asks for no launch decision: the caller
  /// asks once it is done (one decision for the whole release, not one a part).
  PartResult HoldPart(std::span<const std::int64_t> ids, const std::string& by, bool hold);
  /// A change in parts ended before reaching `ids` (a part was refused, or the daemon failed):
  /// their pending jobs may start again.
  void EndParts(PartsOp op, std::span<const std::int64_t> ids);
  /// Job `id` stayed idle past its warning and the grace (anomaly.idle_action = "cancel"): cancelled
  /// as `gpulane cancel` cancels a running job, `message` its reason. The reason is stored first
  /// and its supervisor signalled once that is durable (while the store refuses, at the FlushDirty
  /// that stores it). False when `id` is no launching or running job of the table.
  bool CancelIdle(std::int64_t id, const std::string& message);
  /// True while a hold of job `id` waits for its supervisor to leave the line.
  bool HoldRequested(std::int64_t id) const { return hold_requested_.count(id) > 0; }
  /// The state of one array task ("12_3": ref.task set); nullopt when there is no such task.
  std::optional<store::JobState> TaskState(const sched::JobRef& ref);
  /// The job id of one array task ("12_3": ref.task set); nullopt when there is no such task.
  std::optional<std::int64_t> TaskJobId(const sched::JobRef& ref);

  /// Reads job `id`'s status file and lock and moves the job on: "running" adopted (or failed when
  /// its supervisor is gone), "done" collected, a held supervisor's job held, a lost launch
  /// requeued after the grace (cancelled instead when a cancel was requested). Unknown or
  /// unlaunched ids are ignored. An unreadable status is logged and the job left as it is.
  void ImportStatus(std::int64_t id);
  /// ImportStatus for the launched and running jobs (the daemon's tick): all of them, or the next
  /// limits.supervisor_checks_per_tick after the last tick's, in id order, wrapping around.
  void CheckSupervisors();
  /// Asks sched::PlanLaunches which pending jobs start now, cancels the doomed ones, stores the
  /// chosen ones as launching (one transaction) and only then writes their specs and starts their
  /// supervisors. When that transaction fails nothing is started (logged; tried again next time).
  void LaunchEligible();

  /// Stores every changed job, and every ended job whose end is not stored yet, in one
  /// transaction; only once that is durable are ended jobs' files removed and the jobs forgotten.
  /// A failure keeps them all for the next call (logged when the trouble starts and ends). While
  /// the store is unavailable it tries again only every retry_interval_s, and with nothing to
  /// write checks that the store takes writes (JobStore::CheckWritable), so the trouble ends.
  /// Idle cancels that waited for their reason to be stored signal their supervisors then.
  void FlushDirty();

  /// Since when, and why, store writes fail; nullopt while they succeed.
  const std::optional<StoreTrouble>& store_trouble() const { return trouble_; }
  /// Job changes that are not stored yet (waiting for the store).
  std::size_t UnstoredUpdates() const;
  /// "the job store is unavailable since 14:02: database is locked; 2 job updates waiting", for
  /// people; "" while writes succeed.
  std::string StoreTroubleLine() const;
  /// The unfinished jobs' rows that could not be read at Recover (kept in the store, not run).
  const std::vector<store::DamagedRow>& damaged() const { return damaged_; }
  /// True when job `id` has ended but its end is not durable yet (it is still in active()).
  bool EndUnstored(std::int64_t id) const { return unstored_ends_.count(id) > 0; }

  /// How a user's groups are found (default: none, so only users' own [shares] entries count).
  void SetGroupsLookup(GroupsLookup groups) { groups_ = std::move(groups); }
  /// The fair-share table at the table's clock (`gpulane share`): every user who used GPUs within
  /// the kept history or has an unfinished job, with share, decayed usage and factor, by name.
  std::vector<sched::UserShare> ShareTable();
  /// GPU use of leases that are no jobs of this table (`gpulane run`, Python lease(); the sampler
  /// meters them, SamplerThread::TakeLeaseUsage): `ended` ones are added to their users' decayed
  /// usage for fair share; `live` ones (end_s unset) replace the last call's and count up to now,
  /// as running jobs do. Not counted for limits.max_gpu_hours_per_day.
  void AddLeaseUsage(const std::vector<sched::UsageRecord>& ended, std::vector<sched::UsageRecord> live);
  /// What the lease line is ordered by (lease/line_shares.h): every user's fair-share factor at
  /// the table's clock and the priority weights.
  sched::LineShares LineShares();
  /// The half-life the usage decays with, seconds.
  double half_life_s() const { return limits_.fair_share.half_life_s; }

  /// How many unfinished jobs are in each state ("pending": 3, "held": 1, ...), for /metrics:
  /// held ones counted without walking them.
  std::map<std::string, std::uint64_t> CountByState();

  /// True (once) when something changed that may let a queued job start.
  bool TakeScheduleNeeded() { return std::exchange(schedule_needed_, false); }

 private:
  /// A new job, stored (it has its id).
  void Add(store::Job job);
  /// New jobs, stored, by id (an array's tasks): their map nodes are spliced in, not copied or
  /// moved (added one by one, 100,000 tasks held the daemon's loop for one long turn). Ids in
  /// `jobs` already in the table stay in `jobs`.
  void AddAll(std::map<std::int64_t, store::Job>& jobs);
  /// Records the outcome of a store write (the trouble line, the retries' pace).
  void NoteWrite(const Status& written);
  // Submit's steps (job_table_submit.cc), on the round's working state.
  struct SubmitRound;
  /// The idempotency keys of the round: repeats answered or paired with their first.
  void SortKeys(std::span<Submission> round, SubmitRound& r);
  /// Sets aside the arrays of the round (with the repeats of their keys) for StoreArrayPart.
  void QueueArrays(std::span<Submission> round, SubmitRound& r);
  /// Stores the round's plain submissions in one transaction and adds their jobs.
  void CommitPlain(std::span<Submission> round, SubmitRound& r);
  /// An array being stored in parts, one transaction a part.
  struct ArrayInProgress {
    Submission sub;
    std::int64_t array_job_id = 0;  ///< 0 until its first part is stored
    /// The tasks stored so far, by id: spliced into the table at the end (AddAll).
    std::map<std::int64_t, store::Job> tasks;
    /// Submissions that repeated its idempotency key meanwhile.
    std::vector<Submitter> repeats;
  };
  /// The front array's next part's tasks, made from its template.
  std::vector<store::Job> NextArrayPart(const ArrayInProgress& a) const;
  /// The outcome of the front array and of its repeats (`result`), and the array popped.
  std::vector<SubmitOutcome> EndArray(std::variant<SubmitStored, SubmitRepeated, SubmitFailed> result);
  /// Ends a job: records it (unless it is stored already, `stored`), forgets its files, logs it and
  /// removes it from the table. `job` must be in the table. `files`: false when the job is known
  /// to have no files in jobs_dir (a cancel in parts lists the folder once instead of five
  /// unlinks a job). `log`: false when the caller logs the end (a part: one line, not one a job).
  void Finish(store::Job& job, store::JobState state, std::optional<int> exit_code, const std::string& reason,
              std::optional<double> end_time, bool stored = false, bool files = true, bool log = true);
  /// Stores the job's changes at the next FlushDirty, and keeps the index of jobs that are not
  /// held up to date: every change of a job outside a write of its own goes through here.
  void MarkDirty(const store::Job& job) {
    dirty_.insert(job.id);
    Index(job);
  }
  /// `signal` to `job`'s supervisor, when its pid is known (else ImportStatusOf passes a cancel or
  /// hold on once it is reported): the one place a supervisor is signalled.
  void SignalSupervisor(const store::Job& job, int signal);
  /// A launching job whose supervisor was just sent a cancel: true only when its command is known
  /// never to run (its supervisor still reports "waiting" after the signal; job_table_control.cc).
  bool NeverStarts(const store::Job& job) const;
  /// The reason `job`, ended `end` as its supervisor reported in `status`, is stored with.
  static std::string EndReason(const store::Job& job, store::JobState end, const SupervisorStatus& status);
  /// The idle cancels whose reason FlushDirty has just stored: their supervisors get SIGTERM now.
  void SignalStoredIdleCancels();
  /// Writes one part's rows in one transaction (and notes how the write went).
  Status StoreRows(const std::vector<store::Job>& rows);
  /// One log line for a part's jobs (`ids`, of `owners`): "cancelled by root: 1000 jobs of alice: 12-1011".
  void LogPart(PartsOp op, const std::string& by, const std::vector<std::int64_t>& ids,
               const std::set<std::string>& owners);
  void ImportStatusOf(store::Job& job);
  /// ImportStatusOf of a "done" status, and of a "running" one whose supervisor holds its lock.
  void CollectEnd(store::Job& job, const SupervisorStatus& status);
  void NoteRunning(store::Job& job, const SupervisorStatus& status);
  /// Files `job` under the index of jobs that are not held (or out of it, when held).
  void Index(const store::Job& job);
  /// Calls f(id, job) for every job of active_ that is not held (through unheld_, so that the
  /// once-a-second work does not walk 100,000 held jobs), in id order. `f` must not add or
  /// remove jobs.
  template <typename F>
  void ForEachUnheld(F&& f) {
    for (std::int64_t id : unheld_)
      if (auto it = active_.find(id); it != active_.end()) f(id, it->second);
  }
  /// The end of `job` is durable: forget its files and the job (logged, with `log`).
  void Forget(store::Job& job, bool files = true, bool log = true);
  /// False while the store is unavailable and its last failure is less than retry_interval_s ago.
  bool RetryDue() const;
  void RequeueOrWait(store::Job& job, bool reported);
  void RequeueNeverStarted(store::Job& job, const JobFiles& files);
  /// Records the attempt that `status` ended as an earlier one, in `attempt_state`, and puts `job`
  /// back in line: a failure ShouldRetry retries (kFailed), or a job stopped as its partition
  /// closed with ends = "requeue" (kCancelled); stored before the job's files are removed.
  void RetryJob(store::Job& job, const SupervisorStatus& status, store::JobState attempt_state);
  sched::DependencyState DependencyStateOf(const sched::JobRef& job);
  // LaunchEligible's steps (jobs.cc), on the round's working state.
  struct LaunchRound;
  /// While the store refuses writes or ended jobs wait to be stored: the pending jobs say so, and
  /// true (no launch is tried now).
  bool LaunchesWaitForStore();
  /// Adds to `plan.launch` the jobs of `plan.capped` the lease line grants at once behind every
  /// request waiting there (limits.line_now; sched::LaunchPastCap). The jobs handed to supervisors
  /// that are not in the line yet (no ticket or lease of theirs) are counted in it, before them; a
  /// running one that holds no lease there makes the line unknown (nothing is added).
  void AddPastCap(sched::LaunchPlan& plan);
  /// The pending jobs for sched::PlanLaunches, with the limits and what they are judged by.
  LaunchRound GatherLaunchRound();
  /// Counts `job` towards the round's limits and, when it is pending and no limit of its user
  /// keeps it back (its reason then says which), adds it to the round's queue.
  void ConsiderForLaunch(std::int64_t id, store::Job& job, LaunchRound& round);
  /// Of the plan's launches, those their users' max_gpus still lets start (counted in
  /// `gpus_of_uid`), marked launching in memory.
  std::vector<store::Job*> MarkLaunching(const sched::LaunchPlan& plan, std::map<std::uint32_t, unsigned>& gpus_of_uid);
  /// Stores `to_launch` as launching in one transaction, then starts their supervisors; when the
  /// store refuses, they are pending again.
  void StoreAndLaunch(const std::vector<store::Job*>& to_launch);
  void Launch(store::Job& job);
  /// Each job of `in_line` (the pending jobs handed to `plan`) that the plan neither starts,
  /// cancels nor blocks gets why it waits: those the plan looked at (the head of the line) their
  /// priority, their user's use and the job just ahead; those behind them how many are ahead.
  void NoteWhyWaiting(const sched::LaunchPlan& plan, const std::vector<std::int64_t>& in_line, double now_s,
                      const std::map<std::string, sched::UserShare>& shares);
  double Now() const { return clock_.WallS(); }
  /// The GPUs `job` holds (or held) as a fraction of whole GPUs.
  double GpusHeld(const store::Job& job) const;
  /// Records the use of `job` (ended, with a start time) for fair share.
  void RecordUsage(const store::Job& job);
  /// The fair-share table at `now_s`, by user (usage_ pruned of what has decayed to nothing).
  std::map<std::string, sched::UserShare> FairShareAt(double now_s);
  /// Records the use of an ended job (or a stored row, at Recover): for fair share, and for
  /// limits.max_gpu_hours_per_day while it is within the last 24 hours. `now_s`: the table's clock.
  void AddEndedUsage(const sched::UsageRecord& record, double now_s);
  /// Adds ended `record`'s use, decayed to `now_s`, to its user's ended_usage_.
  void AddDecayedUsage(const sched::UsageRecord& record, double now_s);
  /// limits.max_gpu_hours_per_day at `now_s`: why the pending jobs of each user at or over it wait
  /// (sched::GpuHoursLimitReason), by user; users under it (or without it) are absent.
  std::map<std::string, std::string> GpuHoursHeldBack(double now_s);

  store::JobStore& store_;
  std::string jobs_dir_;
  const Clock& clock_;
  os::FileSystem& files_;
  SupervisorLauncher& launcher_;
  JobTableLimits limits_;
  LogSink log_;
  std::map<std::int64_t, store::Job> active_;           ///< every unfinished job
  std::deque<ArrayInProgress> arrays_;                  ///< arrays being stored, oldest first
  /// The ids in active_ of jobs not held (pending, launching, running; also ended ones whose end
  /// is not stored yet): kept by Add, AddAll, Recover, MarkDirty, HoldPart and Forget.
  std::set<std::int64_t> unheld_;
  /// Per user with jobs in active_: how many, and a uid and gid of theirs (for the share table's
  /// group look-up), kept with active_.
  struct ActiveUser {
    std::size_t jobs = 0;
    std::uint32_t uid = 0, gid = 0;
  };
  std::map<std::string, ActiveUser> active_users_;
  std::map<std::uint32_t, std::set<std::int64_t>> ids_of_uid_;  ///< IdsOfUid's index, kept by CountUser
  void CountUser(const store::Job& job, int change);
  std::map<std::int64_t, sched::DependencyState> finished_;  ///< end states seen (for --after), cached
  static constexpr std::size_t kTaskIdsKept = 100000;   ///< task_ids_ is emptied when it reaches this
  std::map<std::pair<std::int64_t, int>, std::int64_t> task_ids_;  ///< (array id, index) -> job id, as looked up
  std::set<std::int64_t> cancel_requested_;
  std::set<std::int64_t> hold_requested_;               ///< held while their supervisor waits for GPUs
  std::set<std::int64_t> kept_from_launch_;             ///< pending jobs a hold in parts will reach (BeginParts)
  std::set<std::int64_t> signal_when_stored_;           ///< idle cancels whose reason waits for the store (CancelIdle)
  std::int64_t checked_up_to_ = 0;  ///< CheckSupervisors: the last id of the last tick's slice
  std::map<std::int64_t, double> launched_at_;          ///< monotonic seconds each launching job was launched (or found)
  std::set<std::int64_t> dirty_;                        ///< jobs whose changes are not yet in the store
  std::set<std::int64_t> unstored_ends_;                ///< ended jobs (still in active_) whose end is not yet stored
  std::optional<StoreTrouble> trouble_;
  double failed_at_s_ = 0;                              ///< monotonic seconds of the last failed write
  std::vector<store::DamagedRow> damaged_;
  std::optional<RecoverProgress> recover_;  ///< set while loading in parts
  bool schedule_needed_ = true;
  GroupsLookup groups_;
  std::map<std::string, std::vector<std::string>> groups_of_;  ///< groups_ answers, by user (asked once per user)
  /// Ended jobs' decayed use of GPUs per user, as of a time (sched::DecayTo brings it forward):
  /// loaded at Recover from the store's ended jobs of the last kUsageKeptHalfLives half-lives,
  /// added to at each end.
  struct EndedUsage {
    double gpu_s = 0;
    double at_s = 0;
  };
  std::map<std::string, EndedUsage> ended_usage_;
  /// The same ended jobs' use, undecayed, those that ended within the last 24 hours (kept only
  /// while max_gpu_hours_of is set; older ones are dropped by GpuHoursHeldBack).
  std::vector<sched::UsageRecord> recent_usage_;
  /// Live leases that are no jobs of this table, as of the sampler's last sample (AddLeaseUsage).
  std::vector<sched::UsageRecord> live_lease_usage_;
  static constexpr double kUsageKeptHalfLives = 30;  ///< older use weighs less than 1e-9 of new
};

}  // namespace gpulane::daemon
