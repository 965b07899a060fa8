#include "web/options.h"

#include <fmt/format.h>

#include "util/web_config.h"

namespace gpulane::web {
namespace {

Error Bad(std::string message) { return MakeError(ErrorKind::kInvalidArgument, std::move(message)); }

}  // namespace

Result<WebOptions> ParseWebArgs(const std::vector<std::string>& args) {
  WebOptions o;
  bool has_listen = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      o.help = true;
      continue;
    }
    if (a == "--show-commands") {
      o.show_commands = true;
      continue;
    }
    const bool takes_value = a == "--listen" || a == "--socket" || a == "--static" || a == "--allow-host" || a == "--peer" ||
                             a == "--ready-fd";
    if (!takes_value) return Bad(fmt::format("unknown argument '{}' (see gpulane-web --help)", a));
    if (i + 1 >= args.size()) return Bad(fmt::format("{} needs a value (see gpulane-web --help)", a));
    const std::string& v = args[++i];
    if (a == "--listen") {
      auto listen = ParseListen(v);
      if (!listen) return listen.error();
      o.listen = *listen;
      has_listen = true;
    } else if (a == "--ready-fd") {
      if (v.empty() || v.size() > 4 || v.find_first_not_of("0123456789") != std::string::npos || std::stoi(v) < 3)
        return Bad(fmt::format("--ready-fd '{}': give a descriptor number of 3 or more", v));
      o.ready_fd = std::stoi(v);
    } else if (a == "--socket") {
      o.socket_path = v;
    } else if (a == "--static") {
      o.static_dir = v;
    } else if (a == "--allow-host") {
      if (!IsAllowedHostName(v))
        return Bad(fmt::format("--allow-host '{}': give a host name as people type it, like gpu01.example.org", v));
      o.allowed_hosts.push_back(v);
    } else if (!IsPeerUrl(v)) {
      return Bad(fmt::format("--peer '{}': give another server's URL, like http://gpu02:9470/", v));
    } else {
      o.peers.push_back(v);
    }
  }
  if (o.help) return o;
  if (!has_listen) return Bad(fmt::format("--listen HOST:PORT is required, like --listen {}", kDefaultWebListen));
  if (o.socket_path.empty()) return Bad("--socket PATH is required: the gpulane daemon's socket, like /run/gpulane/gpulane.sock");
  return o;
}

std::string WebUsage() {
  return "usage: gpulane-web --listen HOST:PORT --socket PATH [--static DIR] [--show-commands]\n"
         "                   [--allow-host NAME]... [--peer URL]... [--ready-fd N]\n"
         "Serves /metrics (Prometheus) and the dashboard with its JSON API (/api/v1/...) from a gpulane\n"
         "daemon's socket, read-only (docs/web.md). The daemon starts it itself ([web] in docs/config.md).\n";
}

}  // namespace gpulane::web
