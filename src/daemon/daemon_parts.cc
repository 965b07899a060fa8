// The daemon's real parts (daemon_parts.h): built only by `gpulane daemon` (cli/cmd_daemon.cc).
#include "daemon/daemon_parts.h"

namespace gpulane::daemon {

DaemonParts RealDaemonParts(const os::Env& env) {
  DaemonParts parts;
  parts.env = &env;
  parts.open_store = [](const std::string& path, int busy_timeout_ms) { return store::JobStore::Open(path, busy_timeout_ms); };
  parts.open_history = [](const std::string& path) { return store::HistoryStore::Open(path); };
  parts.make_launcher = [&spawner = env.spawner](const LaunchPlace& place) -> std::unique_ptr<SupervisorLauncher> {
    return std::make_unique<ForkExecLauncher>(spawner, place.self_exe, place.jobs_dir, place.log_path);
  };
  return parts;
}

}  // namespace gpulane::daemon
