#pragma once
// Notes from gpulane in a queued job's own log, where its owner looks ("gpulane logs N").
#include <cstdint>
#include <optional>
#include <string>

#include "util/result.h"

namespace gpulane::exec {

/// Appends "gpulane: warning: <line>\n" to the job's log `path` with the rights of `uid`/`gid`
/// (when given and this process is root: os::AppendAsUser, the job's user's rights), never creating it,
/// never through a final symlink, never blocking and only into a regular file that `uid` owns.
/// Errors: kIo naming the file and why.
Status AppendWarningToLog(const std::string& path, std::optional<std::uint32_t> uid, std::optional<std::uint32_t> gid,
                          const std::string& line);
/// Appends `line` and a newline to the job's log `path`, as AppendWarningToLog does (same rights,
/// same checks), without the "gpulane: warning: " prefix. Errors: kIo naming the file and why.
Status AppendLineToLog(const std::string& path, std::optional<std::uint32_t> uid, std::optional<std::uint32_t> gid,
                       const std::string& line);

}  // namespace gpulane::exec
