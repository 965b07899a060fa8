#pragma once
// "did you mean ...?" for a mistyped subcommand or option: one line naming the word, the nearest
// known one (NearestWord) and where the full list is. The words are the user's, as
// typed: PrintDiagnostic escapes them for the terminal.
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

namespace gpulane::cli {

/// The candidate `word` most likely is a typo of: the nearest by edit distance (insertions,
/// deletions, substitutions, two neighbours swapped) when close enough to be a slip (1 edit for
/// words up to 4 characters, 2 up to 8, else 3), else the one candidate `word` begins ("--time" ->
/// "--time-limit"); "" when none is, or `word` is shorter than 3 characters. Ties: the earlier.
std::string NearestWord(std::string_view word, const std::vector<std::string>& candidates);

/// The subcommand of `app` named `word` (also one registered under an alias), or nullptr.
CLI::App* FindSubcommand(CLI::App& app, std::string_view word);

/// "unknown command 'qeue': did you mean queue? (gpulane --help lists the commands)"; the
/// suggestion only when one is near (hidden commands, those starting with '_', are never offered).
std::string UnknownCommandMessage(CLI::App& app, std::string_view word);

/// "unknown option '--gpu' for gpulane pick: did you mean --gpus? (gpulane pick --help lists them)",
/// `word` as typed ("--gpu=2" names --gpu). Slurm's spellings of options gpulane spells
/// differently get gpulane's (-t and --time: --time-limit).
std::string UnknownOptionMessage(CLI::App& sub, std::string_view word);

/// For a command line CLI11 refused with words it did not expect: the message for the first
/// option (before any "--") that the (sub)command it belongs to does not know; "" when there is
/// none (then CLI11's own message says what is wrong). `args` without the program's name.
std::string UnknownOptionIn(CLI::App& app, const std::vector<std::string>& args);

}  // namespace gpulane::cli
