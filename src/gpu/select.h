#pragma once
// Choosing GPUs for a job: which GPUs qualify for a request, and in what order to take them.
// Pure functions of a snapshot: no NVML, no clock.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpu/types.h"
#include "gpu/visible_devices.h"

namespace gpulane {

/// How to rank qualifying GPUs.
enum class PickOrder {
  kMostFree,   ///< most free memory first; ties: lower utilisation, then PCI order (default)
  kLeastUtil,  ///< lowest GPU utilisation first; ties: most free memory, then PCI order
  kPci,        ///< PCI bus order
};

/// What a job asks of its GPUs.
struct GpuRequest {
  unsigned count = 1;
  std::optional<std::uint64_t> min_free_bytes;  ///< at least this much free memory on each GPU
  std::optional<unsigned> max_util_pct;         ///< GPU utilisation at most this
  bool share_foreign = false;  ///< a GPU running other users' compute processes may still qualify
  PickOrder order = PickOrder::kMostFree;
};

/// One GPU's verdict: qualifies, or why not ("3.1 GiB free < 20 GiB").
struct GpuVerdict {
  unsigned pci_index = 0;
  bool qualifies = false;
  std::string reason;  ///< empty when it qualifies
};

/// Judges every GPU of `snapshot` against `request`. A GPU does not qualify when it is outside
/// `allowed`, failed, MIG-enabled (MIG devices are not handed out yet), in PROHIBITED compute mode,
/// in EXCLUSIVE_PROCESS mode with a process on it, short of memory or over the utilisation limit
/// (an unreported value fails a limit that needs it), or runs compute processes of anyone but
/// `self_uid` (processes /proc cannot see count as someone else's) unless share_foreign is set.
std::vector<GpuVerdict> JudgeGpus(const GpuSnapshot& snapshot, const VisibleDevices& allowed,
                                  const GpuRequest& request, std::uint32_t self_uid);

/// The qualifying GPUs of `verdicts`, best first by `order` (pci indices).
std::vector<unsigned> RankQualifying(const GpuSnapshot& snapshot, const std::vector<GpuVerdict>& verdicts,
                                     PickOrder order);

/// The `count` GPUs to use among `ranked` (best first). For several GPUs, prefers a set joined by
/// NVLink (every pair linked) when the snapshot reports such links, else the top of the ranking.
/// Returns fewer than `count` only if `ranked` is shorter.
std::vector<unsigned> ChooseSet(const GpuSnapshot& snapshot, const std::vector<unsigned>& ranked, unsigned count);

/// Formats chosen GPUs for CUDA_VISIBLE_DEVICES: PCI-order indices ascending ("0,3"), or UUIDs.
std::string FormatVisibleDevices(const GpuSnapshot& snapshot, std::vector<unsigned> chosen, bool uuids);

}  // namespace gpulane
