#pragma once
// Who runs a process: the owner and command line of a pid, read from /proc.
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "gpu/types.h"

namespace gpulane {

/// What /proc tells of one process.
struct ProcessInfo {
  std::uint32_t uid = 0;  ///< real uid
  std::string user;       ///< login name, or the uid as text when it has no name
  std::string command;    ///< basename of argv[0] ("python"), or the kernel's comm for kernel threads
  std::string cmdline;    ///< argv joined by spaces
};

/// Where a process sits in the process tree (/proc/<pid>/stat fields 4, 5, 6).
struct ProcessLinks {
  std::uint32_t ppid = 0;
  std::uint32_t pgid = 0;
  std::uint32_t sid = 0;
};

/// Looks processes up by pid. The real implementation reads /proc; tests may give their own.
class ProcessTable {
 public:
  virtual ~ProcessTable() = default;
  /// nullopt when the pid does not exist here or cannot be read (another PID namespace).
  virtual std::optional<ProcessInfo> Lookup(std::uint32_t pid) = 0;
  /// Parent, process group and session of a live process; nullopt when it does not exist (or is a
  /// zombie, whose resources are already gone).
  virtual std::optional<ProcessLinks> Links(std::uint32_t pid) = 0;
  /// Whether a GPU process whose pid this table never shows may still be one of our jobs': true in
  /// a container (NVML reports the host's pids there, our own jobs' included), false on the host,
  /// where every process shows and an unseen pid is another namespace's, never a job of ours.
  virtual bool UnseenPidsMayBeOurs() { return true; }
};

/// ProcessTable over a procfs mount (default /proc). Caches user names per uid; safe to use from
/// several threads at once (one table serves the daemon's loop and its sampler: os/env.h).
class ProcfsProcessTable : public ProcessTable {
 public:
  explicit ProcfsProcessTable(std::string root = "/proc") : root_(std::move(root)) {}
  std::optional<ProcessInfo> Lookup(std::uint32_t pid) override;
  std::optional<ProcessLinks> Links(std::uint32_t pid) override;
  /// A container's guess: kernel threads (kthreadd, pid 2) show only in the host's PID namespace.
  /// GPULANE_PID_NAMESPACE=host or =container overrides it (docs/security.md).
  bool UnseenPidsMayBeOurs() override;

 private:
  std::string UserName(std::uint32_t uid);
  std::string root_;
  std::mutex users_mutex_;  ///< guards users_
  std::map<std::uint32_t, std::string> users_;
};

/// True if `pid` or one of its ancestors is `ancestor`, or it is in process group `pgid` (when not 0).
bool BelongsTo(ProcessTable& table, std::uint32_t pid, std::uint32_t ancestor, std::uint32_t pgid);

/// Fills uid, user, command and cmdline of every GPU process in `snapshot` that `table` can see.
void AnnotateProcesses(GpuSnapshot& snapshot, ProcessTable& table);

}  // namespace gpulane
