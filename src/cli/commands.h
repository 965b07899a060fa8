#pragma once
// One registration function per subcommand; each adds its CLI11 subcommand and sets `*run` to the
// function that carries it out (returning the exit code) when the subcommand is chosen. `env` is
// the operating system (os/env.h) main() built, for the commands that read the time or /proc; it
// outlives the runner.
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "os/env.h"

namespace gpulane::cli {

using Runner = std::function<int()>;

/// The words after the first "--" on the command line (the command `run` and `submit` start).
std::vector<std::string>& TrailingCommand();
/// Whether the command line had a "--" at all.
bool& TrailingCommandGiven();

void RegisterStatus(CLI::App& app, Runner* run, const os::Env& env);
void RegisterPick(CLI::App& app, Runner* run, const os::Env& env);
void RegisterRun(CLI::App& app, Runner* run, const os::Env& env);
void RegisterDaemon(CLI::App& app, Runner* run, const os::Env& env);
void RegisterSubmit(CLI::App& app, Runner* run, const os::Env& env);
void RegisterQueue(CLI::App& app, Runner* run, const os::Env& env);
void RegisterJobCommands(CLI::App& app, Runner* run, const os::Env& env);
void RegisterSimulate(CLI::App& app, Runner* run, const os::Env& env);
void RegisterShare(CLI::App& app, Runner* run, const os::Env& env);
void RegisterReport(CLI::App& app, Runner* run, const os::Env& env);
void RegisterEvents(CLI::App& app, Runner* run, const os::Env& env);
void RegisterLease(CLI::App& app, Runner* run, const os::Env& env);
void RegisterTop(CLI::App& app, Runner* run, const os::Env& env);
void RegisterDoctor(CLI::App& app, Runner* run, const os::Env& env);
void RegisterComplete(CLI::App& app, Runner* run, const os::Env& env);
void RegisterSlurm(CLI::App& app, Runner* run, const os::Env& env);

}  // namespace gpulane::cli
