#pragma once
// The gpulane daemon: a durable multi-user job queue. It accepts requests on a Unix socket
// (proto/wire.h; identity from SO_PEERCRED only), keeps jobs in SQLite (store/), and starts one
// supervisor process per job that may run next (daemon/supervisor.h); supervisors wait in the same
// lease line as `gpulane run`, so queued jobs and ad-hoc runs never collide. The daemon learns of
// supervisors' progress through their status files (inotify), so a restart loses nothing.
#include <signal.h>

#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "daemon/daemon_parts.h"
#include "daemon/guard.h"
#include "daemon/job_files.h"
#include "daemon/job_table.h"
#include "daemon/jobs_in_parts.h"
#include "daemon/launcher.h"
#include "daemon/ops/context.h"
#include "daemon/ops/ops.h"
#include "daemon/outcome.h"
#include "daemon/parse_worker.h"
#include "daemon/retention.h"
#include "daemon/sampler_thread.h"
#include "daemon/time_limit_watch.h"
#include "os/env.h"
#include "daemon/paths.h"
#include "daemon/peer.h"
#include "daemon/settings.h"
#include "daemon/submission.h"
#include "daemon/web_child.h"
#include "gpu/backend.h"
#include "lease/lease_dir.h"
#include "sched/fairshare.h"
#include "proto/requests.h"
#include "proto/wire.h"
#include "store/job_store.h"
#include "store/job_view.h"
#include "util/clock.h"
#include "util/config.h"

namespace gpulane::daemon {

struct QueueStream;  // daemon/queue_stream.h

/// One client connection.
struct Connection {
  int fd = -1;
  Peer peer;
  proto::FrameReader reader{proto::kMaxRequestBytes};
  std::string out;                 ///< bytes not yet written
  /// Monotonic seconds when the first byte of the request now being read arrived; < 0 when no
  /// part of a request is buffered. The read time-out counts from here (a deadline).
  double request_start_s = -1;
  double last_activity_s = 0;      ///< monotonic seconds of the last byte read or written (idle time-out)
  std::size_t buffered = 0;        ///< bytes its reader held when last counted (Daemon::buffered_bytes_)
  bool close_after_write = false;
  /// A streamed reply being sent (queue_stream.h); requests behind it wait until it is done.
  std::shared_ptr<QueueStream> stream;
  /// An array submission or a large cancel of this connection is being stored (part by part,
  /// JobTable::StoreArrayPart, Daemon::CancelSlices): requests behind it wait until it is answered.
  bool storing = false;
  /// Its last frame is being parsed off the loop (ParseWorker): requests behind it wait.
  bool parsing = false;
  /// Its last request was handed to the sampler thread (telemetry questions): requests behind it wait.
  bool asking = false;
  /// Which connection this is, never reused (a descriptor is): an answer given turns later goes
  /// to this connection or to none.
  std::uint64_t serial = 0;
};

/// The daemon shows jobs to the request handlers (daemon/ops/) and counts users' submissions for
/// them through the two narrow interfaces it implements; they never see the rest of it.
class Daemon : private ops::JobViews, private ops::SubmitQuotas {
 public:
  /// A daemon on `paths` with the machine's `config`, the timings of `settings`, built from
  /// `parts` (daemon_parts.h: its clock and process table, GPUs, store and launcher; the clock and
  /// table must outlive it).
  Daemon(DaemonPaths paths, Config config, DaemonSettings settings, DaemonParts parts);
  ~Daemon();
  /// Runs until SIGTERM/SIGINT: Start, the loop, Stop. Returns the process exit code; prints the
  /// reason on stderr when it cannot start (another daemon running, damaged database, no NVIDIA driver).
  int Run();
  // The loop's bounded steps, for Run and for the in-process tests (tests/unit/daemon_inproc_*),
  // which drive a daemon from their own thread without sleeping.
  /// Setup, then the first launches and store updates: ready to serve.
  Status Start();
  /// One turn of the loop (LoopTurn), waiting at most `max_wait_s` for something to happen.
  void Step(double max_wait_s);
  /// The end of Run: arrays and cancels in progress finished and answered, replies written,
  /// gpulane-web stopped, the socket removed.
  void Stop();
  /// Whether the caps let in one more connection of `uid` (settings_.max_connections, the last
  /// kRootReserve of them root's, and max_connections_per_uid; clients gone by this turn's end not
  /// counted): when not, answers connection `fd` with one `unavailable` error naming the cap,
  /// closes it and logs the refusal. Accept asks it of each connection it takes, before
  /// AddConnection; tests ask it of one end of a socketpair with a peer of any uid.
  bool AdmitConnection(int fd, std::uint32_t uid);
  /// Takes connection `fd` (non-blocking, close-on-exec) of `peer` as Accept does once
  /// AdmitConnection let it in, and reads what it has sent already. Tests pass one end of a
  /// socketpair (with or without asking AdmitConnection first).
  void AddConnection(int fd, const Peer& peer);

 private:
  // Start-up (daemon.cc).
  Status Setup();
  // Setup's steps, in order.
  void FitConnectionsToFileLimit();
  /// Creates the state folder and takes its lock (kUnavailable: another daemon holds it).
  Status LockStateDir();
  /// Opens the job store, checked against its marker, without the arrays never stored whole.
  Status OpenStore();
  /// Opens the GPUs and reads them once (gpu_identity_); returns what it read.
  Result<GpuSnapshot> OpenGpus();
  /// The lease folders of the line's fair share and of the time limits; a failure is logged.
  void OpenLeaseDirs();
  JobTableLimits TableLimits(const GpuSnapshot& snapshot);
  /// The GPUs now, processes annotated, with what the sampler says of each (drained, anomalies):
  /// what `snapshot` answers and every waiter decides on (line_now.cc).
  Result<GpuSnapshot> MarkedSnapshot(const ReadOptions& options);
  /// The lease line now for JobTableLimits::line_now, gathered as every decider does
  /// (lease::GatherDecisionInputs); nullopt when the GPUs or the lease directory cannot be read.
  std::optional<LineSeen> LineNow();
  std::map<std::string, double> line_free_since_s_;  ///< LineNow's NoteFreeSince record
  /// The signalfd of `stops` and the inotify watch of the jobs folder.
  Status WatchJobsDir(const sigset_t& stops);
  Status OpenSocket();
  /// Begins loading the unfinished jobs and loads them for settings_.load_before_listen_s.
  void Recover();
  /// Loads more of the unfinished jobs for about `budget_s` seconds (none when 0), and finishes
  /// the start once all are in (daemon.cc).
  void LoadJobs(double budget_s);
  /// The error a job command gets while the jobs are loading (kUnavailable), for people.
  std::string LoadingLine() const;
  /// Records the store's largest job id in its marker (store_marker.h) when it has grown.
  void UpdateStoreMarker();
  // Event loop (server.cc).
  void Loop();
  void LoopTurn(double max_wait_s);
  void ReadSignals();
  void ReadStatusEvents();
  void Tick();
  void WriteAndClose();
  void FailSubmissions();
  void FailArrays();
  void Accept();
  void ReadFrom(Connection& c);
  void WriteTo(Connection& c);
  void Reply(Connection& c, const nlohmann::json& response);
  void CloseConnection(int fd);
  /// Answers connection `fd` (not yet in connections_) with one `unavailable` error and closes it.
  void RefuseConnection(int fd, const std::string& message);
  /// Logs a refused connection: the first of each `reason` at once, the rest counted until the tick.
  void NoteRefusal(const std::string& reason);
  /// Brings buffered_bytes_ up to date with c's reader.
  void CountBuffered(Connection& c);
  /// While buffered_bytes_ is over settings_.partial_budget_bytes: drops the data of the
  /// connection holding the most, answers it with an error and closes it.
  void EnforceBufferBudget();
  /// Closes connections whose request missed its deadline (with a `timeout` error) and idle ones.
  void CheckConnections(double now);
  // Requests (handlers.cc).
  void HandleRequest(Connection& c, const std::string& payload);
  /// HandleRequest of a parsed request (`req` discarded: the frame was not JSON).
  void HandleParsedRequest(Connection& c, const nlohmann::json& req);
  /// Handles the requests parse_worker_ has parsed, then what waited behind them.
  void TakeParsed();
  /// Whether `c` reads no requests now: behind a streamed reply, an array being stored or a
  /// frame being parsed.
  static bool Paused(const Connection& c) { return c.stream || c.storing || c.parsing || c.asking; }
  // Telemetry (sampler_thread.h).
  /// Starts the sampler thread (telemetry.enabled); a failure to is logged, and the daemon runs on
  /// without telemetry.
  void StartSampler();
  /// Hands a telemetry request of `c` to the sampler thread (or answers that telemetry is off).
  void AskSampler(Connection& c, const proto::SamplerRequest& req);
  /// Replies with the sampler's answers, then handles what waited behind them.
  void TakeTelemetry();
  /// Once a tick: hands the sampler's metered `gpulane run` leases to the job table (fair share),
  /// and, as the system daemon, publishes the users' fair-share factors to the lease line
  /// (lease/line_shares.h) when they moved or kLineSharesRefreshS passed.
  void ShareWithLeaseLine();
  /// The handlers' view of the daemon for `peer` (daemon/ops/context.h).
  ops::Context ContextFor(const Peer& peer);
  /// One handler per operation, called by HandleParsedRequest's std::visit; each answers `c` (or
  /// queues the submission, parks the wait, starts the stream).
  void Handle(Connection& c, const proto::PingRequest& req);
  void Handle(Connection& c, const proto::SnapshotRequest& req);
  void Handle(Connection& c, const proto::SubmitRequest& req);
  void Handle(Connection& c, const proto::QueueRequest& req);
  void Handle(Connection& c, const proto::ShowRequest& req);
  void Handle(Connection& c, const proto::ShareRequest& req);
  void Handle(Connection& c, const proto::LogsRequest& req);
  void Handle(Connection& c, const proto::WaitRequest& req);
  /// A queue request with "stream": answers the header, then PumpStream sends the text part by part.
  void StartQueueStream(Connection& c, const proto::QueueRequest& req);
  /// Appends the stream's next part to c.out once the last one is nearly written; at the end the
  /// closing empty frame, and then handles the requests that came in behind it.
  void PumpStream(Connection& c);
  nlohmann::json HandleSnapshot(const proto::SnapshotRequest& req);
  /// Cancel, hold and release (ops/control.cc chooses the jobs): changed in parts (cancel_slices.cc,
  /// hold_slices.cc), answered at once when the first turn's parts do all of it, else once the
  /// last part is stored.
  void Handle(Connection& c, const proto::CancelRequest& req);
  void Handle(Connection& c, const proto::HoldRequest& req);
  void Handle(Connection& c, const proto::ReleaseRequest& req);
  /// StartInParts of the jobs `chosen` (or its error answered).
  void StartChosen(Connection& c, Result<ops::Chosen> chosen, PartsOp op);
  // Submissions (submit_replies.cc): the job table stores them (JobTable::Submit, StoreArrayPart);
  // the daemon keeps the round and answers the outcomes.
  /// Hands the round of submissions read in this turn to the job table (one transaction) and
  /// answers each one whose outcome is known.
  void CommitSubmissions();
  /// Has the job table store parts of the arrays being submitted, oldest first, for about
  /// `budget_s` seconds (one part at least); answers each array's client once its last part is
  /// stored (or a part failed) and then handles the requests behind it.
  void StoreArrayParts(double budget_s);
  /// Answers each outcome's connection (if it is still there) and writes the reply out at once;
  /// an array's connection reads its next requests again (ResumeAfterArray).
  void AnswerSubmissions(const std::vector<SubmitOutcome>& outcomes);
  /// Answers connection `fd` if it is still connection `serial`, and writes the reply out.
  void AnswerConnection(int fd, std::uint64_t serial, const nlohmann::json& reply);
  /// Connection `fd` (if still `serial`) has had its array submission answered: the requests
  /// behind it are handled by ResumeConnections, later in the turn.
  void ResumeAfterArray(int fd, std::uint64_t serial);
  /// Handles the requests that waited behind the connections' array submissions (ReadFrom).
  void ResumeConnections();
  /// `reply` with "warnings": lines for people about the job store (unavailable since when, rows
  /// that cannot be read), when there are any (queue, snapshot).
  nlohmann::json WithStoreWarnings(nlohmann::json reply) const override;
  std::optional<unsigned> GpuIndex(const std::string& uuid) const override;
  // Jobs: the job table (job_table.h), the one owner of job state.
  std::optional<store::Job> FindJob(std::int64_t id) { return jobs_->Find(id); }
  void AnswerWaiters();
  /// Whether `peer` sees other users' command lines, directories and log paths: daemon.show_commands,
  /// or the daemon's own gpulane-web with web.show_commands (docs/security.md, "Privacy").
  bool ShowsCommandsTo(const Peer& peer) const;
  /// What `peer` sees of `job` in show, queue and usage (store/job_view.h): everything when it may
  /// act on it, else the command line, directory and log paths only as ShowsCommandsTo says.
  store::JobVisibility VisibilityFor(const Peer& peer, const store::Job& job) const override;
  void Log(const std::string& message) const override;
  /// [limits] of user `uid` (sched::LimitsOf with the groups the user database gives), looked up
  /// once per uid for the daemon's life (a group change takes a daemon restart).
  const LimitsConfig& LimitsOfUid(std::uint32_t uid, const std::string& user) override;
  /// Unfinished queued jobs of `uid`, counted once per loop turn over every job (so a flood of
  /// submissions costs one pass per turn, not one per submission) plus those accepted since.
  std::size_t& UnfinishedOf(std::uint32_t uid) override;

  DaemonPaths paths_;
  Config config_;
  DaemonSettings settings_;
  DaemonParts parts_;
  const os::Env env_;   ///< the clock, /proc, spawner and GPUs of parts_ (os/env.h)
  const Clock& clock_;  ///< env_.clock
  std::string jobs_dir_;
  std::unique_ptr<store::JobStore> store_;
  std::unique_ptr<SupervisorLauncher> launcher_;
  std::unique_ptr<JobTable> jobs_;                      ///< every unfinished job (after Setup)
  std::unique_ptr<GpuBackend> backend_;
  unsigned gpu_count_ = 0;
  GpuSnapshot gpu_identity_;  ///< the GPUs as read at start-up: UUIDs, memory, modes (submissions are checked against them)
  std::map<std::string, unsigned> gpu_index_;           ///< UUID -> PCI-order index, for people
  int lock_fd_ = -1, listen_fd_ = -1, signal_fd_ = -1, watch_fd_ = -1;
  /// A descriptor kept open to be given up when accept fails for want of descriptors (EMFILE):
  /// the daemon can then still accept the connection to refuse it, instead of spinning on it.
  int spare_fd_ = -1;
  std::uint64_t started_file_limit_ = 0;  ///< soft RLIMIT_NOFILE at start, before the daemon raised it (its supervisors get this one)
  std::map<int, Connection> connections_;
  std::map<std::uint32_t, std::size_t> connections_of_uid_;  ///< open connections by peer uid
  std::map<std::string, std::size_t> refused_;               ///< connections refused since the last tick, by reason (logged then)
  std::size_t buffered_bytes_ = 0;                          ///< request bytes all readers hold (Connection::buffered)
  static constexpr std::size_t kCancelPartJobs = 1000;
  static constexpr double kCancelTurnBudgetS = 0.02;  ///< parts done in one turn, at most about this long
  /// The cancels, holds and releases in progress, oldest first (one after the other, in the
  /// order they were asked for).
  std::deque<JobsInParts> cancels_;
  /// Changes the next parts of `k` for about `budget_s` seconds (one part at least); true once
  /// all of it is done (or a part could not be stored: then nothing of that part or after it is
  /// changed, and k.out says so).
  bool CancelParts(JobsInParts& k, double budget_s);
  /// One part of a cancel, hold or release (kCancelPartJobs jobs, one transaction: JobTable::
  /// CancelPart, HoldPart) into k.out; false when the store refused it.
  bool ChangePart(JobsInParts& k);
  /// CancelParts of the changes in progress, oldest first, for about `budget_s` seconds; answers
  /// each one's client when done and handles the requests behind it.
  void CancelSlices(double budget_s);
  /// The changes in progress when doing one threw: the first one's client gets an error (what
  /// was stored of it stays changed, and the reply says how many).
  void FailCancels();
  /// `k` is done (or given up): what follows it, once (a release's launch decision).
  void PartsDone(const JobsInParts& k);
  /// Starts `k` (StartChosen): answers at once when the first turn's parts do all of it, else
  /// once the last part is stored, the requests behind it waiting.
  void StartInParts(Connection& c, JobsInParts k);
  static constexpr double kStreamTurnBudgetS = 0.005;  ///< a streamed listing's parts made in one turn, about this long
  /// Parts of the unfinished jobs (DaemonSettings::load_part_rows) loaded in one turn at the start, about this long.
  static constexpr double kLoadTurnBudgetS = 0.02;
  double load_retry_at_s_ = 0;  ///< monotonic seconds before which a refused part is not tried again
  std::string load_error_;      ///< the last refused part's error (logged when it changes)
  static constexpr double kArrayTurnBudgetS = 0.003;  ///< array parts stored in one turn, at most about this long
  std::uint64_t next_serial_ = 1;                       ///< the next Connection::serial
  std::vector<std::pair<int, std::uint64_t>> resume_;  ///< ResumeAfterArray's connections (fd, serial)
  /// Frames larger than kParseInLoopBytes are parsed here, off the loop (while the bytes it holds
  /// stay under half the partial-request budget; beyond, in the loop as before).
  std::unique_ptr<ParseWorker> parse_worker_;
  /// The lease directory the system daemon publishes fair-share factors to; nullptr otherwise.
  std::unique_ptr<lease::LeaseDir> line_dir_;
  std::optional<sched::LineShares> published_shares_;  ///< as last published
  double published_mono_s_ = 0;                         ///< when (the monotonic clock)
  std::string share_error_;                             ///< the last publishing failure logged ("" after a success)
  /// The lease directory whose leases' time limits the daemon enforces (time_limit_watch.h), and
  /// the watch; nullptr when the directory cannot be opened.
  std::unique_ptr<lease::LeaseDir> limit_dir_;
  std::unique_ptr<TimeLimitWatch> limit_watch_;
  /// The GPU sampler (history, accounting, metrics); nullptr when telemetry is off.
  std::unique_ptr<SamplerThread> sampler_;
  /// gpulane-web, the HTTP side (web_child.h); nullptr when [web] listen is "off".
  std::unique_ptr<WebChild> web_;
  static constexpr std::size_t kParseInLoopBytes = 256u << 10;
  static constexpr std::size_t kAcceptPerTurn = 64;  ///< connections Accept takes in one turn of the loop
  std::size_t parsing_bytes_ = 0;  ///< bytes of the frames parse_worker_ holds
  /// Turns of the loop since the last `ping` with loop_stats, and the longest of them past its
  /// poll, seconds (the figure of issue 9, item 5: no request holds the loop for long): of the
  /// turns without the tick, and of those with it (Tick walks every unfinished job).
  std::uint64_t loop_turns_ = 0;
  double loop_worst_turn_s_ = 0;
  double loop_worst_tick_turn_s_ = 0;
  // Retention (retention.cc): a slice of old finished jobs removed from the store a turn.
  void PruneFinished();
  std::vector<std::pair<std::int64_t, std::int64_t>> SparedByDependencies();
  Retention retention_;
  /// The submissions read in this turn, for the group commit (CommitSubmissions); answered once
  /// the job table has stored them.
  std::vector<Submission> submits_;
  std::map<std::uint32_t, LimitsConfig> limits_of_uid_;  ///< LimitsOfUid's cache
  std::optional<std::map<std::uint32_t, std::size_t>> unfinished_of_uid_;  ///< UnfinishedOf's count for this turn
  struct Waiter {
    int fd;
    std::vector<std::int64_t> ids;
    nlohmann::json failed;  ///< the ids of the request that named no job (answered with the jobs)
  };
  std::vector<Waiter> waiters_;
  std::int64_t marked_max_id_ = 0;  ///< the largest job id the store's marker records
  bool stop_ = false;
  double last_tick_s_ = 0;  ///< monotonic seconds of the last tick
  bool schedule_needed_ = true;  ///< something changed that may let a queued job start (also JobTable's own)
};

/// Entry point of `gpulane daemon`: `user_mode` picks the per-user paths; `parts` are main()'s
/// (RealDaemonParts). Returns the exit code.
int RunDaemon(bool user_mode, DaemonParts parts);

}  // namespace gpulane::daemon
