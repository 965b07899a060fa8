#include "daemon/paths.h"

#include <unistd.h>

#include <cstdlib>
#include <fmt/format.h>

namespace gpulane::daemon {
namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : "";
}

}  // namespace

DaemonPaths SystemPaths() {
  DaemonPaths p{"/run/gpulane/gpulane.sock", "/var/lib/gpulane", true};
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

}  // namespace gpulane::daemon
