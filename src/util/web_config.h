#pragma once
// The [web] table of the config files (docs/config.md "Web"): where the daemon's gpulane-web
// listens, and what it shows. Read by daemons only, each from its own user's files.
#include <string>

#include <toml++/toml.h>

#include "util/config.h"
#include "util/result.h"

namespace gpulane {

/// Whether `name` may be a web.allowed_hosts entry: a host name or address as people type it in a
/// browser (no port, scheme, path or spaces).
bool IsAllowedHostName(const std::string& name);

/// Whether `url` may be a web.peers entry: http:// or https://, at most 512 bytes, nothing that
/// could leave an HTML attribute or a Content-Security-Policy (spaces, quotes, angle brackets).
bool IsPeerUrl(const std::string& url);

/// The machine's own file: its web.listen is the system daemon's (util/config.cc reads it first).
inline constexpr const char* kMachineConfigFile = "/etc/gpulane/config.toml";

/// Where a daemon's gpulane-web listens ("HOST:PORT" or "off"), with `config` (every file read) and
/// `machine_listen` (web.listen of the machine's file alone, or the default). The system daemon:
/// web.listen. A per-user daemon never takes the machine's port (9470 by default, or what the
/// machine's file sets: every user's daemon would want it): web.listen when the user's own file
/// sets another, "off" when that is "off", else "127.0.0.1:0" (a free port the kernel picks;
/// `gpulane daemon status` prints the URL).
std::string WebListenFor(const Config& config, const std::string& machine_listen, bool system_daemon);

/// Loads [web] of file `path` into `config`. Errors: kInvalidArgument "<path>:<line>: <problem>".
Status LoadWebTable(const std::string& path, const toml::table& web, Config& config);

}  // namespace gpulane
