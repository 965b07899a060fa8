#pragma once
// The CLI's side of the daemon protocol: find the daemon (system socket, else the user's own,
// starting a per-user daemon when none answers), send one request, read the reply.
#include <nlohmann/json.hpp>

#include "util/result.h"

namespace gpulane::cli {

/// Sends `request` (op and fields; "v" is added) and returns the daemon's successful reply.
/// An error reply becomes an Error of the kind its "code" names. `timeout_s` < 0 waits forever
/// (for `wait`). Errors: kUnavailable when no daemon can be reached or started.
Result<nlohmann::json> Call(nlohmann::json request, double timeout_s = 30);

/// Like Call, but only to a daemon already listening on `socket_path`; never starts one.
/// Errors: kUnavailable when nothing answers there.
Result<nlohmann::json> CallExisting(const std::string& socket_path, nlohmann::json request, double timeout_s);

}  // namespace gpulane::cli
