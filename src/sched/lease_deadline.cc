#include "sched/lease_deadline.h"

#include <algorithm>
#include <cmath>

namespace gpulane::sched {

std::optional<double> EnforcedTimeLimitS(std::optional<double> asked_s, const LimitsConfig& limits, std::string* source) {
  auto say = [&](const char* where) {
    if (source) *source = where;
  };
  if (asked_s && !(std::isfinite(*asked_s) && *asked_s > 0)) asked_s.reset();  // no limit a lease could mean
  if (asked_s) {
    if (limits.max_time_limit_s && *limits.max_time_limit_s < *asked_s) {
      say("limits.max_time_limit");
      return limits.max_time_limit_s;
    }
    say("--time-limit");
    return asked_s;
  }
  if (limits.default_time_limit_s) {
    say("limits.default_time_limit");
    return limits.max_time_limit_s ? std::min(*limits.default_time_limit_s, *limits.max_time_limit_s)
                                   : *limits.default_time_limit_s;
  }
  return std::nullopt;  // as at submission: max_time_limit bounds a --time-limit, it is not one

}

std::optional<LeaseDeadline> OutsideDeadline(double started_s, std::optional<double> asked_s, double first_seen_s,
                                             const LimitsConfig& limits, double kill_grace_s) {
  LeaseDeadline d;
  auto limit = EnforcedTimeLimitS(asked_s, limits, &d.source);
  if (!limit) return std::nullopt;
  d.limit_s = *limit;
  d.start_s = std::isfinite(started_s) ? std::min(started_s, first_seen_s) : first_seen_s;
  d.term_at_s = d.start_s + d.limit_s + std::max(0.0, kill_grace_s) + kOutsideSlackS;
  return d;
}

LimitAction ActionAt(const LeaseDeadline& deadline, double now_s, std::optional<double> termed_at_s, double kill_grace_s) {
  if (!termed_at_s) return now_s >= deadline.term_at_s ? LimitAction::kTerm : LimitAction::kNone;
  return now_s >= *termed_at_s + std::max(0.0, kill_grace_s) ? LimitAction::kKill : LimitAction::kNone;
}

}  // namespace gpulane::sched
