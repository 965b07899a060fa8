// gpulane: GPU resource manager for shared multi-GPU servers. Thin: parses the command line and
// hands over to one subcommand (cli/cmd_*.cc); everything else lives in the core library.
#include <cstdio>
#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/exit_codes.h"

int main(int argc, char** argv) {
  using namespace gpulane;
  CLI::App app{"gpulane: see, choose and lease the GPUs of a shared server", "gpulane"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "gpulane 0.1.0");
  cli::Runner run;
  cli::RegisterStatus(app, &run);
  cli::RegisterPick(app, &run);
  try {
    app.parse(argc, argv);
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
  return run();
}
