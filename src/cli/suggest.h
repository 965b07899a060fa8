#pragma once
// "did you mean ...?" for a mistyped subcommand or option: one line naming the word, the nearest
// known one (util/did_you_mean.h NearestWord, as for the config files' keys) and where the full
// list is; the other lines for a refused command line (ParseErrorMessage) and the usage lines'
// formatter. The words are the user's, as typed: PrintDiagnostic escapes them for the terminal.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

namespace gpulane::cli {

/// The subcommand of `app` named `word` (also one registered under an alias), or nullptr.
CLI::App* FindSubcommand(CLI::App& app, std::string_view word);

/// "unknown command 'qeue': did you mean queue? (gpulane --help lists the commands)"; the
/// suggestion only when one is near (hidden commands, those starting with '_', are never offered).
/// Else, for a word other tools use (history, ps, jobs, kill, nvidia-smi, sbatch), where gpulane
/// has it: "unknown command 'kill': 'gpulane cancel JOB' cancels a job, queued or running (...)".
std::string UnknownCommandMessage(CLI::App& app, std::string_view word);

/// "unknown option '--gpu' for gpulane pick: did you mean --gpus? (gpulane pick --help lists them)",
/// `word` as typed ("--gpu=2" names --gpu). Slurm's spellings of options gpulane spells
/// differently get gpulane's (-t and --time: --time-limit).
std::string UnknownOptionMessage(CLI::App& sub, std::string_view word);

/// For a command line CLI11 refused with words it did not expect: the message for the first
/// option (before any "--") that the (sub)command it belongs to does not know; "" when there is
/// none (then CLI11's own message says what is wrong). `args` without the program's name.
std::string UnknownOptionIn(CLI::App& app, const std::vector<std::string>& args);

/// The one line for a command line CLI11 refused (`args` without the program's name): an unknown
/// option as UnknownOptionIn says it; a value an option cannot take named as typed, with what it
/// takes ("-g two: give a whole number, e.g. -g 2 (gpulane run --help)"); a job command without
/// its id ("gpulane logs needs a job id, e.g. gpulane logs 12"); else CLI11's own message.
std::string ParseErrorMessage(CLI::App& app, const std::vector<std::string>& args, const CLI::ParseError& e);

/// The help formatter: CLI11's, with "[-- COMMAND [ARGS...]]" in the usage line of run and submit.
std::shared_ptr<CLI::FormatterBase> MakeUsageFormatter();

}  // namespace gpulane::cli
