#include "sched/user_limits.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>

#include "util/strings.h"
#include "util/units.h"

namespace gpulane::sched {

namespace {

// `field` of the first table that sets it: the user's, then the groups' in file order, then [limits].
template <typename T>
std::optional<T> Pick(const Config& config, const std::string& user, const std::vector<std::string>& groups,
                      std::optional<T> LimitsConfig::*field) {
  for (const auto& [name, values] : config.user_limits)
    if (name == user && values.*field) return values.*field;
  for (const auto& [name, values] : config.group_limits)
    if (values.*field && std::find(groups.begin(), groups.end(), name) != groups.end()) return values.*field;
  return config.limits.*field;
}

}  // namespace

LimitsConfig LimitsOf(const Config& config, std::uint32_t uid, const std::string& user, const std::vector<std::string>& groups) {
  LimitsConfig out;
  if (uid == 0) return out;
  out.max_gpus = Pick(config, user, groups, &LimitsConfig::max_gpus);
  out.max_queued = Pick(config, user, groups, &LimitsConfig::max_queued);
  out.max_time_limit_s = Pick(config, user, groups, &LimitsConfig::max_time_limit_s);
  out.default_time_limit_s = Pick(config, user, groups, &LimitsConfig::default_time_limit_s);
  out.max_gpu_hours_per_day = Pick(config, user, groups, &LimitsConfig::max_gpu_hours_per_day);
  // A default over the user's own maximum (set at another level) is clipped to it.
  if (out.max_time_limit_s && out.default_time_limit_s)
    out.default_time_limit_s = std::min(*out.default_time_limit_s, *out.max_time_limit_s);
  return out;
}

bool AnyLimits(const Config& config) {
  auto set = [](const LimitsConfig& l) {
    return l.max_gpus || l.max_queued || l.max_time_limit_s || l.default_time_limit_s || l.max_gpu_hours_per_day;
  };
  if (set(config.limits)) return true;
  for (const auto& [name, values] : config.user_limits)
    if (set(values)) return true;
  for (const auto& [name, values] : config.group_limits)
    if (set(values)) return true;
  return false;
}

Status ApplyTimeLimits(const LimitsConfig& limits, const std::string& user, Request& request) {
  if (!request.time_limit_s) {
    if (limits.default_time_limit_s) request.time_limit_s = *limits.default_time_limit_s;
    return Status::Ok();
  }
  if (limits.max_time_limit_s && *request.time_limit_s > *limits.max_time_limit_s)
    return MakeError(ErrorKind::kInvalidArgument,
                     StrCat("--time-limit ", FormatSeconds(*request.time_limit_s), ": ", user, " may ask for at most ",
                            FormatSeconds(*limits.max_time_limit_s), " (limits.max_time_limit): ask for less"));
  return Status::Ok();
}

Status CheckQueuedLimit(const LimitsConfig& limits, const std::string& user, std::size_t unfinished, std::size_t adding) {
  if (!limits.max_queued || unfinished + adding <= *limits.max_queued) return Status::Ok();
  return MakeError(ErrorKind::kOverLimit,
                   StrCat(user, " has ", unfinished, " unfinished queued job", unfinished == 1 ? "" : "s", "; ",
                          adding == 1 ? std::string("one more") : StrCat(adding, " more"), " would pass the limit of ",
                          *limits.max_queued, " (limits.max_queued): wait for some to end, or cancel some"));
}

std::optional<std::string> GpuLimitReason(const LimitsConfig& limits, const std::string& user, unsigned in_use, unsigned asked) {
  if (!limits.max_gpus || in_use + asked <= *limits.max_gpus) return std::nullopt;
  return StrCat(user, " holds ", in_use, " GPU", in_use == 1 ? "" : "s", " of the ", *limits.max_gpus,
                " limits.max_gpus allows");
}

Status CheckGpuLimitEver(const LimitsConfig& limits, const std::string& user, unsigned asked) {
  if (!limits.max_gpus || asked <= *limits.max_gpus) return Status::Ok();
  return MakeError(ErrorKind::kInvalidArgument, StrCat("-g ", asked, ": ", user, " may hold at most ", *limits.max_gpus,
                                                       " GPUs at once (limits.max_gpus): ask for fewer"));
}

namespace {

// A record's run as [start, end] clipped to end at `now_s` at the latest (nullopt end: running).
std::pair<double, std::optional<double>> RunOf(const UsageRecord& r, double now_s) {
  const double start = std::min(r.start_s, now_s);
  if (!r.end_s) return {start, std::nullopt};
  return {start, std::max(start, std::min(*r.end_s, now_s))};
}

// GPU-hours used, for people: "24.3", "1.00", "0.000556"; a limit as the admin wrote it (`as_set`): "24".
std::string GpuHoursText(double gpu_hours, bool as_set = false) {
  char text[64];
  if (as_set) std::snprintf(text, sizeof text, "%g", gpu_hours);
  else if (gpu_hours >= 10) std::snprintf(text, sizeof text, "%.1f", gpu_hours);
  else std::snprintf(text, sizeof text, "%#.3g", gpu_hours);  // "1.00", not "1"
  return text;
}

}  // namespace

double WindowUsageGpuS(const UsageRecord& record, double now_s, double window_s) {
  if (!(record.gpus > 0)) return 0;
  const auto [start, end] = RunOf(record, now_s);
  const double overlap = end.value_or(now_s) - std::max(start, now_s - window_s);
  return overlap > 0 ? record.gpus * overlap : 0;
}

std::optional<double> WindowUsageBelowInS(std::span<const UsageRecord> records, double limit_gpu_s, double now_s,
                                          double window_s) {
  // The usage at a time t >= now_s is piecewise linear in t. Each record adds its GPUs to the slope
  // while the window's start passes through its run (an ended record loses usage) or while it runs
  // and its start is inside the window (a running record gains): the slope changes only at start +
  // window_s and end + window_s. Swept from now_s, in order of those times.
  double used = 0, slope = 0;
  std::vector<std::pair<double, double>> changes;  // (time, slope change)
  for (const UsageRecord& r : records) {
    if (!(r.gpus > 0)) continue;
    used += WindowUsageGpuS(r, now_s, window_s);
    const auto [start, end] = RunOf(r, now_s);
    const double from = now_s - window_s;  // the window's start at now_s
    if (!end) {
      if (from < start) {
        slope += r.gpus;
        changes.emplace_back(start + window_s, -r.gpus);
      }
    } else if (from < start) {
      changes.emplace_back(start + window_s, -r.gpus);
      changes.emplace_back(*end + window_s, r.gpus);
    } else if (from < *end) {
      slope -= r.gpus;
      changes.emplace_back(*end + window_s, r.gpus);
    }
  }
  if (used < limit_gpu_s) return 0.0;
  std::sort(changes.begin(), changes.end());
  double t = now_s;
  for (const auto& [at, change] : changes) {
    const double next = used + slope * (at - t);
    if (slope < 0 && next < limit_gpu_s) return t + (used - limit_gpu_s) / -slope - now_s;
    used = next;
    t = at;
    slope += change;
  }
  return std::nullopt;  // the slope is 0 after the last change
}

std::optional<std::string> GpuHoursLimitReason(const LimitsConfig& limits, const std::string& user, double used_gpu_s,
                                               std::optional<double> next_in_s) {
  if (!limits.max_gpu_hours_per_day || used_gpu_s < *limits.max_gpu_hours_per_day * 3600) return std::nullopt;
  std::string out = StrCat(user, " used ", GpuHoursText(used_gpu_s / 3600), " of the ",
                           GpuHoursText(*limits.max_gpu_hours_per_day, /*as_set=*/true),
                           " GPU-hours limits.max_gpu_hours_per_day allows in the last 24 h");
  if (next_in_s && std::isfinite(*next_in_s))
    out += StrCat("; ", user, "'s next job can start in about ", FormatSeconds(std::max(1.0, *next_in_s)));
  return out;
}

}  // namespace gpulane::sched
