#pragma once
// The environment a job starts with.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpu/types.h"

namespace gpulane::exec {

/// The value of `key` in an environment of "KEY=VALUE" strings, or nullopt when it is not set.
std::optional<std::string> EnvValue(const std::vector<std::string>& env, const std::string& key);

/// This process's environment ("KEY=VALUE" strings), for `gpulane run`.
std::vector<std::string> CurrentEnvironment();

/// `base` without the variables below, then these set by gpulane:
/// CUDA_VISIBLE_DEVICES (PCI-order indices, or UUIDs with `uuids`), CUDA_DEVICE_ORDER=PCI_BUS_ID,
/// GPULANE_JOB_ID, GPULANE_GPU_UUIDS, GPULANE_GPU_INDICES, GPULANE_MEM_BYTES (declared memory per GPU,
/// when shared) and GPULANE_LEASE_FD (the inherited lease descriptor; none when `lease_fd` < 0: a
/// CPU-only job, whose `gpus` are empty and CUDA_VISIBLE_DEVICES too). "KEY=VALUE" strings.
/// Also removes GPULANE_ARRAY_INDEX, which the daemon's supervisor sets for array tasks. With
/// `mig_uuid` (a MIG device leased on the GPU in `gpus`): CUDA_VISIBLE_DEVICES and GPULANE_GPU_UUIDS
/// are that MIG- UUID, the only way CUDA selects a MIG device (CUDA's MIG support in the CUDA C
/// Programming Guide / NVIDIA's MIG user guide: one MIG device per process, named by UUID).
std::vector<std::string> JobEnvironment(const std::vector<std::string>& base, const GpuSnapshot& snapshot, const std::vector<unsigned>& gpus, bool uuids,
                                        const std::string& job_id, std::optional<std::uint64_t> mem_bytes,
                                        int lease_fd, const std::optional<std::string>& mig_uuid = std::nullopt);

}  // namespace gpulane::exec
