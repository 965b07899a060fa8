#pragma once
// What a request's handler (daemon/ops/*.cc) sees of the daemon: the job table and its store, the
// machine's config and clock, the peer asking, and how jobs are shown to that peer (JobViews, which
// the Daemon implements). Handlers are free functions of this context and a typed request
// (proto/requests.h); they return typed replies or errors and never touch connections: the one
// dispatch (daemon/handlers.cc, std::visit) answers, queues a submission or parks a wait.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "daemon/job_table.h"
#include "daemon/peer.h"
#include "os/process_table.h"
#include "proto/wire.h"
#include "store/job.h"
#include "store/job_store.h"
#include "store/job_view.h"
#include "util/clock.h"
#include "util/config.h"

namespace gpulane::daemon::ops {

/// How the daemon shows jobs to a peer, and its log.
class JobViews {
 public:
  virtual ~JobViews() = default;
  /// What `peer` sees of `job` (store/job_view.h): everything when it may act on it.
  virtual store::JobVisibility VisibilityFor(const Peer& peer, const store::Job& job) const = 0;
  /// PCI-order index of GPU `uuid` as the daemon read it at start; none when unknown.
  virtual std::optional<unsigned> GpuIndex(const std::string& uuid) const = 0;
  /// `reply` with "warnings" about the job store, when there are any.
  virtual nlohmann::json WithStoreWarnings(nlohmann::json reply) const = 0;
  virtual void Log(const std::string& line) const = 0;

  /// The indices of `job`'s GPUs.
  std::vector<unsigned> GpuIndices(const store::Job& job) const {
    std::vector<unsigned> indices;
    for (const auto& uuid : job.gpu_uuids)
      if (auto index = GpuIndex(uuid)) indices.push_back(*index);
    return indices;
  }
  /// `job` as JSON with its GPUs' indices.
  nlohmann::json JobForClient(const store::Job& job, bool with_env) const {
    nlohmann::json j = store::JobToJson(job, with_env);
    j["gpu_indices"] = GpuIndices(job);
    return j;
  }
};

struct Context {
  const Peer& peer;
  store::JobStore& store;
  JobTable& jobs;
  const Config& config;
  const Clock& clock;
  ProcessTable& processes;  ///< os::Env's: who runs a GPU process
  const JobViews& views;
};

/// Whether `peer` may act on `job`: its owner, root or an admin.
inline bool CanAct(const Peer& peer, const store::Job& job) { return peer.admin || peer.uid == job.uid(); }

/// {"v": 2, "ok": true, ...body}.
inline nlohmann::json Ok(nlohmann::json body = nlohmann::json::object()) {
  body["v"] = proto::kVersion;
  body["ok"] = true;
  return body;
}

}  // namespace gpulane::daemon::ops
