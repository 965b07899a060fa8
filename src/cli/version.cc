#include "cli/version.h"

#include <fmt/format.h>

#include "build_info.h"

namespace gpulane::cli {

std::string VersionLine() {
  return fmt::format("gpulane {} (commit {}, {})", GPULANE_VERSION, GPULANE_COMMIT, GPULANE_BUILD_TYPE);
}

}  // namespace gpulane::cli
