#pragma once
// The narrow interface through which everything but gpu/ sees GPUs; NvmlBackend is the real one,
// tests may substitute their own.
#include "gpu/types.h"
#include "util/result.h"

namespace gpulane {

/// Which fields a read needs. Each NVML query pays a one-time cost of milliseconds the first time
/// a process makes it (bench/nvml_first_call.py), so commands skip what they do not show or use.
struct ReadOptions {
  bool sensors = true;      ///< temperature, power draw and limit, performance state
  bool utilization = true;  ///< GPU and memory utilisation
  bool topology = true;     ///< NVLink peers
  /// Energy counter, clocks, clock event reasons, ECC and Xid errors, per-process SM utilisation
  /// (GpuDevice's telemetry fields, GpuProcess::sm_util_pct): for the daemon's sampler. Off by
  /// default: per-process utilisation alone costs about 1.4 ms a GPU on an H200
  /// (../shared/notes/nvml-facts.md).
  bool telemetry = false;
  /// Each GPU read in a thread of its own, so that the GPUs' first-query costs overlap (a fresh
  /// process). false: one GPU after another on the calling thread, for warm repeated reads (the
  /// sampler's) where creating a thread a GPU costs more CPU than the reads themselves
  /// (bench/results/sampler-floor-2026-12-06.md).
  bool parallel = true;
};

/// Reads the state of every GPU. Implementations must be cheap to call repeatedly (watch mode,
/// waiting jobs): one-time costs like library loading belong in their construction.
class GpuBackend {
 public:
  virtual ~GpuBackend() = default;
  /// Reads all GPUs now. A GPU that fails is returned with `error` set rather than failing the call;
  /// the call fails only when nothing can be read (errors: kNvml). Fields not asked for are absent.
  virtual Result<GpuSnapshot> Read(const ReadOptions& options) = 0;
  /// Reads every field.
  Result<GpuSnapshot> Read() { return Read(ReadOptions{}); }
};

}  // namespace gpulane
