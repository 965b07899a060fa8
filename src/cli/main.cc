// gpulane: GPU resource manager for shared multi-GPU servers. Thin: parses the command line and
// hands over to one subcommand (cli/cmd_*.cc); everything else lives in the core library.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fmt/format.h>

#include "util/timing.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "util/config.h"
#include "util/exit_codes.h"

int main(int argc, char** argv) {
  const auto started = std::chrono::steady_clock::now();
  gpulane::TimingMark("main");
  using namespace gpulane;
  CLI::App app{"gpulane: see, choose and lease the GPUs of a shared server", "gpulane"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "gpulane 0.1.0");
  cli::Runner run;
  cli::RegisterStatus(app, &run);
  cli::RegisterPick(app, &run);
  cli::RegisterRun(app, &run);
  cli::RegisterSubmit(app, &run);
  cli::RegisterQueue(app, &run);
  cli::RegisterJobCommands(app, &run);
  cli::RegisterDaemon(app, &run);
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
  try {
    app.parse(args);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    fmt::print(stderr, "gpulane: error: {}; see 'gpulane --help'\n", e.what());
    return kExitUsage;
  }
  if (!run) return kExitUsage;
  gpulane::TimingMark("command line parsed");
  // The settings, once for every command: a broken file stops each of them with <file>:<line>
  // (exit 2) instead of some commands ignoring it. Commands read them with LoadConfig(), which
  // returns this same result. A job's supervisor reports the error in the job's status instead.
  if (!app.got_subcommand("_supervise")) {
    if (auto config = LoadConfig(); !config) return cli::Fail(config.error());
    gpulane::TimingMark("config loaded");
  }
  const int code = run();
  // Leave without running library destructors and atexit handlers: NVML's teardown costs more
  // than all of a status command's own work, and everything gpulane holds (leases, sockets, the
  // database) is released by the kernel or was released explicitly already.
  std::fflush(stdout);
  std::fflush(stderr);
  if (std::getenv("GPULANE_TIMING"))
    fmt::print(stderr, "gpulane: timing: {:.2f} ms from main() to exit\n",
               std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count());
  _exit(code);
}
