#pragma once
// The daemon's timings: how long it waits for things before acting. The defaults are what a
// machine runs with; tests (and people tuning a daemon) shorten them through environment
// variables read by `gpulane daemon` alone (docs/config.md, "Test and tuning knobs").
#include <cstddef>
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
  /// A client whose request is not complete this long after its first byte arrived gets a
  /// time-out error and is disconnected (a deadline: bytes trickling in do not extend it).
  double read_timeout_s = proto::kReadTimeoutS;
  /// A connection with nothing under way (no part of a request, no request being answered, no
  /// wait, no reply left to write) is closed after this long without traffic (seconds).
  double idle_timeout_s = 300;
  /// Connections one uid may hold at once (root is exempt: admins can always get in); the next
  /// one gets a `unavailable` error and is closed.
  std::size_t max_connections_per_uid = 64;
  /// Connections of all users at once; the daemon lowers it to its RLIMIT_NOFILE minus
  /// kFdMargin. The last kRootReserve of them are kept for root.
  std::size_t max_connections = 1024;
  /// Bytes of unanswered request data (partial frames, and requests waiting behind a streamed
  /// reply) that all connections together may hold; over it, the connection holding the most is
  /// answered with an error and closed. At least proto::kMaxRequestBytes, so that one whole
  /// request always fits.
  std::size_t partial_budget_bytes = 64u << 20;
  /// How often the daemon checks supervisors' liveness and clients' read time-outs (status
  /// changes and requests are handled as they come, not on the tick).
  double tick_s = 1;
  /// How long a write to the job store waits for another process's lock before it counts as
  /// failed (seconds; later retries wait JobTableLimits::retry_busy_timeout_ms). The loop waits
  /// meanwhile, so it is short: a failed write is kept and retried, and a refused submission is
  /// told so at once.
  double store_busy_timeout_s = 0.25;
  /// At its start, the daemon loads its unfinished jobs for up to this long before it listens
  /// (seconds): a store of up to about 100,000 unfinished jobs is loaded before any client is
  /// answered, as it always was; a larger one goes on loading in parts, clients answered in
  /// between (ping says how far; the job commands are refused as "still loading" until done).
  double load_before_listen_s = 0.5;
  /// Unfinished jobs read from the store in one part (one query) at the start.
  std::size_t load_part_rows = 2000;
};

/// Descriptors the daemon keeps for itself besides client connections (store, inotify, logs,
/// a supervisor's launch): max_connections is at most RLIMIT_NOFILE minus this.
inline constexpr std::size_t kFdMargin = 64;
/// Connections of max_connections that only root may take.
inline constexpr std::size_t kRootReserve = 8;

/// Bounds of the environment variables below (seconds, counts, bytes; inclusive).
inline constexpr double kMinRequeueGraceS = 0.1, kMaxRequeueGraceS = 3600;
inline constexpr double kMinReadTimeoutS = 0.1, kMaxReadTimeoutS = 600;
inline constexpr double kMinTickS = 0.01, kMaxTickS = 10;
inline constexpr double kMinIdleTimeoutS = 0.1, kMaxIdleTimeoutS = 86400;
inline constexpr double kMinStoreBusyTimeoutS = 0.01, kMaxStoreBusyTimeoutS = 60;
inline constexpr double kMinLoadBeforeListenS = 0, kMaxLoadBeforeListenS = 3600;
inline constexpr std::size_t kMinConnections = 1, kMaxConnections = 1u << 20;
inline constexpr std::size_t kMinLoadPartRows = 1, kMaxLoadPartRows = 1u << 20;
inline constexpr std::size_t kMinPartialBudgetBytes = proto::kMaxRequestBytes, kMaxPartialBudgetBytes = std::size_t{64} << 30;

/// The defaults, changed by GPULANE_DAEMON_REQUEUE_GRACE, GPULANE_DAEMON_READ_TIMEOUT,
/// GPULANE_DAEMON_TICK, GPULANE_DAEMON_IDLE_TIMEOUT, GPULANE_DAEMON_STORE_BUSY_TIMEOUT and GPULANE_DAEMON_LOAD_BEFORE_LISTEN (durations as util/units.h reads them:
/// "0.5", "500ms", "2s"), GPULANE_DAEMON_MAX_CONNECTIONS, GPULANE_DAEMON_MAX_CONNECTIONS_PER_UID
/// and GPULANE_DAEMON_LOAD_PART_ROWS (counts) and GPULANE_DAEMON_PARTIAL_BUDGET (a size: "64MiB") when set.
/// `getenv` looks a variable up (nullptr: unset); by default std::getenv. Errors: kInvalidArgument naming the variable,
/// its value and the allowed range, when a value cannot be read or lies outside the bounds above.
using EnvLookup = std::function<const char*(const char* name)>;
Result<DaemonSettings> SettingsFromEnvironment(const EnvLookup& getenv = {});

}  // namespace gpulane::daemon
