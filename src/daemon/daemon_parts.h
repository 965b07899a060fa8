#pragma once
// What a Daemon is built from besides its paths, config and settings: the OS touchpoints it would
// otherwise reach for itself (issue 25, item 3), the way ninja's CommandRunner is wired only in
// ninja.cc. RunDaemon (daemon.cc) passes RealDaemonParts; the in-process daemon tests
// (tests/unit/daemon_inproc_*.cc) pass fake GPUs and a launcher that records.
#include <functional>
#include <memory>
#include <string>

#include "daemon/launcher.h"
#include "gpu/backend.h"
#include "os/env.h"
#include "os/process_table.h"
#include "store/job_store.h"
#include "util/clock.h"
#include "util/result.h"

namespace gpulane::daemon {

/// Where a launcher starts supervisors from: the gpulane binary, the jobs folder and the log their
/// output goes to.
struct LaunchPlace {
  std::string self_exe, jobs_dir, log_path;
};

struct DaemonParts {
  /// The clock, the process table (/proc) and the spawner everything in the daemon uses: its loop,
  /// its sampler and time-limit watch (the table is used from two threads: ProcfsProcessTable is
  /// safe for that), gpulane-web's start (os/env.h; what it refers to must outlive the daemon).
  const os::Env* env = nullptr;
  /// A GPU backend of its own: called once for the loop's snapshots and once more for the
  /// sampler thread (whose reads keep state). Errors: kNvml.
  std::function<Result<std::unique_ptr<GpuBackend>>()> open_gpus;
  /// The job store at `path` (jobs.db in the state folder).
  std::function<Result<std::unique_ptr<store::JobStore>>(const std::string& path, int busy_timeout_ms)> open_store;
  /// The launcher of supervisors.
  std::function<std::unique_ptr<SupervisorLauncher>(const LaunchPlace& place)> make_launcher;
};

/// The real ones: NVML (gpu/nvml_backend.h), SQLite at the path, `gpulane _supervise` started
/// detached through `env`'s spawner (ForkExecLauncher), `env`'s clock and process table (main()'s,
/// os/env.h).
DaemonParts RealDaemonParts(const os::Env& env);

}  // namespace gpulane::daemon
