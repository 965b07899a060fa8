#pragma once
// The spawner's side of a job's device isolation (exec/device_isolation.h), used by the one
// spawner, exec/job_runner: the pipe that keeps the namespace holder alive (its write end only in
// the spawner), the holder's pid (not the job's: never a leftover), and the timing split
// (GPULANE_ISOLATE_TIMING=1 in the spawner's environment: one line of per-step microseconds on
// stderr, and the holder's line timing the namespace's teardown after the job; bench/isolate_cost.sh).
// GPULANE_ISOLATE_HOLDER=0 (for measuring only) starts no holder: the job's exit frees its
// namespace, as before the holder.
#include <sys/types.h>

#include <cstddef>
#include <string>

#include "exec/device_isolation.h"

namespace gpulane::exec {

/// The descriptors the forked child needs for the namespace holder (StartNamespaceHolder).
struct IsolationFds {
  int hold_read = -1;   ///< the read end of the holder's pipe (-1: no holder)
  int host_ns = -1;     ///< timing only: the spawner's mount namespace, to time the teardown
  bool timing = false;  ///< GPULANE_ISOLATE_TIMING=1: the holder writes its line to stderr
};

class IsolationRun {
 public:
  /// Before the fork, for a job whose `plan` (nullptr: none, or it cannot be isolated) is carried
  /// out; `plan_us`: how long planning it took (-1: unknown).
  IsolationRun(const IsolationPlan* plan, long long plan_us);
  ~IsolationRun();
  IsolationRun(const IsolationRun&) = delete;
  IsolationRun& operator=(const IsolationRun&) = delete;

  /// In the parent after the fork: the child's ends are the child's.
  void Forked();
  /// The child's report that the namespace is made, with the holder's pid (-1: none) and when
  /// each step ended; prints the timing line when asked for.
  void Isolated(pid_t holder_pid, const IsolationSteps& steps);
  /// Once the job is over: the holder leaves the job's namespace, which the kernel then frees; not
  /// waited for.
  void Release();

  IsolationFds fds;
  pid_t holder = -1;
  bool applied = false;

 private:
  int hold_write_ = -1;
  long long plan_us_ = -1;
  std::size_t masks_ = 0;
  std::string proc_words_;
};

}  // namespace gpulane::exec
