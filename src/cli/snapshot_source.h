#pragma once
// Where commands get GPU snapshots: from a running gpulane daemon when there is one (it keeps NVML
// initialised, so a command skips NVML's per-process start-up, about 25 ms on an H200: init,
// device attach, first queries), else from NVML directly.
#include <memory>

#include "gpu/backend.h"

namespace gpulane::cli {

/// A GpuBackend that asks the daemon on $GPULANE_SOCKET, else the system daemon, else the user's own
/// per-user daemon, for each
/// snapshot, and reads NVML itself when no daemon answers at once (or GPULANE_DIRECT_NVML=1). Never
/// starts a daemon and never waits for one, not even for an installed system daemon that restarts. Errors are those of NvmlBackend::Open (kNoDriver, kNvml) when it falls back.
class SnapshotSource : public GpuBackend {
 public:
  Result<GpuSnapshot> Read(const ReadOptions& options) override;
  using GpuBackend::Read;

 private:
  bool daemon_failed_ = false;
  std::unique_ptr<GpuBackend> nvml_;
};

}  // namespace gpulane::cli
