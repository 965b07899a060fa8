#pragma once
// The Host header check against DNS rebinding (docs/web.md, "Security"): a page on another site
// whose name an attacker points at 127.0.0.1 reaches this server with the attacker's name in Host,
// so only the names this server is known by are answered.
#include <string>
#include <vector>

namespace gpulane::web {

/// The host names (lower case, without port; IPv6 in brackets) a request's Host may name: the
/// listen host (unless a wildcard: 0.0.0.0, ::), localhost, 127.0.0.1, [::1], and `extra`
/// (web.allowed_hosts).
std::vector<std::string> AllowedHosts(const std::string& listen_host, const std::vector<std::string>& extra);

/// The host name of a Host header value, lower case, without its port ("[::1]:9470" -> "[::1]",
/// "GPU01:9470" -> "gpu01"); "" when the value is malformed.
std::string HostName(const std::string& host_header);

/// Whether `host_header` names one of `allowed` (AllowedHosts). An empty or malformed one does not.
bool HostAllowed(const std::string& host_header, const std::vector<std::string>& allowed);

}  // namespace gpulane::web
