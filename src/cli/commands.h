#pragma once
// One registration function per subcommand; each adds its CLI11 subcommand and sets `*run` to the
// function that carries it out (returning the exit code) when the subcommand is chosen.
#include <functional>

#include <CLI/CLI.hpp>

namespace gpulane::cli {

using Runner = std::function<int()>;

void RegisterStatus(CLI::App& app, Runner* run);
void RegisterPick(CLI::App& app, Runner* run);

}  // namespace gpulane::cli
