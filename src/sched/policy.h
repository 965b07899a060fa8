#pragma once
// The lease policy: which waiting request gets which GPUs, as a pure function of GPU occupancy and
// the line of waiting requests. No I/O and no clock, so the same code decides inside `gpulane run`,
// in the daemon, and in a trace replay (tests drive it directly).
//
// Rules:
//  - First come, first served: requests are considered in line order; a request that fits now gets
//    its GPUs even when earlier ones wait, but only GPUs no earlier request is waiting for.
//  - No starvation: a request that does not fit reserves the GPUs it waits for (those it could use
//    soonest), and no later request may take them, so a large request is not overtaken forever by a
//    stream of small ones.
//  - Exclusive requests need a GPU with no lease at all; memory requests (--mem) share a GPU while
//    the sum of declared memory not yet allocated, plus what is in use, plus a safety margin fits.
//  - A GPU in EXCLUSIVE_PROCESS compute mode takes one job at most.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace gpulane::sched {

/// How to rank GPUs that qualify (same meanings as gpu/select.h's PickOrder).
enum class Order { kMostFree, kLeastUtil, kPci };

/// One GPU as the policy sees it: NVML's view joined with the live leases.
struct GpuState {
  unsigned index = 0;             ///< PCI-order index
  std::string uuid;
  bool usable = true;             ///< false: failed, MIG-enabled or PROHIBITED (never qualifies)
  std::string unusable_reason;    ///< why not usable, e.g. "failed (NVML_ERROR_GPU_IS_LOST)"
  bool exclusive_process_mode = false;  ///< EXCLUSIVE_PROCESS compute mode: one job at most
  std::uint64_t total_bytes = 0;        ///< 0 when NVML does not report it
  std::uint64_t free_bytes = 0;         ///< NVML free memory, with memory of ended processes added back
  std::optional<unsigned> util_pct;
  std::vector<std::string> foreign;     ///< compute processes outside gpulane: "bob's python (pid 12)"
  std::optional<std::string> exclusive_holder;  ///< "alice (job r4121)" when exclusively leased
  unsigned shared_leases = 0;                   ///< live memory-declared leases on it
  std::uint64_t unallocated_reservation_bytes = 0;  ///< sum over shared leases of max(0, declared - in use)
  std::vector<unsigned> nvlink_peers;   ///< indices of GPUs joined to this one by NVLink
};

/// A request waiting in line.
struct Request {
  std::string id;                          ///< the ticket's id
  unsigned count = 1;                      ///< GPUs wanted
  std::optional<std::uint64_t> mem_bytes;  ///< set: a shared lease declaring this much memory per GPU
  std::optional<std::uint64_t> min_free_bytes;
  std::optional<unsigned> max_util_pct;
  bool share_foreign = false;              ///< GPUs with processes outside gpulane may qualify
  std::vector<unsigned> allowed;           ///< GPU indices it may use
  Order order = Order::kMostFree;
};

/// The verdict for one request.
struct Decision {
  std::string id;
  bool granted = false;
  std::vector<unsigned> gpus;          ///< granted: the GPUs; waiting: the GPUs reserved for it
  bool impossible = false;             ///< can never be met on these GPUs (too many, too much memory)
  unsigned possible = 0;               ///< GPUs that could ever qualify for it
  unsigned position = 0;               ///< 1-based place among the requests that wait
  std::vector<std::string> reasons;    ///< per GPU why it does not qualify: "GPU1: leased by alice (job r4121)"
};

/// Safety margin kept free on every GPU shared by memory-declared leases.
struct Limits {
  std::uint64_t margin_bytes = 0;
};

/// Decides for every request in `line` (oldest first) against `gpus`. Returns one Decision per
/// request, in the same order.
std::vector<Decision> Schedule(std::vector<GpuState> gpus, const std::vector<Request>& line, const Limits& limits);

/// Chooses `count` GPUs among `ranked` (best first), preferring a set whose every pair is joined by
/// NVLink (`linked(a, b)`); falls back to the top of the ranking.
std::vector<unsigned> ChooseLinkedSet(const std::vector<unsigned>& ranked, unsigned count,
                                      const std::function<bool(unsigned, unsigned)>& linked);

}  // namespace gpulane::sched
