#pragma once
// What every reader of a config file's tables shares (util/config.cc, config_daemon.cc,
// config_sched.cc, web_config.cc): one error line and one reading of a whole number, so that every
// key's error reads the same and no table converts a number by toml++'s undefined path.
#include <cstdint>
#include <optional>
#include <string>

#include <toml++/toml.h>

#include "util/config.h"
#include "util/result.h"

namespace gpulane {

/// kInvalidArgument "PATH:LINE: WHAT (see docs/config.md)", on one line (newlines in `what` become
/// spaces).
Error ConfigBad(const std::string& path, const toml::source_region& where, std::string what);

/// A TOML integer, or a float with a whole value that fits in 64 bits (5.0 -> 5); nullopt for
/// anything else. Never toml++'s node::value<std::int64_t>() for this: it converts a float out of
/// int64's range with undefined behaviour (UBSan; found by fuzz_config: max_waiting = 9.2e19).
std::optional<std::int64_t> ConfigInteger(const toml::node& node);

/// The [sched] table (policy, reservations, preemption bounds, fair share; machine's file only)
/// and the [shares] table (a file that has it replaces the earlier files' shares) into `config`.
Status LoadSchedTable(const std::string& path, bool trusted, const toml::table& sched, Config& config);
Status LoadSharesTable(const std::string& path, bool trusted, const toml::table& shares, Config& config);

}  // namespace gpulane
