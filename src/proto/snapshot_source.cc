#include "proto/snapshot_source.h"


#include <cstdlib>
#include <string>

#include "gpu/snapshot_json.h"
#include "proto/call.h"
#include "util/clock.h"

namespace gpulane::proto {
namespace {

bool DirectNvmlForced() {
  const char* direct = std::getenv("GPULANE_DIRECT_NVML");
  return direct && *direct && std::string(direct) != "0";
}

}  // namespace

SnapshotSource::SnapshotSource(std::vector<std::string> sockets, const Clock& clock, GpuOpener& direct,
                               double retry_daemon_after_s)
    : sockets_(std::move(sockets)), clock_(clock), direct_(direct), retry_daemon_after_s_(retry_daemon_after_s) {}

Result<GpuSnapshot> SnapshotSource::Read(const ReadOptions& options) {
  const bool ask = !DirectNvmlForced() &&
                   (daemon_failed_at_s_ < 0 || clock_.MonotonicS() - daemon_failed_at_s_ >= retry_daemon_after_s_);
  if (ask) {
    nlohmann::json request = {{"op", "snapshot"},
                              {"sensors", options.sensors},
                              {"utilization", options.utilization},
                              {"topology", options.topology}};
    for (const auto& socket : sockets_) {
      auto reply = CallExisting(socket, request, 5);
      if (!reply) continue;
      auto snapshot = SnapshotFromJson((*reply)["snapshot"]);
      if (snapshot) {
        daemon_failed_at_s_ = -1;
        if (reply->contains("warnings") && (*reply)["warnings"].is_array())
          for (const auto& line : (*reply)["warnings"])
            if (line.is_string()) snapshot->warnings.push_back(line.get<std::string>());
        return snapshot;
      }
    }
    daemon_failed_at_s_ = clock_.MonotonicS();  // no daemon, or one that cannot answer: NVML for a while
  }
  if (!nvml_) {
    auto backend = direct_.Open();
    if (!backend) return backend.error();
    nvml_ = std::move(backend).value();
  }
  return nvml_->Read(options);
}

}  // namespace gpulane::proto
