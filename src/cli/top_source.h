#pragma once
// Where `gpulane top` gets what it shows (render/top_view.h TopModel): the GPUs and their processes
// from a daemon's snapshot (else NVML itself), which job each process belongs to from the lease
// directory, each job's use of its GPUs and each GPU's recent history from the daemon's sampler
// (ops `telemetry` and `history`, fetched incrementally), the jobs from its `queue`
// (docs/protocol.md). Without a daemon, or with its telemetry off, the model says so in a note and
// has no history; without a daemon it has no queue.
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpu/backend.h"
#include "os/process_table.h"
#include "render/top_view.h"
#include "util/result.h"

namespace gpulane::cli {

/// Gathers models for `gpulane top`, keeping between refreshes what makes the next one cheap: the
/// GPU source, user names, and each GPU's history (only points newer than those held are asked for).
class TopSource {
 public:
  /// `backend`: the GPU source (cli::OpenBackend). `span_s`: seconds of history kept for sparklines.
  /// `clock`: main()'s (os::Env), for the lease directory.
  TopSource(std::unique_ptr<GpuBackend> backend, double span_s, const gpulane::Clock& clock);

  /// Reads everything now; `now_s` (seconds since the epoch) dates the model. Errors: those of the
  /// GPU source (kNoDriver, kNvml) when the GPUs cannot be read; a daemon that does not answer or
  /// refuses a request is no error (a note in the model says what is missing).
  Result<TopModel> Refresh(double now_s);

 private:
  /// The reply of the first daemon that answers `request`; nullopt when none listens. An error
  /// reply is returned as it came ("ok": false).
  std::optional<nlohmann::json> Ask(const nlohmann::json& request);
  void AddTelemetry(TopModel& model, const GpuSnapshot& snapshot);
  void AddQueue(TopModel& model);
  void UpdateHistory(const std::string& uuid, double now_s);

  std::unique_ptr<GpuBackend> backend_;
  double span_s_;
  const gpulane::Clock& clock_;
  ProcfsProcessTable processes_;
  std::vector<std::string> sockets_;
  std::map<std::string, std::vector<TopPoint>> history_;  ///< GPU UUID -> points, oldest first
  std::map<std::pair<std::string, std::string>, double> job_util_pct_;  ///< (job id, GPU UUID) -> use
  double sample_interval_s_ = 1;
};

}  // namespace gpulane::cli
