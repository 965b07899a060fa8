#pragma once
// Declared memory enforced (issue 26, part 2), pure: a job that shares a GPU by declaring its
// memory (`--mem`) and whose processes hold more than that plus lease.memory_margin on one of its
// GPUs is warned at the first sample that shows it, and stopped once it has stayed over for
// anomaly.overuse_grace (0: warned only). A GPU held whole (no declaration) is never judged, nor a
// sample whose figure is unknown (unknown is neither over nor under: the timer neither starts nor
// ends on it). A job back under its line is over no longer; crossing it again warns again and
// starts a new grace.
//
// The one rule for both sides that act on it: the job's own lifecycle (exec/memory_watch.h: the
// supervisor of a queued job, `gpulane run`), which stops its job, and the daemon's sampler
// (telemetry/anomaly.h, kind "overuse"), which records the warning as an event and notifies.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpulane::telemetry {

/// lease.memory_margin and anomaly.overuse_grace (docs/config.md).
struct MemoryGuardSettings {
  std::uint64_t margin_bytes = 1ULL << 30;
  double grace_s = 10;  ///< 0: warn only
};

/// One GPU of a job at a sample.
struct GuardedGpu {
  unsigned gpu_index = 0;
  std::optional<std::uint64_t> declared_bytes;  ///< the job's --mem there; nullopt: held whole
  std::optional<std::uint64_t> used_bytes;      ///< its processes' memory there; nullopt: unknown
};

/// Whether `g` is over its line: declared + margin < used, both known.
bool OverDeclared(const GuardedGpu& g, std::uint64_t margin_bytes);

/// The warning's line: "job 12 holds 45.0 GiB on GPU 0, over its declared 30.0 GiB (--mem) and the
/// 1.0 GiB margin: it is stopped in 10s unless it frees memory".
std::string OveruseWarning(const std::string& job_id, const GuardedGpu& g, const MemoryGuardSettings& s);

/// The stop's reason, in MiB (nvidia-smi's unit) with the settings that decided it: "memory over
/// declaration: held 46080 MiB on GPU 0, over its limit of 31744 MiB (--mem 30720 MiB +
/// lease.memory_margin 1024 MiB) for 10 s (anomaly.overuse_grace 10 s)"; `over_s`: how long it was over.
std::string OveruseStop(const GuardedGpu& g, const MemoryGuardSettings& s, double over_s);

enum class GuardAction { kNone, kWarn, kStop };

struct GuardDecision {
  GuardAction action = GuardAction::kNone;
  std::string message;  ///< kWarn: the warning; kStop: the one-line reason (OveruseStop)
};

/// One job's guard, fed each of its samples in time order.
class MemoryGuard {
 public:
  MemoryGuard(std::string job_id, MemoryGuardSettings settings) : job_id_(std::move(job_id)), s_(settings) {}
  /// The job's GPUs at `now_s` (any clock, seconds). kWarn once per crossing, kStop once.
  GuardDecision Observe(double now_s, const std::vector<GuardedGpu>& gpus);
  /// Since when it has been over (nullopt: it is not).
  std::optional<double> over_since_s() const { return over_since_s_; }

 private:
  std::string job_id_;
  MemoryGuardSettings s_;
  std::optional<double> over_since_s_;
  bool stopped_ = false;
};

}  // namespace gpulane::telemetry
