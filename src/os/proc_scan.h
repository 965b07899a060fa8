#pragma once
// Every process of the machine as /proc lists it, and which of them hold a given file open: what
// the daemon needs to end a lease whose job outlived its time limit (daemon/time_limit_watch.h).
// Reads /proc only (no user's path).
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace gpulane {

/// One live process (zombies left out: they hold nothing any more).
struct ProcEntry {
  pid_t pid = 0;
  std::uint32_t uid = 0;  ///< real uid (/proc/<pid>/status)
  pid_t ppid = 0;
  pid_t pgid = 0;
};

/// The processes of `proc_root` (default /proc) with their real uid, parent and process group.
/// A process that ends while it is read is left out.
std::vector<ProcEntry> ListProcesses(const std::string& proc_root = "/proc");

/// Whether process `pid` has a descriptor open on the file (`dev`, `ino`) (its /proc/<pid>/fd
/// entries, stat'ed through the kernel's links). False when they cannot be read (another user's,
/// for a caller that is not root).
bool HoldsFileOpen(pid_t pid, std::uint64_t dev, std::uint64_t ino, const std::string& proc_root = "/proc");

}  // namespace gpulane
