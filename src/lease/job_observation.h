#pragma once
// What one live lease's job is doing on each of its GPUs in one snapshot (issue 11, item 2): its
// processes' memory and utilisation, the GPU's energy counter, and the processes on it that are not
// the job's. The one rule, for the daemon's sampler (daemon/sampler.h) and for `gpulane run`
// metering itself when no daemon does (exec/leased_job.h).
#include <string>
#include <vector>

#include "gpu/types.h"
#include "lease/records.h"
#include "telemetry/job_usage.h"

namespace gpulane::lease {

/// One GPU of a lease as a snapshot shows it.
struct LeaseGpuView {
  std::string uuid;                        ///< the GPU's, or the MIG device's
  telemetry::JobGpuObservation observed;   ///< for the job's meter
  bool whole = true;                       ///< held whole (not a --mem share, not a MIG device)
  double share = 1;                        ///< the fraction of its GPU the lease holds
  std::vector<std::string> foreign;        ///< processes on it outside the job: "bob's python (pid 12)"
  const GpuDevice* device = nullptr;       ///< its GPU in the snapshot (nullptr: not there)
};

/// The device of `uuid` in `snapshot`: a GPU of that UUID, or the GPU a MIG device of that UUID is
/// on (then *mig points to that MIG device, else nullptr). nullptr when no device has it.
const GpuDevice* DeviceOf(const GpuSnapshot& snapshot, const std::string& uuid, const MigDevice** mig);

/// The GPUs of `leases[index]` in `snapshot` (processes annotated), with `owners` from
/// ProcessOwners of the same snapshot and leases. Utilisation: a whole GPU's own figure (it also
/// sees processes /proc does not show); on a share or a MIG device the sum of the job's processes'
/// SM shares when NVML reports each, else absent. Memory: the job's processes' sum, absent when one
/// is not reported. Energy: the GPU's counter (absent on a MIG device: it is the whole GPU's).
/// A process of a step nested in the job counts as the job's; one that just ended does not count.
std::vector<LeaseGpuView> ViewLease(const GpuSnapshot& snapshot, const std::vector<LeaseRecord>& leases, std::size_t index,
                                    const std::vector<std::vector<int>>& owners);

}  // namespace gpulane::lease
