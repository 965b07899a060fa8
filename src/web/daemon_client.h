#pragma once
// gpulane-web's questions to the daemon: one connection per question on its Unix socket (the
// protocol of docs/protocol.md, the same as the CLI's), answered only by a daemon running as root
// or as gpulane-web's own user (proto::CheckDaemonPeer). Identical questions within `cache_s` share
// one answer, so a wall of browser tabs costs the daemon one NVML read per interval.
#include <chrono>
#include <map>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "util/clock.h"
#include "util/result.h"

namespace gpulane::web {

class DaemonClient {
 public:
  /// Asks the daemon on `socket_path`; answers are reused for `cache_s` seconds (< 1 s; 0: never);
  /// a question gets `timeout_s` seconds for its answer. `clock` (main()'s) ages the answers.
  DaemonClient(std::string socket_path, const Clock& clock, double cache_s = 0.25, double timeout_s = 10);
  /// The daemon's reply to `request` (an op of docs/protocol.md). Errors: kUnavailable (no daemon
  /// answers), kUnsafe (the socket's listener is not root nor this user), the reply's own error.
  Result<nlohmann::json> Ask(const nlohmann::json& request);

 private:
  struct Cached {
    double at_s;  ///< when it came (the clock's MonotonicS)
    nlohmann::json reply;
  };
  std::string socket_path_;
  const Clock& clock_;
  double cache_s_, timeout_s_;
  std::mutex mu_;
  std::map<std::string, Cached> cache_;  ///< by request text
};

}  // namespace gpulane::web
