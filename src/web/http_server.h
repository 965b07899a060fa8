#pragma once
// gpulane-web's HTTP side (cpp-httplib): the routes of docs/web.md over a DaemonClient, the
// read-only and Host checks before any route, the dashboard's files. Only this file and main.cc
// see cpp-httplib.
#include <string>

#include "util/clock.h"
#include "web/options.h"

namespace gpulane::web {

/// Listens on `options.listen` and serves until SIGTERM, SIGINT or SIGHUP. `static_dir` holds the
/// dashboard ("" = not built). Prints "gpulane-web: listening on http://HOST:PORT/" on stderr once
/// it accepts connections. Returns the exit code (util/exit_codes.h): 0 after a signal, 1 when it
/// cannot listen (one line on stderr naming the address and the fix). Every time it reads (request
/// deadlines, answers' age, the history's window) is `clock`'s: main()'s SystemClock.
int Serve(const WebOptions& options, const std::string& static_dir, const Clock& clock);

}  // namespace gpulane::web
