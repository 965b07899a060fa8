#pragma once
// The operating system as the library sees it (issue 25, item 3; leveldb's Env, ninja's
// DiskInterface): the clock, /proc, the starting of processes, the GPUs and the state folder's
// files, bundled, built once by an executable's main() (SystemEnv) and passed down to whatever
// reads the time, looks processes up, reads GPUs or (so far: the store's marker and the job files)
// its own files.
// Nothing below cli/ builds a clock, a ProcfsProcessTable or an NVML backend of its own and nothing
// there forks (scripts/check-seams.py), so a test hands the same code a FakeClock, a fake process
// table, a spawner that records, fixed GPU snapshots and files in memory instead of sleeping,
// reading the real /proc, starting processes, loading NVML or writing to disk. (The job stores are opened through
// daemon::DaemonParts: store/ sits above os/, and only the daemon opens them.)
//
// A plain bundle of references, no globals: whoever builds an Env keeps what it refers to alive
// for as long as the Env is used. `processes` may be used from several threads at once (the
// daemon's loop and its sampler): ProcfsProcessTable is safe for that.
#include "gpu/nvml_opener.h"
#include "gpu/opener.h"
#include "os/file_system.h"
#include "os/process_table.h"
#include "os/spawn.h"
#include "util/clock.h"

namespace gpulane::os {

struct Env {
  const Clock& clock;       ///< the wall and monotonic clocks
  ProcessTable& processes;  ///< who runs a pid, its parent and group (/proc)
  Spawner& spawner;         ///< how a process is started (os/spawn.h)
  GpuOpener& gpus;          ///< the GPUs read directly (gpu/opener.h): NVML, loaded at each Open
  FileSystem& files;        ///< the state folder's files (os/file_system.h)
};

/// The real operating system: the system's clocks, /proc, fork, NVML and files. Built in an executable's
/// main(); building it loads nothing (NVML is loaded by each GpuOpener::Open).
class SystemEnv {
 public:
  SystemEnv() : env_{clock_, processes_, spawner_, gpus_, files_} {}
  SystemEnv(const SystemEnv&) = delete;
  SystemEnv& operator=(const SystemEnv&) = delete;
  const Env& env() const { return env_; }

 private:
  SystemClock clock_;
  ProcfsProcessTable processes_;
  SystemSpawner spawner_;
  NvmlOpener gpus_{clock_};
  SystemFileSystem files_;
  Env env_;
};

}  // namespace gpulane::os
