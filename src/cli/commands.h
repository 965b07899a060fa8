#pragma once
// One registration function per subcommand; each adds its CLI11 subcommand and sets `*run` to the
// function that carries it out (returning the exit code) when the subcommand is chosen.
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace gpulane::cli {

using Runner = std::function<int()>;

/// The words after the first "--" on the command line (the command `run` and `submit` start).
std::vector<std::string>& TrailingCommand();
/// Whether the command line had a "--" at all.
bool& TrailingCommandGiven();

void RegisterStatus(CLI::App& app, Runner* run);
void RegisterPick(CLI::App& app, Runner* run);
void RegisterRun(CLI::App& app, Runner* run);
void RegisterDaemon(CLI::App& app, Runner* run);
void RegisterSubmit(CLI::App& app, Runner* run);
void RegisterQueue(CLI::App& app, Runner* run);
void RegisterJobCommands(CLI::App& app, Runner* run);
void RegisterSimulate(CLI::App& app, Runner* run);
void RegisterShare(CLI::App& app, Runner* run);
void RegisterReport(CLI::App& app, Runner* run);
void RegisterEvents(CLI::App& app, Runner* run);
void RegisterLease(CLI::App& app, Runner* run);
void RegisterTop(CLI::App& app, Runner* run);
void RegisterDoctor(CLI::App& app, Runner* run);
void RegisterComplete(CLI::App& app, Runner* run);
void RegisterSlurm(CLI::App& app, Runner* run);

}  // namespace gpulane::cli
