#pragma once
// The daemon's timings: how long it waits for things before acting. The defaults are what a
// machine runs with; tests (and people tuning a daemon) shorten them through environment
// variables read by `gpulane daemon` alone (docs/config.md, "Test and tuning knobs").
#include <functional>
#include <string>

#include "proto/wire.h"
#include "util/result.h"

namespace gpulane::daemon {

/// Timings of one daemon.
struct DaemonSettings {
  /// A launched job whose supervisor has neither taken the job's lock nor reported after this
  /// long is given back to the line (its supervisor is taken to be lost). Too short, and a
  /// supervisor that is merely slow to start is started a second time (the job's lock still
  /// keeps the two from both running it).
  double requeue_grace_s = 10;
  /// A client that has sent part of a request gets a time-out error after this long without a
  /// byte more, and is disconnected.
  double read_timeout_s = proto::kReadTimeoutS;
  /// How often the daemon checks supervisors' liveness and clients' read time-outs (status
  /// changes and requests are handled as they come, not on the tick).
  double tick_s = 1;
};

/// Bounds of the environment variables below (seconds, inclusive).
inline constexpr double kMinRequeueGraceS = 0.1, kMaxRequeueGraceS = 3600;
inline constexpr double kMinReadTimeoutS = 0.1, kMaxReadTimeoutS = 600;
inline constexpr double kMinTickS = 0.01, kMaxTickS = 10;

/// The defaults, changed by GPULANE_DAEMON_REQUEUE_GRACE, GPULANE_DAEMON_READ_TIMEOUT and
/// GPULANE_DAEMON_TICK when set (durations as util/units.h reads them: "0.5", "500ms", "2s").
/// `getenv` looks a variable up (nullptr: unset); by default std::getenv. Errors: kInvalidArgument naming the variable,
/// its value and the allowed range, when a value cannot be read or lies outside the bounds above.
using EnvLookup = std::function<const char*(const char* name)>;
Result<DaemonSettings> SettingsFromEnvironment(const EnvLookup& getenv = {});

}  // namespace gpulane::daemon
