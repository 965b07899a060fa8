#pragma once
// The operating system as the library sees it (issue 25, item 3; leveldb's Env, ninja's
// DiskInterface): the clock, /proc, the starting of processes and the GPUs, bundled, built once by
// an executable's main() (SystemEnv) and passed down to whatever reads the time, looks processes up
// or reads GPUs. Nothing below cli/ builds a clock, a ProcfsProcessTable or an NVML backend of its
// own and nothing there forks (scripts/check-seams.py), so a test hands the same code a FakeClock,
// a fake process table, a spawner that records and fixed GPU snapshots instead of sleeping,
// reading the real /proc, starting processes or loading NVML. (The job stores are opened through
// daemon::DaemonParts: store/ sits above os/, and only the daemon opens them.)
//
// A plain bundle of references, no globals: whoever builds an Env keeps what it refers to alive
// for as long as the Env is used. `processes` may be used from several threads at once (the
// daemon's loop and its sampler): ProcfsProcessTable is safe for that.
#include "gpu/nvml_opener.h"
#include "gpu/opener.h"
#include "os/process_table.h"
#include "os/spawn.h"
#include "util/clock.h"

namespace gpulane::os {

struct Env {
  const Clock& clock;       ///< the wall and monotonic clocks
  ProcessTable& processes;  ///< who runs a pid, its parent and group (/proc)
  Spawner& spawner;         ///< how a process is started (os/spawn.h)
  GpuOpener& gpus;          ///< the GPUs read directly (gpu/opener.h): NVML, loaded at each Open
};

/// The real operating system: the system's clocks, /proc, fork and NVML. Built in an executable's
/// main(); building it loads nothing (NVML is loaded by each GpuOpener::Open).
class SystemEnv {
 public:
  SystemEnv() : env_{clock_, processes_, spawner_, gpus_} {}
  SystemEnv(const SystemEnv&) = delete;
  SystemEnv& operator=(const SystemEnv&) = delete;
  const Env& env() const { return env_; }

 private:
  SystemClock clock_;
  ProcfsProcessTable processes_;
  SystemSpawner spawner_;
  NvmlOpener gpus_{clock_};
  Env env_;
};

}  // namespace gpulane::os
