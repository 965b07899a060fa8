#pragma once
// gpulane's exit codes: the one table (README.md, "Exit codes"), shared by every command and the
// daemon. `run` exits with its job's status instead, except when gpulane itself fails before or
// around the job.
#include "util/result.h"

namespace gpulane {

enum ExitCode : int {
  kExitOk = 0,
  kExitFailure = 1,         ///< an operating-system or internal failure
  kExitUsage = 2,           ///< bad command line or input value
  kExitNoDriver = 3,        ///< libnvidia-ml.so.1 could not be loaded
  kExitNvml = 4,            ///< NVML failed (driver not loaded, version mismatch, no permission)
  kExitNotEnoughGpus = 5,   ///< too few GPUs qualify (pick; run --no-wait)
  kExitTimeout = 6,         ///< run --timeout expired before GPUs were free
  kExitUnsafe = 7,          ///< a lease directory or file failed an ownership/permission check
  kExitNoSuchJob = 8,       ///< no such job
  kExitPermission = 9,      ///< not allowed to act on another user's job
  kExitUnavailable = 10,    ///< the daemon cannot be reached or started; Slurm's commands missing or failing
  kExitJobDidNotRun = 11,   ///< wait: the job was cancelled or its dependency failed before it ran
  kExitWrongState = 12,     ///< the job is not in a state the command applies to (hold of a running job)
  /// The job store cannot be trusted, so the daemon does not start on it (or a job's row cannot be
  /// read): damaged, read-only, zero-length or missing where a store with jobs was recorded, or
  /// holding fewer jobs than it did (daemon/store_marker.h).
  kExitStore = 13,
  kExitOverLimit = 14,      ///< a configured limit refuses the request now ([limits]: too many queued jobs)
  kExitLinesFailed = 15,    ///< run --each: one or more lines did not exit 0 (each is named on stderr)
  kExitChecksFailed = 16,   ///< doctor: one or more checks failed (each is a FAIL line)
  kExitGpuHeld = 17,        ///< slurm prolog/epilog: a process or ghost memory holds one of the job's GPUs
  /// run, and a queued job's exit status: the job was stopped for holding more GPU memory than its
  /// --mem declared plus lease.memory_margin for anomaly.overuse_grace (telemetry/memory_guard.h)
  kExitMemoryOveruse = 18,
  kExitCannotExecute = 126, ///< run: the command exists but could not be executed
  kExitNotFound = 127,      ///< run: the command was not found
};

/// The exit code for an error kind.
inline int ExitCodeFor(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInvalidArgument: return kExitUsage;
    case ErrorKind::kNoDriver: return kExitNoDriver;
    case ErrorKind::kNvml: return kExitNvml;
    case ErrorKind::kNotEnoughGpus: return kExitNotEnoughGpus;
    case ErrorKind::kTimeout: return kExitTimeout;
    case ErrorKind::kUnsafe: return kExitUnsafe;
    case ErrorKind::kNotFound: return kExitNoSuchJob;
    case ErrorKind::kPermission: return kExitPermission;
    case ErrorKind::kWrongState: return kExitWrongState;
    case ErrorKind::kUnavailable: return kExitUnavailable;
    case ErrorKind::kStore: return kExitStore;
    case ErrorKind::kOverLimit: return kExitOverLimit;
    case ErrorKind::kIo:
    case ErrorKind::kInternal: return kExitFailure;
  }
  return kExitFailure;
}

}  // namespace gpulane
