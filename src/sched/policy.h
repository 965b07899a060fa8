#pragma once
// The lease policy: which waiting request gets which GPUs, as a pure function of GPU occupancy and
// the line of waiting requests. No I/O and no clock, so the same code decides for `gpulane pick`,
// `gpulane run`, a queued job's supervisor and a trace replay (tests drive it directly).
//
// Rules:
//  - First come, first served: requests are considered in line order; a request that fits now gets
//    its GPUs even when earlier ones wait, but only GPUs no earlier request is waiting for.
//  - No starvation: a request that does not fit reserves the GPUs it waits for (those it could use
//    soonest), and no later request may take them, so a large request is not overtaken forever by a
//    stream of small ones.
//  - Exclusive requests need a GPU with no lease at all; memory requests (--mem) share a GPU while
//    the sum of declared memory not yet allocated, plus what is in use, plus a safety margin fits.
//  - Foreign: a process on a GPU that no gpulane lease of that GPU accounts for, whoever owns it.
//    It keeps the GPU from every request without share_foreign.
//  - Unknown is not free: a GPU whose process list NVML does not report qualifies only with
//    share_foreign; one whose memory it does not report never qualifies for --mem or --min-free.
//  - Placement: among the GPUs a granted request qualifies for, it takes the best ranked in its
//    order (Request::order, else DefaultOrder): memory requests (--mem) best fit, the GPU with the
//    least memory left once it is placed (ties: fewest shared leases, then most free's ties), so
//    shares pack onto GPUs already shared and whole GPUs stay free for exclusive and large jobs;
//    whole-GPU requests most free memory first. An explicit --order (memory, util, pci, bestfit)
//    is kept. Several GPUs: a set whose every pair is joined by NVLink when there is one among
//    those that qualify (ChooseLinkedSet), else the top of the ranking.
//  - Preemptible jobs (Request::preemptible, `submit --preemptible`): a preemptible request may
//    start on a GPU reserved for an earlier waiting request (not one reserved for a preemption,
//    below), and when it waits it reserves nothing and blocks nobody (not even under fifo). A
//    request that is not preemptible and cannot start now, but could if the preemptible jobs on
//    some GPUs gave way (GpuState::preemptible_holder: every lease on the GPU is preemptible and
//    nothing else runs there), waits for those GPUs with a reservation no preemptible request may
//    take, and Decision::preempt names the GPUs whose jobs must give way; their holders read the
//    same decision (lease/preemption.h) and stop their jobs. Free GPUs are taken before
//    preemptible ones, so no more jobs give way than needed (NVLink sets aside).
//  - A GPU in EXCLUSIVE_PROCESS (or EXCLUSIVE_THREAD) compute mode that already has a context,
//    foreign or gpulane's, takes no other job (CUDA would refuse the second context); a PROHIBITED,
//    failed or MIG-enabled GPU never qualifies.
//
// Policies (Limits::policy) differ only in what a waiting request does to the requests behind it:
//  - kDefault (gpulane's): every waiter reserves as above. A later request may start on a reserved
//    GPU only when its own time limit ends before that reservation starts (backfill), which needs
//    the reservation's start to be known: every GPU it waits for is free or held by leases whose end
//    is known (GpuState::busy_until_s, from their time limits). When the start is unknown (a
//    process outside gpulane, a lease without a time limit), a GPU that is free now is held for it
//    at most Limits::max_reserve_idle_s (counted from when the GPU became free, or from its user's
//    first such hold if later, across her requests: sched/reserve_idle.h), whether or not the
//    request could use that GPU now; after that the free GPU goes to later requests
//    (Decision::notes says so) and jobs without a time limit may start on it.
//  - kEasy (Slurm-like EASY backfill): only the first waiter reserves, against the known ends; the
//    same backfill rule; no bound: with an unknown start its reserved GPUs stay held.
//  - kFifo (strict first come, first served): nothing starts while an earlier request waits.
//  - kFirstFit (task-spooler-like skip-ahead): nobody reserves; whatever fits now starts.
// Backfill and the bound need a clock reading (Limits::now_s): pick, run and queued jobs decide on
// the wall clock with the leases' ends from their time limits (lease/waiter.h); without one
// kDefault is first come, first served with reservations as above.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "sched/request.h"
#include "util/result.h"

namespace gpulane::sched {

/// One GPU as the policy sees it: NVML's view joined with the live leases (lease/occupancy.h).
struct GpuState {
  unsigned index = 0;             ///< PCI-order index
  std::string uuid;
  bool usable = true;             ///< false: failed, MIG-enabled or PROHIBITED (never qualifies)
  std::string unusable_reason;    ///< why not usable, e.g. "failed (NVML_ERROR_GPU_IS_LOST)"
  bool one_context_only = false;  ///< EXCLUSIVE_PROCESS / EXCLUSIVE_THREAD compute mode
  bool has_context = false;       ///< a process runs on it or a gpulane lease holds it
  std::optional<std::uint64_t> total_bytes;  ///< nullopt: NVML does not report its memory
  std::optional<std::uint64_t> free_bytes;   ///< NVML free memory, with memory of ended processes added back
  /// Memory the driver keeps for itself (nvmlDeviceGetMemoryInfo_v2's reserved: about 0.6 GiB of an
  /// H200), never free for any job; nullopt: not reported (NVML v1), then total is the bound.
  std::optional<std::uint64_t> reserved_bytes;
  std::optional<unsigned> util_pct;
  bool processes_known = true;          ///< false: NVML could not list its processes (unknown, not none)
  std::vector<std::string> foreign;     ///< processes outside gpulane's leases of this GPU: "bob's python (pid 12)"
  /// Processes of another PID namespace counted as this GPU's leases' without proof (their jobs'
  /// own processes are not visible either: a container), for people; no decision reads it.
  std::vector<std::string> unverified;
  std::optional<std::string> exclusive_holder;  ///< "alice (job r4121)" when exclusively leased
  unsigned shared_leases = 0;                   ///< live memory-declared leases on it
  std::uint64_t unallocated_reservation_bytes = 0;  ///< sum over shared leases of max(0, declared - in use)
  std::vector<unsigned> nvlink_peers;   ///< indices of GPUs joined to this one by NVLink
  /// While leased: when every lease on it ends at the latest (start + time limit), in seconds on
  /// the clock of Limits::now_s. nullopt: unknown (a lease without a time limit) or not leased.
  std::optional<double> busy_until_s;
  /// Leased only by preemptible jobs (LeaseRecord::preemptible), with no process outside them and
  /// its processes known: who, for people ("bob (job 12)"). nullopt: anything else.
  std::optional<std::string> preemptible_holder;
  /// With preemptible_holder: the GPU memory their processes use (NVML), freed when they give way.
  std::uint64_t preemptible_used_bytes = 0;
  /// Why it takes no new jobs for now (the daemon's sampler saw an Xid error or the GPU lost:
  /// telemetry/anomaly.h); nullopt: it does. Unlike !usable, requests wait for it.
  std::optional<std::string> drained;
  /// While free: since when nothing has run on it, seconds on the clock of Limits::now_s
  /// (nullopt: unknown; a bounded reservation then counts from the request's submission).
  std::optional<double> free_since_s;
};

/// A MIG device as the policy sees it (lease/occupancy.h): the unit a request with
/// Request::mig_profile leases whole. Its GPU, MIG-enabled, never qualifies for whole-GPU requests.
struct MigUnit {
  unsigned gpu_index = 0;              ///< its GPU's PCI-order index
  std::string uuid;                    ///< "MIG-..."
  std::string gpu_uuid;                ///< its GPU's UUID (--gpus and CUDA_VISIBLE_DEVICES may name the GPU)
  std::optional<std::string> profile;  ///< "1g.18gb"; nullopt: NVML did not say (never matches)
  std::optional<std::uint64_t> total_bytes;
  bool gpu_usable = true;              ///< false: its GPU failed
  bool processes_known = true;         ///< false: NVML could not list its GPU's processes
  std::optional<std::string> holder;   ///< "alice (job 12)" while a lease holds it
  std::vector<std::string> foreign;    ///< processes on it that its lease (if any) does not account for
};

/// The scheduling policies; see the rules at the top of this file.
enum class PolicyKind {
  kDefault,   ///< "default": reservations for every waiter, backfill, holds of free GPUs bounded
  kFifo,      ///< "fifo": strict first come, first served
  kFirstFit,  ///< "firstfit": skip-ahead without reservations
  kEasy,      ///< "easy": EASY backfill (only the first waiter reserves)
};

/// "default", "fifo", "firstfit", "easy".
const char* PolicyName(PolicyKind policy);
/// The PolicyKind named `name`, or nullopt.
std::optional<PolicyKind> ParsePolicy(const std::string& name);

/// sched.max_reserve_idle's default: 10 minutes. Long enough that a reservation survives the gap
/// between one job of a pipeline ending and the next being submitted or a lease being re-taken
/// after a restart (seconds), and a short gap in a foreign process's use; short enough that an
/// idle GPU held for a start nobody can predict costs at most a few percent of a day.
inline constexpr double kDefaultMaxReserveIdleS = 600;

/// The verdict for one request.
struct Decision {
  bool granted = false;
  std::vector<unsigned> gpus;          ///< granted: the GPUs; waiting: the GPUs reserved for it
  bool impossible = false;             ///< can never be met on these GPUs (too many, too much memory)
  unsigned possible = 0;               ///< GPUs that could ever qualify for it
  unsigned position = 0;               ///< 1-based place among the requests that wait
  std::vector<std::string> reasons;    ///< per GPU why it does not qualify now: "GPU1: leased by alice (job r4121)"
  std::vector<std::string> never;      ///< of those, the GPUs that can never qualify, with why
  /// Waiting with a reservation: when the GPUs reserved for it are expected to be free (from the
  /// leases' ends), seconds on the clock of Limits::now_s; nullopt: unknown.
  std::optional<double> start_s;
  /// Waiting: the answer changes by itself at this time, with nothing else changing (a free GPU
  /// held for it is let go then), seconds on the clock of Limits::now_s.
  std::optional<double> recheck_at_s;
  /// Waiting: what else to know, e.g. "GPU1: free, but no longer held for it: ...".
  std::vector<std::string> notes;
  /// A request with Request::mig_profile, granted: the MIG device it gets (`gpus` holds its GPU).
  std::optional<std::string> mig_uuid;
  /// Waiting: it could start if the preemptible jobs on these GPUs (of `gpus`, which it reserves)
  /// gave way; their holders stop them. Empty: it waits for nobody to be preempted.
  std::vector<unsigned> preempt;
  /// Waiting: the GPUs of `gpus` held for it (reserved): a later request starts there only by
  /// backfill. Those of `gpus` not here wait for it unheld (a preemptible request, kFirstFit,
  /// past max_reserve_idle_s, another waiter's already). `gpulane status` shows these.
  std::vector<unsigned> held;
  /// Waiting for an unknown start while holding, or wanting to hold, an idle GPU: its user's
  /// clock of such holds (sched/reserve_idle.h UserIdleClock), for the decider's memory.
  std::optional<double> idle_hold_since_s;
};

/// The settings of one decision.
struct Limits {
  std::uint64_t margin_bytes = 0;  ///< safety margin kept free on every GPU shared by memory-declared leases
  PolicyKind policy = PolicyKind::kDefault;
  /// The time of the decision in seconds (the epoch for lease files, virtual in the simulator), on
  /// the clock of GpuState's times and Request::submit_time_s. nullopt: no backfill, no bound.
  std::optional<double> now_s;
  double max_reserve_idle_s = kDefaultMaxReserveIdleS;  ///< kDefault: longest hold of a free GPU for an unknown start, seconds
  /// Each user's clock of holding idle GPUs for unknown starts, as the decider remembers it
  /// (sched/reserve_idle.h; uid -> since, seconds on the clock of now_s); absent: her request's
  /// submission.
  std::map<std::uint32_t, double> idle_hold_since_by_uid;
  /// Only the grants matter (the simulator): waiting requests get no reasons (nor, when they
  /// cannot start and waiting changes nothing behind them, a reservation or `impossible`), and once
  /// no GPU is left that a later request could start on, Schedule stops: the decisions returned
  /// may be fewer than the requests, and those past the end wait. Grants are exactly those of the
  /// full decision.
  bool grants_only = false;
  /// limits.max_gpus per user (uid; absent: no limit): a request that would take its user past it
  /// waits, reserving nothing, with the reason (sched/user_limits.h).
  std::map<std::uint32_t, unsigned> max_gpus_by_uid;
  /// GPUs each user's leases hold now (uid -> count, lease/occupancy's GpusInUseByUid); grants of
  /// this decision are added as it goes.
  std::map<std::uint32_t, unsigned> gpus_in_use_by_uid;
};

/// Decides for every request in `line` (first in line first) against `gpus` (index i at
/// position i). Returns one Decision per request, in the same order (fewer with
/// Limits::grants_only: the rest wait).
/// Requests with Request::mig_profile are decided against `mig_units` (those of their profile that
/// they allow, by the MIG device's or its GPU's UUID), first come first served: the first free one
/// in PCI and MIG slot order; one of another profile or leased never qualifies, and no MIG device of
/// the profile makes it impossible. They reserve nothing (the units of a profile are alike).
std::vector<Decision> Schedule(std::vector<GpuState> gpus, std::span<const Request> line, const Limits& limits,
                               std::span<const MigUnit> mig_units = {});
/// The same for a vector (or a braced list) of requests.
inline std::vector<Decision> Schedule(std::vector<GpuState> gpus, const std::vector<Request>& line, const Limits& limits,
                                      std::span<const MigUnit> mig_units = {}) {
  return Schedule(std::move(gpus), std::span<const Request>(line), limits, mig_units);
}

/// The line's decision (Schedule over `line`), then for each of `behind` in turn whether it would
/// be granted now were it to join the line last: behind every request of `line` and every one of
/// `behind` granted before it. One per `behind`: granted with its GPUs, or an empty Decision (it
/// would wait; it then reserves nothing and changes nothing for those after it). A preemptible,
/// CPU-only or MIG request, or one over its user's max_gpus, is never granted here. Placed last,
/// a request gets a GPU some request of `line` is granted or holds only by backfill (it ends
/// before that reservation starts): it delays none of them. With Limits::grants_only as in
/// Schedule (the simulator). Decisions of preemptible requests in `line` avoid the GPUs the
/// line's waiters want, not those `behind` would take (WantedByWaiters).
std::vector<Decision> GrantsBehindLine(std::vector<GpuState> gpus, std::span<const Request> line, std::span<const Request> behind,
                                       const Limits& limits, std::span<const MigUnit> mig_units = {});

/// The answer to a request that must be met now or not at all (`gpulane pick`, `run --no-wait`):
/// the granted GPU indices, or the error both commands print. Errors: kInvalidArgument when it can
/// never be met on these `gpu_count` GPUs (too many, too much memory: a bad request), kNotEnoughGpus
/// when not now.
Result<std::vector<unsigned>> GrantedNow(const Request& request, const Decision& decision, unsigned gpu_count);

/// Why `request` can never be met here, for people: "asked for 3 GPUs but only 2 of the 2 GPUs
/// here can ever qualify (...): ask for fewer". `decision.impossible` must be true.
std::string ImpossibleReason(const Request& request, const Decision& decision, unsigned gpu_count);

/// Chooses `count` GPUs among `ranked` (best first in the request's order), preferring a set whose
/// every pair is joined by NVLink (`linked(a, b)`): the first fully linked set grown greedily from
/// each ranked GPU in turn; falls back to the top of the ranking.
std::vector<unsigned> ChooseLinkedSet(const std::vector<unsigned>& ranked, unsigned count,
                                      const std::function<bool(unsigned, unsigned)>& linked);

}  // namespace gpulane::sched
