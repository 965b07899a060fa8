// gpulane daemon (the queue's server; stop, status, --user --install: cli/daemon_control.h) and
// gpulane _supervise (one job's supervisor; started by the daemon, not by people).
#include <memory>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/daemon_control.h"
#include "daemon/daemon.h"
#include "daemon/supervisor.h"

namespace gpulane::cli {

void RegisterDaemon(CLI::App& app, Runner* run, const os::Env& env) {
  auto user = std::make_shared<bool>(false);
  auto install = std::make_shared<bool>(false);
  CLI::App* sub = app.add_subcommand("daemon", "Run the job-queue daemon in the foreground (systemd starts it as root); "
                                               "'daemon status', 'daemon stop'");
  sub->add_flag("--user", *user, "Per-user mode: socket under $XDG_RUNTIME_DIR, state under $XDG_STATE_HOME");
  sub->add_flag("--install", *install,
                "With --user: write the systemd user unit ~/.config/systemd/user/gpulane.service and print how to enable it");
  sub->require_subcommand(0, 1);
  CLI::App* status = sub->add_subcommand("status", "Say whether your daemon runs: mode, pid, socket, its dashboard's URL");
  status->callback([run] { *run = [] { return RunDaemonStatus(); }; });
  CLI::App* stop = sub->add_subcommand("stop", "Stop your own per-user daemon (running jobs go on; the system daemon: systemctl)");
  stop->callback([run] { *run = [] { return RunDaemonStop(); }; });
  sub->callback([user, install, status, stop, run, &env] {
    if (status->parsed() || stop->parsed()) return;
    if (*install && !*user) {
      *run = [] {
        return Fail(MakeError(ErrorKind::kInvalidArgument, "--install needs --user (gpulane daemon --user --install): the "
                                                           "system daemon's unit comes with the package"));
      };
    } else if (*install) {
      *run = [] { return RunDaemonInstall(); };
    } else {
      *run = [user, &env] { return daemon::RunDaemon(*user, daemon::RealDaemonParts(env)); };
    }
  });

  auto jobs_dir = std::make_shared<std::string>();
  auto id = std::make_shared<std::int64_t>(0);
  CLI::App* sup = app.add_subcommand("_supervise", "");
  sup->group("");  // hidden
  sup->add_option("jobs_dir", *jobs_dir)->required();
  sup->add_option("job_id", *id)->required();
  sup->callback([jobs_dir, id, run, &env] { *run = [jobs_dir, id, &env] { return daemon::RunSupervisor(*jobs_dir, *id, env); }; });
}

}  // namespace gpulane::cli
