#pragma once
// One request/reply exchange with a daemon on a Unix socket (docs/protocol.md), for any client:
// the CLI (cli/client.h adds finding and starting daemons) and queued jobs' supervisors.
#include <string>

#include <nlohmann/json.hpp>

#include "util/result.h"

namespace gpulane::proto {

/// Connects to the daemon's socket at `path`; -1 when nothing listens there (or the path is too
/// long for a socket address).
int ConnectTo(const std::string& path);

/// Sends `request` ("v" added) on the connected socket `fd`, reads the reply and closes `fd`. An
/// error reply becomes an Error of the kind its "code" names, unless `error_replies` (then it is
/// returned as it came: replies over several jobs say job by job what failed). `timeout_s` < 0
/// waits forever. Errors: kIo or kTimeout when the exchange itself fails.
Result<nlohmann::json> Exchange(int fd, nlohmann::json request, double timeout_s, bool error_replies = false);

/// The frame of `request` with "v" added: encoded before connecting, the request goes out right
/// after the connection is made (the daemon reads a new connection at once).
std::string EncodeRequest(nlohmann::json request);
/// Exchange for a request encoded by EncodeRequest.
Result<nlohmann::json> ExchangeEncoded(int fd, const std::string& frame, double timeout_s, bool error_replies = false);

/// Checks who listens on the connected socket `fd` (SO_PEERCRED) before anything is sent: a
/// gpulane daemon runs as root (the system daemon) or as the caller (a per-user one); any other
/// user's process on a socket the caller looks for is someone posing as a daemon (a squatted
/// /tmp/gpulane-<uid>). Errors: kUnsafe, one line naming that user and the fix.
Status CheckDaemonPeer(int fd, const std::string& socket_path);

/// ConnectTo + CheckDaemonPeer + Exchange. Errors: kUnavailable when nothing listens on
/// `socket_path`; kUnsafe when another user's process does.
Result<nlohmann::json> CallExisting(const std::string& socket_path, nlohmann::json request, double timeout_s);

}  // namespace gpulane::proto
