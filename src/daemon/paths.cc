#include "daemon/paths.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fmt/format.h>

namespace gpulane::daemon {
namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : "";
}

bool Exists(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0;
}

}  // namespace

DaemonPaths SystemPaths() {
  DaemonPaths p{kSystemSocket, kSystemStateDir, true};
  if (!Env("GPULANE_SOCKET").empty()) p.socket = Env("GPULANE_SOCKET");
  if (!Env("GPULANE_STATE_DIR").empty()) p.state_dir = Env("GPULANE_STATE_DIR");
  return p;
}

DaemonPaths UserPaths() {
  DaemonPaths p;
  std::string runtime = Env("XDG_RUNTIME_DIR");
  p.socket = runtime.empty() ? fmt::format("/tmp/gpulane-{}/gpulane.sock", getuid()) : runtime + "/gpulane/gpulane.sock";
  std::string state = Env("XDG_STATE_HOME");
  if (state.empty()) state = Env("HOME").empty() ? fmt::format("/tmp/gpulane-{}/state", getuid()) : Env("HOME") + "/.local/state";
  p.state_dir = state + "/gpulane";
  if (!Env("GPULANE_SOCKET").empty()) p.socket = Env("GPULANE_SOCKET");
  if (!Env("GPULANE_STATE_DIR").empty()) p.state_dir = Env("GPULANE_STATE_DIR");
  return p;
}

Result<bool> SystemDaemonInstalled(const std::string& config_mode, const std::string& root) {
  const std::string forced = Env("GPULANE_SYSTEM_DAEMON");
  if (forced == "1") return true;
  if (forced == "0") return false;
  if (!forced.empty())
    return MakeError(ErrorKind::kInvalidArgument,
                     fmt::format("GPULANE_SYSTEM_DAEMON='{}': use 1 (a system daemon serves this machine) or 0 (per-user daemons)", forced));
  if (config_mode == "system") return true;
  if (config_mode == "user") return false;
  return Exists(root + kSystemStateDir) || Exists(root + kEnabledUnitLink);
}

std::vector<std::string> SnapshotSockets() {
  std::vector<std::string> sockets = {SystemPaths().socket};
  if (Env("GPULANE_SOCKET").empty()) sockets.push_back(UserPaths().socket);
  return sockets;
}

}  // namespace gpulane::daemon
