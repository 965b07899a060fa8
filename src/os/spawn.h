#pragma once
// How every process gpulane starts below cli/ comes to be (issue 25, item 3; ninja's
// CommandRunner): the job runner's job, the daemon's supervisors and gpulane-web, a notification's
// delivery, the isolation probe. The one place of the library that forks (scripts/check-seams.py);
// SystemSpawner is built in an executable's main() with the rest of os::Env, and a test hands the
// same code a spawner that records instead of starting anything.
//
// What runs in a new process runs in the child of a fork of a process that may have threads: only
// async-signal-safe calls, everything it needs made before; it ends by exec or _exit (should it
// return, the child _exits 127).
#include <sys/types.h>

#include <type_traits>

#include "util/result.h"

namespace gpulane::os {

/// What a new process does before it execs: a reference to a callable of the caller's, valid for
/// the call it is passed to; copying it copies the reference, never the callable (no allocation, so
/// it may also be called in a child between fork and exec).
class InChild {
 public:
  template <typename F>
    requires(!std::is_same_v<std::remove_cvref_t<F>, InChild>)
  InChild(const F& f)  // NOLINT: implicit, so a lambda is passed as it is
      : callable_(&f), call_([](const void* c) { (*static_cast<const F*>(c))(); }) {}
  void operator()() const { call_(callable_); }

 private:
  const void* callable_;
  void (*call_)(const void*);
};

class Spawner {
 public:
  virtual ~Spawner() = default;
  /// A child process running `in_child`; its pid, for the caller to wait for. Errors: kIo (fork).
  virtual Result<pid_t> Start(InChild in_child) = 0;
  /// A process nobody waits for, outliving the caller: a child runs `first` (say, to drop
  /// privileges; it may _exit to give up), leaves the caller's session, starts a process running
  /// `in_child` and exits, so that process is init's (or the subreaper's) child. Returns once the
  /// first child has exited. Errors: kIo (fork).
  virtual Status StartDetached(InChild first, InChild in_child) = 0;
};

/// fork(2), and for a detached start fork, setsid, fork again.
class SystemSpawner final : public Spawner {
 public:
  Result<pid_t> Start(InChild in_child) override;
  Status StartDetached(InChild first, InChild in_child) override;
};

}  // namespace gpulane::os
