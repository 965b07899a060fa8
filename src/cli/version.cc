#include "cli/version.h"

#include "build_info.h"

namespace gpulane::cli {

const char* VersionText() {
  return "gpulane " GPULANE_VERSION " (commit " GPULANE_COMMIT ", " GPULANE_BUILD_TYPE ")";
}

std::string VersionLine() { return VersionText(); }

}  // namespace gpulane::cli
