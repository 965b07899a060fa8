#pragma once
// The [daemon] table of the config files (docs/config.md): admin group, waiting supervisors,
// privacy, mode and retention (keep_finished). Machine's file only: a user's file that sets any
// key of it is an error.
#include <string>

#include <toml++/toml.h>

#include "util/config.h"
#include "util/result.h"

namespace gpulane {

/// Reads `daemon` (the [daemon] table of file `path`; `trusted`: the machine's file, or root's own)
/// into `config`. Errors: kInvalidArgument "PATH:LINE: ... (see docs/config.md)".
Status LoadDaemonTable(const std::string& path, bool trusted, const toml::table& daemon, Config& config);

}  // namespace gpulane
