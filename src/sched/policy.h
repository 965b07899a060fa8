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
//  - A GPU in EXCLUSIVE_PROCESS (or EXCLUSIVE_THREAD) compute mode that already has a context,
//    foreign or gpulane's, takes no other job (CUDA would refuse the second context); a PROHIBITED,
//    failed or MIG-enabled GPU never qualifies.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
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
  std::optional<unsigned> util_pct;
  bool processes_known = true;          ///< false: NVML could not list its processes (unknown, not none)
  std::vector<std::string> foreign;     ///< processes outside gpulane's leases of this GPU: "bob's python (pid 12)"
  std::optional<std::string> exclusive_holder;  ///< "alice (job r4121)" when exclusively leased
  unsigned shared_leases = 0;                   ///< live memory-declared leases on it
  std::uint64_t unallocated_reservation_bytes = 0;  ///< sum over shared leases of max(0, declared - in use)
  std::vector<unsigned> nvlink_peers;   ///< indices of GPUs joined to this one by NVLink
};

/// The verdict for one request.
struct Decision {
  bool granted = false;
  std::vector<unsigned> gpus;          ///< granted: the GPUs; waiting: the GPUs reserved for it
  bool impossible = false;             ///< can never be met on these GPUs (too many, too much memory)
  unsigned possible = 0;               ///< GPUs that could ever qualify for it
  unsigned position = 0;               ///< 1-based place among the requests that wait
  std::vector<std::string> reasons;    ///< per GPU why it does not qualify now: "GPU1: leased by alice (job r4121)"
  std::vector<std::string> never;      ///< of those, the GPUs that can never qualify, with why
};

/// Safety margin kept free on every GPU shared by memory-declared leases.
struct Limits {
  std::uint64_t margin_bytes = 0;
};

/// Decides for every request in `line` (first in line first) against `gpus` (index i at
/// position i). Returns one Decision per request, in the same order.
std::vector<Decision> Schedule(std::vector<GpuState> gpus, const std::vector<Request>& line, const Limits& limits);

/// The answer to a request that must be met now or not at all (`gpulane pick`, `run --no-wait`):
/// the granted GPU indices, or the error both commands print. Errors: kInvalidArgument when it can
/// never be met on these `gpu_count` GPUs (too many, too much memory: a bad request), kNotEnoughGpus
/// when not now.
Result<std::vector<unsigned>> GrantedNow(const Request& request, const Decision& decision, unsigned gpu_count);

/// Why `request` can never be met here, for people: "asked for 3 GPUs but only 2 of the 2 GPUs
/// here can ever qualify (...): ask for fewer". `decision.impossible` must be true.
std::string ImpossibleReason(const Request& request, const Decision& decision, unsigned gpu_count);

/// Chooses `count` GPUs among `ranked` (best first), preferring a set whose every pair is joined by
/// NVLink (`linked(a, b)`); falls back to the top of the ranking.
std::vector<unsigned> ChooseLinkedSet(const std::vector<unsigned>& ranked, unsigned count,
                                      const std::function<bool(unsigned, unsigned)>& linked);

}  // namespace gpulane::sched
