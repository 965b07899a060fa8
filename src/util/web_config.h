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

/// Loads [web] of file `path` into `config`. Errors: kInvalidArgument "<path>:<line>: <problem>".
Status LoadWebTable(const std::string& path, const toml::table& web, Config& config);

}  // namespace gpulane
