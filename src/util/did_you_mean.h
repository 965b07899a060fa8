#pragma once
// "Did you mean ...?" for a mistyped word: the known word it most likely is (NearestWord), and the
// one line for an unknown config key or section (UnknownKeyMessage, UnknownSectionMessage). The
// CLI's unknown commands and options (cli/suggest) and every table of the config files
// (util/config*.cc, util/web_config.cc) use the same search.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace gpulane {

/// Optimal string alignment distance: insertions, deletions, substitutions and two neighbours
/// swapped, each one edit.
std::size_t EditDistance(std::string_view a, std::string_view b);

/// The candidate `word` most likely is a typo of: the nearest by edit distance when close enough to
/// be a slip (1 edit for words up to 4 characters, 2 up to 8, else 3), else the one candidate
/// `word` begins ("--time" -> "--time-limit"); "" when none is, or `word` is shorter than 3
/// characters. Ties: the earlier.
std::string NearestWord(std::string_view word, const std::vector<std::string>& candidates);

/// The error line for `key` of [`section`] that no reader knows: "unknown key daemon.max_waitng:
/// did you mean daemon.max_waiting?" when one of `known_keys` is near (NearestWord), else "unknown
/// key daemon.colour (known: admin_group, max_waiting, ...)". A known key written "users.NAME" (a
/// table of names) is matched and suggested as "users". `section` "": a key outside any section,
/// `known_keys` then the sections ("unknown key deamon: did you mean [daemon]?").
std::string UnknownKeyMessage(std::string_view section, std::string_view key, const std::vector<std::string>& known_keys);

/// The same for a table [`name`] that is no section: "unknown section [deamon]: did you mean
/// [daemon]?", else "unknown section [colour] (the sections are [lease], [run], ...)".
std::string UnknownSectionMessage(std::string_view name, const std::vector<std::string>& sections);

}  // namespace gpulane
