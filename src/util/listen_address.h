#pragma once
// An HTTP listen address, "HOST:PORT" ("[v6]:PORT" for IPv6): the [web] listen setting
// (docs/config.md) and gpulane-web's --listen.
#include <string>

#include "util/result.h"

namespace gpulane {

/// "127.0.0.1:9470", "[::1]:9470", "0.0.0.0:9470", "localhost:0".
struct ListenAddress {
  std::string host;  ///< without brackets ("::1")
  int port = 0;      ///< 0 to 65535; 0: any free port
};

/// The default [web] listen: loopback, port 9470 (not dcgm-exporter's 9400 nor node_exporter's 9100).
inline constexpr const char* kDefaultWebListen = "127.0.0.1:9470";

/// Parses "HOST:PORT" ("[v6]:PORT" for IPv6). Errors: kInvalidArgument, one line naming the
/// problem and the fix.
Result<ListenAddress> ParseListen(const std::string& text);

}  // namespace gpulane
