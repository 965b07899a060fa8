// gpulane-web: /metrics and the dashboard over HTTP, a client of the gpulane daemon's socket
// (docs/web.md). A separate executable so that the daemon (root) never parses HTTP and the
// statically linked gpulane binary never links cpp-httplib; the daemon starts it ([web] listen).
#include <unistd.h>

#include <string>
#include <vector>

#include <fmt/format.h>

#include "util/clock.h"
#include "util/exit_codes.h"
#include "web/http_server.h"
#include "web/options.h"
#include "web/static_dir.h"

int main(int argc, char** argv) {
  using namespace gpulane;
  auto options = web::ParseWebArgs(std::vector<std::string>(argv + 1, argv + argc));
  if (!options) {
    fmt::print(stderr, "gpulane-web: error: {}\n", options.error().message);
    return kExitUsage;
  }
  if (options->help) {
    fmt::print(stderr, "{}", web::WebUsage());
    return kExitOk;
  }
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  const std::string static_dir = web::FindStaticDir(options->static_dir, n > 0 ? std::string(exe, static_cast<std::size_t>(n)) : "");
  if (!options->static_dir.empty() && static_dir.empty()) {
    fmt::print(stderr, "gpulane-web: error: --static {}: no index.html there (give the folder the dashboard was built "
                       "into, like build/web)\n", options->static_dir);
    return kExitUsage;
  }
  const SystemClock clock;  // the one clock gpulane-web reads, passed down (util/clock.h)
  return web::Serve(*options, static_dir, clock);
}
