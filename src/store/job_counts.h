#pragma once
// How many jobs a job store holds, read without a daemon (a command whose per-user daemon is down
// decides from this whether to start it again: cli/client.cc; `gpulane daemon status` says it).
#include <cstdint>
#include <string>

#include "util/result.h"

namespace gpulane::store {

struct JobCounts {
  std::int64_t total = 0;       ///< every row of the jobs table
  std::int64_t unfinished = 0;  ///< pending, held, launching or running
};

/// The counts of the job database at `path`, opened for reading only (never created, never
/// migrated); {0, 0} when the file does not exist. Errors: kStore when it exists but cannot be
/// read as a job store (damaged, not a database, no jobs table), with SQLite's reason.
Result<JobCounts> CountJobs(const std::string& path);

}  // namespace gpulane::store
