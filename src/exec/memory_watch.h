#pragma once
// Declared memory enforced by the job's own lifecycle (issue 26, part 2): a job that shares its
// GPUs by `--mem` reads its lease's GPUs once a sample with the daemon sampler's rule
// (lease::ViewLease: its processes, by process tree, on the GPUs it leased) and feeds
// telemetry::MemoryGuard. Its warning goes where the job's warnings go (the job's log for a
// queued job, stderr for `gpulane run`); its stop is the job runner's (SIGTERM, the kill grace,
// SIGKILL), and the reason becomes the job's (LeasedJobOutcome::memory_overuse). The lifecycle is
// the one place that runs for queued jobs and `gpulane run` alike, with a daemon or without one.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "gpu/backend.h"
#include "lease/job_observation.h"
#include "lease/lease_dir.h"
#include "os/process_table.h"
#include "telemetry/memory_guard.h"

namespace gpulane::exec {

/// Reads the GPUs once through `backend` (`options`) and calls `use` with the views of the live
/// lease named `lease_name` (lease::ViewLease over the lease directory, processes looked up in
/// `processes`, os::Env's). False when the GPUs could not be read or the lease is not (or no
/// longer) in the directory.
bool ViewOwnLease(GpuBackend& backend, ProcessTable& processes, const ReadOptions& options, const lease::LeaseDir& dir,
                  const std::string& lease_name, const std::function<void(const std::vector<lease::LeaseGpuView>&)>& use);

class MemoryWatch {
 public:
  /// `mem_bytes`: the job's declaration per GPU (--mem); nullopt: whole GPUs, never judged.
  MemoryWatch(std::string job_id, std::optional<std::uint64_t> mem_bytes, telemetry::MemoryGuardSettings settings,
              std::function<void(const std::string&)> warn)
      : mem_bytes_(mem_bytes), guard_(std::move(job_id), settings), warn_(std::move(warn)) {}

  /// Whether the job declared its memory (only then is it watched).
  bool active() const { return mem_bytes_.has_value(); }
  /// One sample of the job's GPUs at `now_s`: warns (through `warn`) as the guard says; true once,
  /// with reason(), when the job must be stopped now.
  bool Observe(double now_s, const std::vector<lease::LeaseGpuView>& views);
  const std::optional<std::string>& reason() const { return reason_; }

 private:
  std::optional<std::uint64_t> mem_bytes_;
  telemetry::MemoryGuard guard_;
  std::function<void(const std::string&)> warn_;
  std::optional<std::string> reason_;
};

}  // namespace gpulane::exec
