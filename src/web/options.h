#pragma once
// gpulane-web's command line (docs/web.md): where it listens, which daemon it asks, where the
// dashboard's files are, and what the daemon's [web] settings say (passed by the daemon).
#include <string>
#include <vector>

#include "util/listen_address.h"
#include "util/result.h"

namespace gpulane::web {

/// What gpulane-web was asked to do.
struct WebOptions {
  ListenAddress listen;
  std::string socket_path;                 ///< the daemon's Unix socket
  std::string static_dir;                  ///< the dashboard's files; "" = found next to the binary
  bool show_commands = false;              ///< --show-commands: process and job command lines are shown
  std::vector<std::string> allowed_hosts;  ///< --allow-host NAME: more Host header names to accept
  std::vector<std::string> peers;          ///< --peer URL: other gpulane servers the dashboard shows beside
  bool help = false;                       ///< --help: print the usage and exit 0
  /// --ready-fd N: once listening, write "http://HOST:PORT/\n" there and close it (the daemon reads
  /// its URL so: with port 0 only gpulane-web knows the port); -1: none.
  int ready_fd = -1;
};

/// Parses gpulane-web's arguments (argv[0] excluded). Errors: kInvalidArgument, one line.
Result<WebOptions> ParseWebArgs(const std::vector<std::string>& args);

/// The usage text (--help).
std::string WebUsage();

}  // namespace gpulane::web
