#pragma once
// What `gpulane --version` prints: the version, the commit built and the build type.
#include <string>

namespace gpulane::cli {

/// "gpulane 0.1.0 (commit 5257963abcd0, RelWithDebInfo)": the project's version, the git commit
/// the binary was built from ("+changes" when the tree had uncommitted changes, "unknown" outside
/// a git checkout) and CMake's build type, fixed at build time (cmake/build_info.cmake).
std::string VersionLine();
/// The same line as a string literal: what `gpulane --version` prints before anything else starts.
const char* VersionText();

}  // namespace gpulane::cli
