#pragma once
// The job's side of exec::RunJob (job_runner.cc), from fork to exec: what the child does and what it
// reports to the parent through a close-on-exec pipe. Everything here that runs in the child is
// async-signal-safe; what it needs is made by the parent before the fork. Internal to exec/.
#include <sys/types.h>

#include <climits>
#include <cstdint>
#include <vector>

#include "exec/device_isolation.h"
#include "exec/isolation_run.h"
#include "exec/job_runner.h"
#include "util/clock.h"
#include "util/result.h"

namespace gpulane::exec {

// What the child reports through the pipe before it execs (the pipe is close-on-exec: its end
// without a failure report means the command runs): the logs it opened, then, if it could not
// start, why.
struct ChildReport {
  enum Kind : int { kLogsOpened, kFailed, kWarning, kIsolated };
  Kind kind = kFailed;
  int err = 0;             // kFailed: the errno, or 0 when `what` says it all
  bool at_exec = false;    // kFailed: execve itself failed (exit 127 or 126, as a shell's)
  std::uint64_t stdout_offset = 0, stderr_offset = 0;  // kLogsOpened
  char stdout_path[PATH_MAX] = {}, stderr_path[PATH_MAX] = {};
  char what[PATH_MAX + 160] = {};  // kFailed, kWarning: what could not be done, for "cannot <what>"
  pid_t holder = -1;               // kIsolated: the namespace holder (exec/device_isolation.h), or -1
  IsolationSteps steps;            // kIsolated: when each step ended
};

/// Writes `report` whole to `fd` (in the child).
void WriteReport(int fd, const ChildReport& report);
/// Reads one whole report from `fd` (in the parent); false at the pipe's end.
bool ReadReport(int fd, ChildReport* report);

/// The job's user's supplementary groups, looked up in the parent: after fork the child may only
/// do async-signal-safe work, and NSS look-ups (getpwuid_r, getgrouplist) are not.
Result<std::vector<gid_t>> GroupsOf(std::uint32_t uid, std::uint32_t gid);

// What the job's process needs between fork and exec, all made before the fork.
struct ChildPlan {
  const JobSpec& spec;
  const std::vector<gid_t>& groups;
  const IsolationFds& isolation_fds;
  int report_fd;
  const Clock& clock;
  const char* program;
  char* const* argv;
  char* const* envp;
};

/// The job's process from fork to exec (async-signal-safe calls only): a process group of its own,
/// only the descriptors asked for, no signal blocked, isolated, the user's rights, the exec mark,
/// execve. A failure is reported through plan.report_fd and ends it with 126 (127: not found).
[[noreturn]] void BecomeTheJob(const ChildPlan& plan);

}  // namespace gpulane::exec
