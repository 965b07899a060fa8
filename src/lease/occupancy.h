#pragma once
// Joins what NVML shows with the live leases into the policy's view of each GPU (sched::GpuState):
// which processes belong to gpulane jobs and which are outsiders, how much declared memory is not
// yet allocated, who holds a GPU exclusively.
#include <vector>

#include "gpu/types.h"
#include "lease/records.h"
#include "os/process_table.h"
#include "sched/policy.h"

namespace gpulane::lease {

/// Builds one GpuState per device of `snapshot` (same order). A process NVML lists whose pid no
/// longer exists is ignored and its memory counted as free (NVML may lag a process's exit). A
/// process belongs to a lease when the lease's supervisor pid is among its ancestors or it is in
/// the job's process group; any other process is foreign. A shared lease reserves
/// max(0, declared - used by its processes) on top of what NVML shows as used.
std::vector<sched::GpuState> BuildGpuStates(const GpuSnapshot& snapshot, const std::vector<LeaseRecord>& leases,
                                            ProcessTable& processes);

/// Converts a ticket to a policy request, mapping allowed UUIDs to indices of `snapshot`.
sched::Request ToRequest(const TicketRecord& ticket, const GpuSnapshot& snapshot);

}  // namespace gpulane::lease
