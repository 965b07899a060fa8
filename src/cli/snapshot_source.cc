#include "cli/snapshot_source.h"

#include <cstdlib>
#include <string>
#include <vector>

#include "cli/client.h"
#include "daemon/paths.h"
#include "gpu/nvml_backend.h"
#include "gpu/snapshot_json.h"

namespace gpulane::cli {

Result<GpuSnapshot> SnapshotSource::Read(const ReadOptions& options) {
  const char* direct = std::getenv("GPULANE_DIRECT_NVML");
  if (!daemon_failed_ && !(direct && *direct && std::string(direct) != "0")) {
    nlohmann::json request = {{"op", "snapshot"},
                              {"sensors", options.sensors},
                              {"utilization", options.utilization},
                              {"topology", options.topology}};
    // $GPULANE_SOCKET names the one to ask; otherwise the system daemon, then the user's own.
    std::vector<std::string> sockets = {daemon::SystemPaths().socket};
    if (!std::getenv("GPULANE_SOCKET")) sockets.push_back(daemon::UserPaths().socket);
    for (const auto& socket : sockets) {
      auto reply = CallExisting(socket, request, 5);
      if (!reply) continue;
      auto snapshot = SnapshotFromJson((*reply)["snapshot"]);
      if (snapshot) return snapshot;
    }
    daemon_failed_ = true;  // no daemon, or one that cannot answer: NVML from now on
  }
  if (!nvml_) {
    auto backend = NvmlBackend::Open();
    if (!backend) return backend.error();
    nvml_ = std::move(backend).value();
  }
  return nvml_->Read(options);
}

}  // namespace gpulane::cli
