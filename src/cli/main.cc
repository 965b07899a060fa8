// gpulane: GPU resource manager for shared multi-GPU servers. Thin: parses the command line and
// hands over to one subcommand (cli/cmd_*.cc); everything else lives in the core library.
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fmt/format.h>
#include <string_view>

#include "util/timing.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/suggest.h"
#include "cli/version.h"
#include "util/config.h"
#include "util/exit_codes.h"

namespace {

// The subcommands, by the function that registers them (cli/commands.h).
struct Family {
  void (*add)(CLI::App&, gpulane::cli::Runner*, const gpulane::os::Env&);
  std::array<std::string_view, 5> names;  ///< the subcommands it adds ("" fills up)
};
constexpr Family kFamilies[] = {
    {gpulane::cli::RegisterStatus, {"status"}},
    {gpulane::cli::RegisterPick, {"pick"}},
    {gpulane::cli::RegisterRun, {"run"}},
    {gpulane::cli::RegisterSubmit, {"submit"}},
    {gpulane::cli::RegisterQueue, {"queue", "show"}},
    {gpulane::cli::RegisterJobCommands, {"cancel", "hold", "release", "wait", "logs"}},
    {gpulane::cli::RegisterDaemon, {"daemon", "_supervise"}},
    {gpulane::cli::RegisterSimulate, {"simulate"}},
    {gpulane::cli::RegisterShare, {"share"}},
    {gpulane::cli::RegisterReport, {"report"}},
    {gpulane::cli::RegisterEvents, {"events"}},
    {gpulane::cli::RegisterLease, {"_lease"}},
    {gpulane::cli::RegisterTop, {"top"}},
    {gpulane::cli::RegisterDoctor, {"doctor"}},
    {gpulane::cli::RegisterSlurm, {"slurm"}},
    {gpulane::cli::RegisterComplete, {"_complete"}},
};

// Registers the subcommand `first` (the first argument) names, alone: building every option of
// every subcommand was a fifth of what `gpulane submit` did itself (bench/results/queue-2026-12-01.md).
// Any other first argument (an option such as --help, a typo) gets all of them, in the order
// --help lists them.
void RegisterSubcommands(CLI::App& app, gpulane::cli::Runner* run, std::string_view first, const gpulane::os::Env& env) {
  for (const Family& family : kFamilies)
    if (!first.empty() && std::find(family.names.begin(), family.names.end(), first) != family.names.end()) {
      family.add(app, run, env);
      return;
    }
  for (const Family& family : kFamilies) family.add(app, run, env);
}

// CLI11's answer to --help and the like (App::exit: help on stdout), then out as every command
// leaves (_exit after flushing, end of main): the exit handlers would touch pages nothing else did.
[[noreturn]] void ExitWithCli11(const CLI::App& app, const CLI::Error& e) {
  const int code = app.exit(e);
  std::cout.flush();
  std::cerr.flush();
  std::fflush(stdout);
  std::fflush(stderr);
  _exit(code);
}

}  // namespace

int main(int argc, char** argv) {
  // GPULANE_TIMING: the clock at main() (steady_clock is CLOCK_MONOTONIC), so that a caller that
  // noted the time before it started gpulane can tell how long exec, loading and static
  // initialisation took. The clock is read only when asked: its first read maps the vDSO's pages.
  const bool timing = std::getenv("GPULANE_TIMING") != nullptr;
  const auto started = timing ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  if (timing) {
    gpulane::TimingMark("main");
    fmt::print(stderr, "gpulane: timing: main() at {:.6f} s monotonic\n",
               std::chrono::duration<double>(started.time_since_epoch()).count());
  }
  using namespace gpulane;
  // `gpulane --version` alone, without building the command line's parser: what CLI11 prints for
  // it, in a tenth of the instructions (every subcommand's options were registered for it:
  // 2.84 M instructions against /bin/true's 0.13 M, callgrind; docs/ci-time.md), and leaving as
  // every command does (_exit, below): exit handlers touch pages that nothing else did
  // (bench/cli_start.py).
  if (argc == 2 && std::string_view(argv[1]) == "--version") {
    std::puts(gpulane::cli::VersionText());
    std::fflush(stdout);
    _exit(kExitOk);
  }
  CLI::App app{"gpulane: see, choose and lease the GPUs of a shared server", "gpulane"};
  app.require_subcommand(1);
  app.set_version_flag("--version", gpulane::cli::VersionLine());
  app.formatter(gpulane::cli::MakeUsageFormatter());  // before the subcommands: they copy it
  const os::SystemEnv real_os;  // the real clocks and /proc (os/env.h), passed down to the commands
  cli::Runner run;
  RegisterSubcommands(app, &run, argc > 1 ? argv[1] : "", real_os.env());
  gpulane::TimingMark("subcommands registered");
  // Everything after the first "--" is a command to run, passed on untouched (CLI11 would parse it).
  std::vector<std::string> args;
  for (int i = argc - 1; i > 0; --i) args.emplace_back(argv[i]);  // CLI11 wants them reversed
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--") {
      cli::TrailingCommand().assign(argv + i + 1, argv + argc);
      cli::TrailingCommandGiven() = true;
      args.assign(std::make_reverse_iterator(argv + i), std::make_reverse_iterator(argv + 1));
      break;
    }
  }
  // A first word that names no command: one line with the nearest command, not CLI11's
  // "A subcommand is required" (`gpulane qeue`).
  if (argc > 1 && argv[1][0] != '-' && argv[1][0] != '\0' && !cli::FindSubcommand(app, argv[1])) {
    cli::PrintDiagnostic("error", cli::UnknownCommandMessage(app, argv[1]));
    return kExitUsage;
  }
  const std::vector<std::string> words(args.rbegin(), args.rend());  // parse() consumes args
  try {
    app.parse(args);
  } catch (const CLI::Success& e) {  // --help, --help-all, --version (with other words)
    ExitWithCli11(app, e);
  } catch (const CLI::ParseError& e) {
    // An option a (sub)command does not know, a value it cannot take, a missing job id: one line
    // naming the word as typed (cli/suggest.h).
    cli::PrintDiagnostic("error", cli::ParseErrorMessage(app, words, e));
    return kExitUsage;
  }
  if (!run) return kExitUsage;
  gpulane::TimingMark("command line parsed");
  // The settings, once for every command: a broken file stops each of them with <file>:<line>
  // (exit 2) instead of some commands ignoring it. Commands read them with LoadConfig(), which
  // returns this same result. A job's supervisor reports the error in the job's status instead.
  // `doctor` reports a broken file as one of its checks; `_complete` (shell completion) stays quiet.
  const std::string_view first = argv[1];  // chosen: it is the first argument (RegisterSubcommands)
  if (first != "_supervise" && first != "doctor" && first != "_complete") {
    if (auto config = LoadConfig(); !config) return cli::Fail(config.error());
    gpulane::TimingMark("config loaded");
  }
  const int code = run();
  // Leave without running library destructors and atexit handlers: NVML's teardown costs more
  // than all of a status command's own work, and everything gpulane holds (leases, sockets, the
  // database) is released by the kernel or was released explicitly already.
  std::fflush(stdout);
  std::fflush(stderr);
  if (timing)
    fmt::print(stderr, "gpulane: timing: {:.2f} ms from main() to exit\n",
               std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count());
  _exit(code);
}
