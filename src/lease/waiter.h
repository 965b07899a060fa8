#pragma once
// Waiting in line for GPUs and taking the lease: the client side of the lease policy, used by the
// one lease-and-run lifecycle (exec/leased_job.h) of `gpulane run` and of queued jobs' supervisors.
// Wakes within milliseconds of any lease or ticket change (inotify), re-reads the GPUs at most
// every `nvml_poll_s` for processes outside gpulane.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "gpu/backend.h"
#include "gpu/visible_devices.h"
#include "lease/lease_dir.h"
#include "os/process_table.h"
#include "sched/partition.h"
#include "sched/policy.h"
#include "sched/request.h"
#include "sched/unclaimed.h"
#include "util/clock.h"
#include "util/config.h"
#include "util/result.h"

namespace gpulane::lease {

/// What a job asks for and how long it may wait.
struct WaitRequest {
  sched::Request request;       ///< what it asks (allowed_uuids nullopt: resolved here from gpu_list)
  std::uint64_t seq = 0;        ///< place in line: 0 for now (`gpulane run`); a queued job's submission time in ns
  InheritedGpus inherited;  ///< the allocation the job was given: CUDA_VISIBLE_DEVICES, Slurm's GPUs
  /// The GPULANE_JOB_ID this process inherited: when it names a live lease held by an ancestor,
  /// the request is nested in that job (a pipeline step): it waits only for that job's GPUs.
  std::optional<std::string> parent_job_id;
  /// The job as people name it, written as its lease's job_text (LeaseRecord): "12_3" for task 3 of
  /// array 12, whose job id (GPULANE_JOB_ID, the lease's job_id) is a number; "" = the job id.
  std::string job_text;
  std::optional<std::uint32_t> owner_uid, owner_gid;  ///< owner of the lease file (root supervisors: the job's user)
  /// The process the lease is for, written as its "pid": this process (nullopt), or its parent
  /// (`gpulane _lease`: the process that started it is the job; lease/occupancy.h AnchorOf).
  std::optional<pid_t> lease_pid;
  std::optional<double> timeout_s;
  bool no_wait = false;
  bool quiet = false;
  double nvml_poll_s = 1;
  std::vector<int> extra_signals;  ///< also end the wait (interrupted_by_signal) on these
  std::uint64_t margin_bytes = 1ULL << 30;
  /// [sched] policy and max_reserve_idle (SchedSettings): decisions are made on the wall clock of
  /// the WaitEnv, with the leases' ends (LeaseRecord::time_limit_s), so a job with a --time-limit
  /// may backfill and a free GPU is held for a start nobody can predict at most
  /// max_reserve_idle_s, counted from when this waiter first saw it free (sched/policy.h).
  sched::PolicyKind policy = sched::PolicyKind::kDefault;
  double max_reserve_idle_s = sched::kDefaultMaxReserveIdleS;
  /// [sched] max_unclaimed: a ticket this waiter has seen granted and not claimed for this long
  /// loses its place in its decisions (sched/unclaimed.h).
  double max_unclaimed_s = sched::kDefaultMaxUnclaimedS;
  /// The machine's config, for [limits] (limits.max_gpus of every user in line: AddUserLimits).
  Config limits_config;
  /// The machine's partitions (Config::partitions): the one request.partition names restricts the
  /// GPUs, and while it is closed (local time, on the WaitEnv's wall clock) nothing is granted:
  /// --no-wait fails with kNotEnoughGpus, a waiting request waits for it to open.
  std::vector<PartitionConfig> partitions;
};

/// Sets what `config` says about deciding (lease.memory_margin, run.nvml_poll, [sched] policy and
/// max_reserve_idle, the partitions) on `w`: the same for `gpulane run` and queued jobs.
void ApplyConfig(const Config& config, WaitRequest& w);

/// Sets free_since_s of every free GPU (no lease, no process, its process list known) of `gpus` to
/// when this caller first saw it free, as kept in `first_seen_free_s` (UUID -> seconds on the
/// clock of `now_s`; a GPU seen free for the first time is free since `now_s`, one not free is
/// forgotten). The bound on holding a free GPU for a start nobody can predict counts from there:
/// nobody keeps a record of when a GPU became free, so each waiter counts from its own sight of it.
void NoteFreeSince(std::vector<sched::GpuState>& gpus, double now_s, std::map<std::string, double>& first_seen_free_s);

/// Per-user GPU limits for one decision: fills `limits.max_gpus_by_uid` for every user in
/// `tickets` and `newcomer_uid` (limits.max_gpus under `config`, sched::LimitsOf with the user's
/// groups from the user database; cached in `*cache` when given, uid -> limit) and
/// `limits.gpus_in_use_by_uid` from `leases` (each GPU of a lease counts once for its owner, an
/// unreadable lease naming none as all `gpu_count` of the machine's; a nested lease counts
/// nothing, it runs on its job's GPUs). Leaves `limits` alone when no [limits] are configured.
void AddUserLimits(const Config& config, const std::vector<LeaseRecord>& leases, const std::vector<TicketRecord>& tickets,
                   std::optional<std::uint32_t> newcomer_uid, unsigned gpu_count, sched::Limits& limits,
                   std::map<std::uint32_t, std::optional<unsigned>>* cache = nullptr);

/// GPUs taken: the lease (held; inherit its fd to the job) and the snapshot they were chosen from.
struct Grant {
  std::vector<unsigned> gpus;  ///< PCI-order indices
  HeldFile lease;
  GpuSnapshot snapshot;
  double waited_s = 0;
  int interrupted_by_signal = 0;  ///< set instead of a lease when SIGINT/SIGTERM/SIGHUP came while waiting
  /// Its partition closes while the job may run and says `ends = "stop"|"requeue"`
  /// (sched::StopOf, from the time of the grant): the job is stopped then.
  std::optional<sched::PartitionStop> partition_stop;
  /// --mig: the MIG device leased (`gpus` holds its GPU); the job gets CUDA_VISIBLE_DEVICES=MIG-...
  std::optional<std::string> mig_uuid;
  /// The waiter's memory of unclaimed grants (sched/unclaimed.h), for the job's own later
  /// decisions (a preemptible job asking whether to give way: lease/preemption.h).
  sched::LineMemory unclaimed;
};

/// Time and sleeping as the waiter sees them: the real clocks and poll(2), or a test's virtual
/// clock that advances when the waiter sleeps.
class WaitEnv : public Clock {
 public:
  /// Sleeps until one of `fds` (-1 entries are skipped) is readable or `timeout_s` passed; returns
  /// a bit per fd, set when it is readable.
  virtual unsigned WaitReadable(const std::vector<int>& fds, double timeout_s) = 0;
};

/// The caller's clock (the real one: os::Env's) and poll(2).
class PollWaitEnv final : public WaitEnv {
 public:
  explicit PollWaitEnv(const Clock& clock) : clock_(clock) {}
  double WallS() const override { return clock_.WallS(); }
  double MonotonicS() const override { return clock_.MonotonicS(); }
  unsigned WaitReadable(const std::vector<int>& fds, double timeout_s) override;

 private:
  const Clock& clock_;
};

class LeaseWaiter {
 public:
  /// `on_status` receives the one-line waiting status each time it changes ("" when done); `env`
  /// is the time and the sleeping (PollWaitEnv over os::Env's clock), `processes` the process
  /// table (os::Env's) that GPU processes, lease holders and a parent job are looked up in.
  LeaseWaiter(GpuBackend& backend, const LeaseDir& dir, WaitRequest request, std::string job_id, std::string label,
              std::function<void(const std::string&)> on_status, WaitEnv& env, ProcessTable& processes);

  /// Takes a place in line now, before the GPUs are read (NVML's start-up takes tens of ms), so a
  /// request started earlier is in line before a later one decides. The ticket allows any GPU until
  /// Acquire() narrows it to the allowed ones. Errors: kIo.
  Status JoinLine();

  /// Joins the line (if not yet) and waits until the policy grants GPUs. Errors: kInvalidArgument (a
  /// --gpus entry names no GPU; more GPUs or memory than these GPUs can ever give), kNotEnoughGpus
  /// (--no-wait and not free now; or the GPUs it could use failed), kTimeout, kNotFound (nested:
  /// the job it runs inside ended), kNvml, kIo.
  Result<Grant> Acquire();

  /// Records the job's process group in the lease (under the directory lock).
  void RecordProcessGroup(HeldFile& lease, pid_t pgid);

  /// After the job: warns on stderr if the GPUs still list a process of the job (waiting up to a
  /// second for the driver to catch up). Returns true when none remains.
  bool CheckGpusReleased(const std::vector<unsigned>& gpus, const std::set<pid_t>& job_pids);

  /// True when this request runs inside another gpulane job's lease (known after JoinLine).
  bool nested() const { return !ticket_.parent.empty(); }

 private:
  Result<GpuSnapshot> ReadSnapshot();
  /// Narrows the ticket to `allowed_uuids` (rewriting its file unless it allows every GPU of
  /// `snapshot` already).
  Status NarrowTicket(std::vector<std::string> allowed_uuids, const GpuSnapshot& snapshot);
  /// This ticket's decision under the directory lock; sets *earlier_granted when a request before
  /// it in line is granted in the same decision. Errors: kIo (the ticket is gone), kNotFound.
  Result<sched::Decision> Decide(const GpuSnapshot& snapshot, ProcessTable& table, bool* earlier_granted);
  std::string StatusLine(const std::vector<std::string>& reasons, unsigned position) const;
  /// Hands `status` to on_status (unless --quiet) when it differs from `last_status`, which it becomes.
  void SayStatus(std::string status, std::string& last_status) const;
  /// After a change in the lease directory: waits, when changes come faster than a waiting
  /// request should look (kLookBurst, kLooksPerS in waiter.cc), until it may look again. True when
  /// a signal came meanwhile (on `signal_fd`, not yet read).
  bool SpaceOutLooks(int signal_fd);
  /// Says so when this request did not run for longer than a grant may stay unclaimed: it is
  /// later than `due_s` (monotonic) by that much.
  void WarnIfLate(double due_s) const;
  // Acquire's steps.
  /// The request's partition (nullptr: none). Errors: kInvalidArgument (gone from the config).
  Result<const PartitionConfig*> FindPartition() const;
  /// Seconds into the local week now, with the fraction of the second (a partition's stop is
  /// timed from it: sched::StopOf).
  double WeekNowS() const;
  /// Waits outside the line, reserving nothing, while `partition` is closed. True when a signal
  /// came on `signal_fd` (not read). Errors: kTimeout (--timeout), --no-wait's refusal.
  Result<bool> AwaitOpen(const PartitionConfig& partition, double start_s, int signal_fd);
  /// The GPUs the request may use on `snapshot`: --gpus within the inherited ones, then its
  /// partition's.
  Result<std::vector<std::string>> AllowedUuids(const PartitionConfig* partition, const GpuSnapshot& snapshot) const;
  /// Joins the line (JoinLine), reads the GPUs and narrows the ticket to the allowed ones.
  Result<GpuSnapshot> JoinWithItsGpus(const PartitionConfig* partition);
  /// Decide (under the directory lock), then: a grant behind an earlier one of the same decision
  /// is deferred (`defer`) at most kMaxDeferS from `deferred_since_s`; a grant while its partition
  /// is closed is taken back (with when to look again).
  Result<sched::Decision> DecideNow(const GpuSnapshot& snapshot, const PartitionConfig* partition, double& deferred_since_s,
                                    bool& defer);
  /// Writes the lease of grant `mine` and lets go of the ticket (under the directory lock).
  Result<Grant> TakeLease(const sched::Decision& mine, GpuSnapshot& snapshot, const PartitionConfig* partition, double start_s);
  /// How long to sleep before looking again. Errors: kTimeout (--timeout ran out).
  Result<double> SleepS(const sched::Decision& mine, bool defer, double start_s, double snapshot_time_s) const;

  GpuBackend& backend_;
  const LeaseDir& dir_;
  WaitRequest request_;
  LeaseRecord record_;
  std::function<void(const std::string&)> on_status_;
  WaitEnv& env_;
  ProcessTable& processes_;
  TicketRecord ticket_;   ///< this request's ticket as written, with its file's identity (dev, ino)
  HeldFile held_ticket_;  ///< this request's place in line, until it gets its lease
  std::vector<std::string> parent_uuids_;  ///< nested: the GPUs of the job it runs inside
  std::set<std::uint32_t> seen_alive_;     ///< GPU processes seen alive in /proc in earlier snapshots
  /// Per GPU (UUID): when this waiter first saw it free (no lease, no process), on the WaitEnv's
  /// wall clock; the bound on holding a free GPU for an unknown start counts from there.
  std::map<std::string, double> free_since_s_;
  std::map<std::uint32_t, std::optional<unsigned>> max_gpus_cache_;  ///< uid -> limits.max_gpus (AddUserLimits)
  sched::LineMemory unclaimed_;  ///< tickets seen granted and not claimed, and those that lost their place
  double look_tokens_ = 0;        ///< SpaceOutLooks' bucket: looks it may take at once
  double look_tokens_at_s_ = -1;  ///< when the bucket was last filled (MonotonicS); -1: never, full
};

}  // namespace gpulane::lease
