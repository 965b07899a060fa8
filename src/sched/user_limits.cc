#include "sched/user_limits.h"

#include <algorithm>

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
  // A default over the user's own maximum (set at another level) is clipped to it.
  if (out.max_time_limit_s && out.default_time_limit_s)
    out.default_time_limit_s = std::min(*out.default_time_limit_s, *out.max_time_limit_s);
  return out;
}

bool AnyLimits(const Config& config) {
  auto set = [](const LimitsConfig& l) { return l.max_gpus || l.max_queued || l.max_time_limit_s || l.default_time_limit_s; };
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

}  // namespace gpulane::sched
