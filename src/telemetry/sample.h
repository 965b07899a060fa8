#pragma once
// What the daemon's sampler keeps of each GPU at each sample (issue 11): the readings that history,
// accounting, anomalies and metrics are made of. Pure data, like everything in telemetry/: no I/O,
// no clock (times are passed in, seconds since the epoch in the daemon, anything in tests), no
// NVML (the daemon turns a GpuDevice into a GpuReading, daemon/sampler.cc). A field the GPU does not
// report is absent, never 0.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpulane::telemetry {

/// One GPU's readings at one moment. Compact on purpose: the in-memory ring keeps an hour of them
/// per GPU at the full rate.
struct GpuReading {
  std::optional<std::uint16_t> util_gpu_pct;     ///< nvmlDeviceGetUtilizationRates .gpu
  std::optional<std::uint16_t> util_memory_pct;  ///< .memory: time device memory was read or written
  std::optional<std::uint16_t> temperature_c;
  std::optional<std::uint16_t> clock_sm_mhz;
  std::optional<std::uint16_t> clock_mem_mhz;
  std::optional<std::uint32_t> power_mw;
  std::optional<std::uint64_t> memory_used_bytes;
  std::optional<std::uint64_t> memory_total_bytes;
  std::optional<std::uint64_t> energy_mj;             ///< counter since the driver loaded
  std::optional<std::uint64_t> clocks_event_reasons;  ///< nvmlClocksEventReason* bits
  std::uint16_t xid_errors = 0;  ///< Xid errors raised since the previous sample
  bool failed = false;           ///< NVML reported the GPU failed (lost, needs a reset, ...)
};

/// A GPU's reading and when it was taken.
struct GpuPoint {
  double time_s = 0;
  GpuReading reading;
};

/// Clock event reason bits that mean the GPU is slowed to protect itself (nvml_api.h): hardware
/// slowdown, thermal slowdown (software or hardware), power brake. Not the power cap (a GPU at its
/// power limit under full load is normal) nor idle or application clocks.
inline constexpr std::uint64_t kThrottleReasonBits = 0x08 | 0x20 | 0x40 | 0x80;

/// "hw slowdown, sw thermal" for the set bits of kThrottleReasonBits in `bits`; "" when none.
std::string ThrottleReasonNames(std::uint64_t bits);

}  // namespace gpulane::telemetry
