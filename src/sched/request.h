#pragma once
// The one request type: what a job asks of the GPUs and who asks, when. `gpulane pick`, `run` and
// `submit` parse it from the same options (cli/request_options.h); it travels unchanged to the
// daemon (proto/request_json.h), into the store (store::JobSpec::request), into lease tickets
// (lease::TicketRecord::request) and to the policy (sched::Schedule).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "util/result.h"

namespace gpulane::sched {

/// How to rank GPUs that qualify. Without --order a request gets DefaultOrder's.
enum class Order {
  kMostFree,   ///< most free memory first; ties: lower utilisation, then PCI order (whole GPUs' default)
  kLeastUtil,  ///< lowest GPU utilisation first; ties: most free memory, then PCI order
  kPci,        ///< PCI bus order
  /// Best fit: least free memory left after placing the request first (for --mem: free now minus
  /// the margin minus what it declares); ties: fewest shared leases, then as kMostFree (lower
  /// utilisation, PCI order). Memory-declared requests' default: shares pack onto GPUs already
  /// shared, so whole GPUs stay free for large and exclusive jobs.
  kBestFit,
};

/// "memory", "util", "pci", "bestfit": the names of --order.
const char* OrderName(Order order);
/// The Order named `name`, or nullopt.
std::optional<Order> ParseOrder(const std::string& name);

/// What happens to a job whose GPUs a waiting job needs (`submit --preemptible`): a preemptible
/// job may start on any idle GPU, also one reserved for a waiting job or in a closed partition,
/// and gives way (SIGTERM, its kill grace, SIGKILL) as soon as a job that is not preemptible
/// could start if it did (sched/policy.h, Decision::preempt).
enum class Preemptible {
  kNo,       ///< not preemptible (every job's default)
  kRequeue,  ///< "requeue": back in line, restarted later with GPULANE_PREEMPTED=1
  kCancel,   ///< "cancel": ended cancelled
};

/// "no", "requeue", "cancel".
const char* PreemptibleName(Preemptible preemptible);
/// The Preemptible named `name` ("no", "requeue", "cancel"), or nullopt.
std::optional<Preemptible> ParsePreemptible(const std::string& name);

/// Bounds every request is checked against (CheckRequest): larger values are refused as input
/// errors instead of overflowing arithmetic later.
inline constexpr unsigned kMaxGpuCount = 1024;
inline constexpr std::uint64_t kMaxMemBytes = 1ULL << 50;      ///< 1 PiB per GPU
inline constexpr double kMaxTimeLimitS = 366.0 * 24 * 3600;    ///< one year
inline constexpr int kMaxPriority = 1000000;

/// What a job asks for.
struct Request {
  // ---- the GPUs --------------------------------------------------------------------------------
  /// GPUs wanted, 0..kMaxGpuCount. 0: a CPU-only job (`-g 0`, run and submit): it takes no GPU and
  /// no lease, never waits in the GPUs' line and starts with CUDA_VISIBLE_DEVICES empty.
  unsigned count = 1;
  std::optional<std::uint64_t> mem_bytes;       ///< set: share GPUs, declaring this much GPU memory per GPU
  std::optional<std::uint64_t> min_free_bytes;  ///< each GPU needs at least this much free memory
  std::optional<unsigned> max_util_pct;         ///< each GPU at most this busy, 0..100
  bool share_foreign = false;                   ///< GPUs running processes outside gpulane may qualify
  /// --order as the user gave it; nullopt: not given, DefaultOrder applies (EffectiveOrder).
  std::optional<Order> order;
  std::string gpu_list;                         ///< --gpus as the user gave it ("" = no restriction)
  /// The GPUs it may use, by UUID: --gpus within the caller's CUDA_VISIBLE_DEVICES, resolved
  /// against the machine's GPUs (gpu/visible_devices.h ResolveAllowedGpus). nullopt: any GPU (not
  /// resolved yet; a ticket taken before NVML was read).
  std::optional<std::vector<std::string>> allowed_uuids;
  /// --partition as the user gave it, else the machine's sched.default_partition when the request
  /// was parsed ("" = none: every GPU, any time; sched/partition.h).
  std::string partition;
  /// --preemptible (submit): kNo for every other job, and for `pick` and `run`.
  Preemptible preemptible = Preemptible::kNo;
  /// --mig PROFILE ("1g.18gb"): one MIG device of this profile instead of whole GPUs (count 1,
  /// no --mem, --min-free or --max-util: a MIG device is leased whole). "" = whole GPUs.
  std::string mig_profile;
  /// A preemptible job's: how often it gave way to another job before this attempt (its attempts
  /// recorded preempted). Above 0 it no longer takes GPUs reserved for waiting jobs, and at
  /// sched.max_preemptions_per_job it is not preempted again (sched/preemption.h).
  unsigned preemptions = 0;

  // ---- who and when ----------------------------------------------------------------------------
  std::uint32_t uid = 0;       ///< who asks; from the kernel (SO_PEERCRED, a file's owner), never from input
  std::string user;            ///< login name of uid, for people
  int priority = 0;            ///< higher goes first; above 0 only for admins (daemon.admin_group, root)
  double submit_time_s = 0;    ///< seconds since the epoch: its place in line among equal priorities
  std::optional<double> time_limit_s;  ///< the job is stopped after this long (SIGTERM, grace, SIGKILL)
  bool operator==(const Request&) const = default;
};

/// The longest --mig profile name accepted ("7g.141gb" has 8 characters).
inline constexpr std::size_t kMaxMigProfileChars = 32;

/// Checks the bounds above and the combinations that make no sense (--mem 0, a utilisation over
/// 100 %, a non-positive time limit, count 0 with options that choose GPUs, a partition or
/// --preemptible). Errors: kInvalidArgument naming the option and the fix ("--mem 0: declare ...").
Status CheckRequest(const Request& request);

/// The order a request without --order gets: kBestFit when it declares memory (--mem), else
/// kMostFree.
Order DefaultOrder(const Request& request);
/// The order `request`'s GPUs are ranked in: its --order, else DefaultOrder.
Order EffectiveOrder(const Request& request);

/// True when `uuid` is among the GPUs `request` may use.
bool Allows(const Request& request, const std::string& uuid);

}  // namespace gpulane::sched
