#pragma once
// Idle GPUs for the scheduler's unit tests (sched/): the one helper six test files each wrote.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sched/policy.h"

namespace gpulane::test {

inline constexpr std::uint64_t kGpuGiB = 1ULL << 30;

/// GPU i's UUID, in the form NVML gives ("GPU-00000000-92ce-068a-58c5-7c2f58de6be6" for 0).
inline std::string UuidOf(unsigned i) { return "GPU-" + std::to_string(i) + "0000000-92ce-068a-58c5-7c2f58de6be6"; }

/// `n` idle GPUs (indices 0..n-1): `total_bytes` each, all free, 0% utilisation, free since
/// `free_since_s` on the test's clock (unknown unless given).
inline std::vector<sched::GpuState> IdleGpus(unsigned n, std::uint64_t total_bytes = 80 * kGpuGiB,
                                             std::optional<double> free_since_s = std::nullopt) {
  std::vector<sched::GpuState> gpus(n);
  for (unsigned i = 0; i < n; ++i) {
    gpus[i].index = i;
    gpus[i].uuid = UuidOf(i);
    gpus[i].total_bytes = total_bytes;
    gpus[i].free_bytes = total_bytes;
    gpus[i].util_pct = 0;
    gpus[i].free_since_s = free_since_s;
  }
  return gpus;
}

}  // namespace gpulane::test
