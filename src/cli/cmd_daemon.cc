// gpulane daemon (the queue's server) and gpulane _supervise (one job's supervisor; started by
// the daemon, not by people).
#include <memory>

#include "cli/commands.h"
#include "daemon/daemon.h"
#include "daemon/supervisor.h"

namespace gpulane::cli {

void RegisterDaemon(CLI::App& app, Runner* run) {
  auto user = std::make_shared<bool>(false);
  CLI::App* sub = app.add_subcommand("daemon", "Run the job-queue daemon in the foreground (systemd starts it as root)");
  sub->add_flag("--user", *user, "Per-user mode: socket under $XDG_RUNTIME_DIR, state under $XDG_STATE_HOME");
  sub->callback([user, run] { *run = [user] { return daemon::RunDaemon(*user); }; });

  auto jobs_dir = std::make_shared<std::string>();
  auto id = std::make_shared<std::int64_t>(0);
  CLI::App* sup = app.add_subcommand("_supervise", "");
  sup->group("");  // hidden
  sup->add_option("jobs_dir", *jobs_dir)->required();
  sup->add_option("job_id", *id)->required();
  sup->callback([jobs_dir, id, run] { *run = [jobs_dir, id] { return daemon::RunSupervisor(*jobs_dir, *id); }; });
}

}  // namespace gpulane::cli
