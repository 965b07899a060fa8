#include "web/daemon_client.h"

#include "proto/call.h"

namespace gpulane::web {

DaemonClient::DaemonClient(std::string socket_path, const Clock& clock, double cache_s, double timeout_s)
    : socket_path_(std::move(socket_path)), clock_(clock), cache_s_(cache_s), timeout_s_(timeout_s) {}

Result<nlohmann::json> DaemonClient::Ask(const nlohmann::json& request) {
  const std::string key = request.dump();
  const double now_s = clock_.MonotonicS();
  {
    std::lock_guard lock(mu_);
    if (auto it = cache_.find(key); it != cache_.end() && now_s - it->second.at_s < cache_s_) return it->second.reply;
  }
  auto reply = proto::CallExisting(socket_path_, request, timeout_s_);
  if (!reply) return reply.error();
  if (cache_s_ > 0) {
    std::lock_guard lock(mu_);
    if (cache_.size() > 256) cache_.clear();  // queries with ever new parameters
    cache_[key] = {now_s, *reply};
  }
  return reply;
}

}  // namespace gpulane::web
