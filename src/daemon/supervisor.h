#pragma once
// The per-job supervisor (`gpulane _supervise`): one small process per queued job that waits in
// line for the job's GPUs, holds its lease, runs it as its user, reaps its whole process tree and
// records its exit status in the job's status file, independently of the daemon, so a daemon
// restart neither kills running jobs nor loses their results (the role of Slurm's slurmstepd).
#include <cstdint>
#include <string>

#include "os/env.h"

namespace gpulane::daemon {

/// Supervises job `id` whose files are in `jobs_dir`. Returns the supervisor's exit code (0 when
/// it recorded an outcome, whatever the job's; 1 when it could not even do that). Exits at once
/// (0) if another supervisor already holds the job's lock. `env`: the clock and /proc (main()'s).
int RunSupervisor(const std::string& jobs_dir, std::int64_t id, const os::Env& env);

}  // namespace gpulane::daemon
