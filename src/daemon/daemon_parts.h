#pragma once
// What a Daemon is built from besides its paths, config and settings: the OS touchpoints it would
// otherwise reach for itself (issue 25, item 3), the way ninja's CommandRunner is wired only in
// ninja.cc. `gpulane daemon` (cli/cmd_daemon.cc) builds RealDaemonParts over main()'s os::Env; the
// in-process daemon tests (tests/support/inproc_daemon.cc) pass an Env of fixed GPUs and a launcher
// that records. The GPUs come with the Env (os/env.h); the stores are opened here, not through the
// Env, because store/ sits above os/ and only the daemon opens them.
#include <functional>
#include <memory>
#include <string>

#include "daemon/launcher.h"
#include "os/env.h"
#include "store/history_store.h"
#include "store/job_store.h"
#include "util/result.h"

namespace gpulane::daemon {

/// Where a launcher starts supervisors from: the gpulane binary, the jobs folder and the log their
/// output goes to.
struct LaunchPlace {
  std::string self_exe, jobs_dir, log_path;
};

struct DaemonParts {
  /// The clock, the process table (/proc), the spawner and the GPUs everything in the daemon uses:
  /// its loop, its sampler and time-limit watch (the table is used from two threads:
  /// ProcfsProcessTable is safe for that), gpulane-web's start. Its GPUs are opened once for the
  /// loop's snapshots and once more for the sampler thread (whose reads keep state). What it refers
  /// to must outlive the daemon.
  const os::Env* env = nullptr;
  /// The job store at `path` (jobs.db in the state folder).
  std::function<Result<std::unique_ptr<store::JobStore>>(const std::string& path, int busy_timeout_ms)> open_store;
  /// The GPU history store at `path` (history.db in the state folder), opened by the sampler's
  /// start when telemetry is on; an error leaves history and usage records unstored.
  std::function<Result<std::unique_ptr<store::HistoryStore>>(const std::string& path)> open_history;
  /// The launcher of supervisors.
  std::function<std::unique_ptr<SupervisorLauncher>(const LaunchPlace& place)> make_launcher;
};

/// The real ones: SQLite at the paths (store::JobStore::Open, store::HistoryStore::Open),
/// `gpulane _supervise` started detached through `env`'s spawner (ForkExecLauncher), and `env`
/// itself (main()'s os::SystemEnv: its clock, process table and NVML).
DaemonParts RealDaemonParts(const os::Env& env);

}  // namespace gpulane::daemon
