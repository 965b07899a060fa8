#pragma once
// A cancel, hold or release of many jobs is done in parts, one transaction each (issue 23, item 8):
// the daemon keeps the parts' queue (daemon/jobs_in_parts.h) and the job table changes each part
// (JobTable::CancelPart, HoldPart). This is what both sides name: the operation, its words, and
// what one part did.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "util/result.h"

namespace gpulane::daemon {

/// What a change of many jobs in parts does to them.
enum class PartsOp { kCancel, kHold, kRelease };

/// "cancel", "hold", "release".
inline const char* VerbOf(PartsOp op) {
  return op == PartsOp::kCancel ? "cancel" : op == PartsOp::kHold ? "hold" : "release";
}
/// "cancelled", "held", "released".
inline const char* PastOf(PartsOp op) {
  return op == PartsOp::kCancel ? "cancelled" : op == PartsOp::kHold ? "held" : "released";
}

/// What one part of a cancel, hold or release did.
struct PartResult {
  struct Changed {
    std::int64_t id = 0;
    std::string text;          ///< as people write it: "12", "12_3"
    /// Its supervisor was signalled (a cancelled job that runs or waits for GPUs, one leaving the
    /// line to be held): the change completes once the supervisor has acted.
    bool in_progress = false;
    /// A cancelled job that had not started: its supervisor waited for GPUs (launching), and
    /// leaves the line; no process of the job ran, none was signalled.
    bool before_start = false;
  };
  /// The jobs changed: those whose supervisors were signalled first, then those stored, each in
  /// the part's order. Jobs that ended or changed state meanwhile are left out.
  std::vector<Changed> changed;
  /// The store refused the part's write: none of its jobs changed and no supervisor was
  /// signalled; `refused_jobs` of them would have changed.
  std::optional<Error> refused;
  std::size_t refused_jobs = 0;
};

}  // namespace gpulane::daemon
