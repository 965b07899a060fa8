#pragma once
// Where commands and queued jobs' supervisors get GPU snapshots: from a running gpulane daemon
// when one answers (it keeps NVML initialised, so a caller skips NVML's per-process start-up,
// about 25 ms on an H200: init, device attach, first queries), else from NVML directly (through
// the caller's os::Env: gpu/opener.h).
#include <memory>
#include <string>
#include <vector>

#include "gpu/backend.h"
#include "gpu/opener.h"
#include "util/clock.h"

namespace gpulane::proto {

/// A GpuBackend that asks the daemons on `sockets`, in order, for each snapshot (op "snapshot"),
/// and reads NVML itself when none answers or GPULANE_DIRECT_NVML=1. Never starts a daemon and
/// never waits for one. After a failed round it reads NVML for `retry_daemon_after_s` before it
/// asks the daemons again (a daemon that restarts is used again once it is back). Errors are
/// those of `direct`'s Open (kNoDriver, kNvml) and Read when it falls back.
class SnapshotSource : public GpuBackend {
 public:
  /// `clock` (os::Env's) times the pause after a round no daemon answered; `direct` (os::Env's
  /// GPUs: NVML) is opened at the first read no daemon answers. Both outlive the source.
  SnapshotSource(std::vector<std::string> sockets, const Clock& clock, GpuOpener& direct, double retry_daemon_after_s = 10);
  Result<GpuSnapshot> Read(const ReadOptions& options) override;
  using GpuBackend::Read;

 private:
  std::vector<std::string> sockets_;
  const Clock& clock_;
  GpuOpener& direct_;
  double retry_daemon_after_s_;
  double daemon_failed_at_s_ = -1;  ///< monotonic seconds of the last round no daemon answered
  std::unique_ptr<GpuBackend> nvml_;
};

}  // namespace gpulane::proto
