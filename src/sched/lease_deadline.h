#pragma once
// When a live lease must end (issue 23, item 9: limits without holes). Pure, like the rest of
// sched/: the lease's own side (`gpulane run`, a queued job's supervisor, `gpulane _lease`) and the
// daemon's watch of the lease directory (daemon/time_limit_watch.h) decide with the same rules.
//
// Rules:
//  - A lease's time limit is the one its job asked for (--time-limit; a lease file's
//    time_limit_s), at most its owner's limits.max_time_limit; a lease without one gets her
//    limits.default_time_limit, as a submission does (sched::ApplyTimeLimits); without one it has
//    none (root never has one). What a lease file says is its owner's word: she can make her own
//    limit shorter, never longer than the machine's [limits] allow.
//  - Its start is the earliest moment it is known to have existed: its started_s as written, or
//    the watcher's first sight of it when that is earlier (a lease cannot make itself younger than
//    the first time it was seen).
//  - The lease's own side stops its job at start + limit (SIGTERM, then SIGKILL after the kill
//    grace). A watcher outside the job (the daemon) acts only when that side has had its turn and
//    failed (killed, stopped, gone): at start + limit + grace + kOutsideSlackS it sends SIGTERM to
//    the lease's processes, and SIGKILL to those still there one grace later. The lease ends when
//    the last process holding it is gone.
#include <optional>
#include <string>

#include "util/config.h"

namespace gpulane::sched {

/// How long after the job's own side should have killed it (limit + grace) a watcher outside it
/// steps in: time for that side's SIGKILL, its own clean-up (it checks that the driver let go of
/// the job's memory, up to a second) and a loaded machine, seconds.
inline constexpr double kOutsideSlackS = 3.0;

/// The time limit that applies to a lease that asked for `asked_s` (nullopt: none) under its
/// owner's `limits` (sched::LimitsOf); nullopt: none applies. `*source` (when given) names where
/// it comes from: "--time-limit", "limits.max_time_limit" or "limits.default_time_limit".
std::optional<double> EnforcedTimeLimitS(std::optional<double> asked_s, const LimitsConfig& limits,
                                         std::string* source = nullptr);

/// When an outside watcher acts on one lease.
struct LeaseDeadline {
  double limit_s = 0;     ///< the enforced time limit (EnforcedTimeLimitS)
  double start_s = 0;     ///< the earliest moment the lease is known to have existed
  double term_at_s = 0;   ///< SIGTERM to its processes from then on
  std::string source;     ///< where the limit comes from (EnforcedTimeLimitS)
};

/// The deadline of a lease that says it started at `started_s` and asked for `asked_s`, first seen
/// by the watcher at `first_seen_s`, under its owner's `limits`, with the job's kill grace
/// `kill_grace_s`; nullopt when no limit applies.
std::optional<LeaseDeadline> OutsideDeadline(double started_s, std::optional<double> asked_s, double first_seen_s,
                                             const LimitsConfig& limits, double kill_grace_s);

/// What an outside watcher does at `now_s` to a lease with `deadline`, which it sent SIGTERM at
/// `termed_at_s` (nullopt: not yet).
enum class LimitAction { kNone, kTerm, kKill };
LimitAction ActionAt(const LeaseDeadline& deadline, double now_s, std::optional<double> termed_at_s, double kill_grace_s);

}  // namespace gpulane::sched
