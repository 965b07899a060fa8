#pragma once
// The operating system as the library sees it (issue 25, item 3; leveldb's Env, ninja's
// DiskInterface): the clock, /proc and the starting of processes, bundled, built once by an executable's main() (SystemEnv)
// and passed down to whatever reads the time or looks processes up. Nothing below cli/ builds a
// clock or a ProcfsProcessTable of its own and nothing there forks (scripts/check-seams.py), so a
// test hands the same code a FakeClock, a fake process table and a spawner that records instead of
// sleeping, reading the real /proc or starting processes.
//
// A plain bundle of references, no globals: whoever builds an Env keeps what it refers to alive
// for as long as the Env is used. `processes` may be used from several threads at once (the
// daemon's loop and its sampler): ProcfsProcessTable is safe for that.
#include "os/process_table.h"
#include "os/spawn.h"
#include "util/clock.h"

namespace gpulane::os {

struct Env {
  const Clock& clock;       ///< the wall and monotonic clocks
  ProcessTable& processes;  ///< who runs a pid, its parent and group (/proc)
  Spawner& spawner;         ///< how a process is started (os/spawn.h)
};

/// The real operating system: the system's clocks, /proc and fork. Built in an executable's main().
class SystemEnv {
 public:
  SystemEnv() : env_{clock_, processes_, spawner_} {}
  SystemEnv(const SystemEnv&) = delete;
  SystemEnv& operator=(const SystemEnv&) = delete;
  const Env& env() const { return env_; }

 private:
  SystemClock clock_;
  ProcfsProcessTable processes_;
  SystemSpawner spawner_;
  Env env_;
};

}  // namespace gpulane::os
