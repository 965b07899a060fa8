// The [sched] and [shares] tables of the config files (docs/config.md): machine's file only.
#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "util/config_toml.h"
#include "util/did_you_mean.h"
#include "util/units.h"

namespace gpulane {
namespace {

// A duration key bounded by [min_s, max_s]: max_reserve_idle, max_unclaimed.
Status SetBoundedDuration(const std::string& path, const toml::node& node, double min_s, double max_s,
                          const char* error_line, double& out) {
  auto text = node.value<std::string>();
  auto seconds = text ? ParseDurationOrSecondsS(*text) : Result<double>(MakeError(ErrorKind::kInvalidArgument, "not a string"));
  if (!seconds || !std::isfinite(*seconds) || *seconds < min_s || *seconds > max_s) return ConfigBad(path, node.source(), error_line);
  out = *seconds;
  return Status::Ok();
}

// A whole number key from 0 to `max`: max_preemptions_per_job, max_preemptions_per_minute.
Status SetCount(const std::string& path, const toml::node& node, std::int64_t max, const char* error_line, unsigned& out) {
  auto count = ConfigInteger(node);
  if (!count || *count < 0 || *count > max) return ConfigBad(path, node.source(), error_line);
  out = static_cast<unsigned>(*count);
  return Status::Ok();
}

// fair_share_half_life, priority_max_age: a duration ("1d", "12h") or seconds; at least one
// minute, at most a year.
Status SetFairShareDuration(const std::string& path, std::string_view key, const toml::node& node, double& out) {
  std::optional<double> seconds = node.value<double>();
  if (auto text = node.value<std::string>()) {
    auto parsed = ParseDurationOrSecondsS(*text);
    if (!parsed) return ConfigBad(path, node.source(), fmt::format("sched.{}: {}", key, parsed.error().message));
    seconds = *parsed;
  }
  if (!seconds || !std::isfinite(*seconds) || *seconds < 60 || *seconds > 366.0 * 86400)
    return ConfigBad(path, node.source(), fmt::format("sched.{} must be a duration from 1min to 366d, like \"1d\"", key));
  out = *seconds;
  return Status::Ok();
}

// priority_weight_fair_share, priority_weight_age: 0 to 1,000,000.
Status SetWeight(const std::string& path, std::string_view key, const toml::node& node, double& out) {
  auto weight = node.value<double>();
  if (!weight || !std::isfinite(*weight) || *weight < 0 || *weight > 1e6)
    return ConfigBad(path, node.source(), fmt::format("sched.{} must be a number from 0 to 1000000, like 1.0", key));
  out = *weight;
  return Status::Ok();
}

Status SetPolicy(const std::string& path, const toml::node& node, Config& config) {
  auto text = node.value<std::string>();
  const bool known = text && std::any_of(std::begin(kSchedPolicyNames), std::end(kSchedPolicyNames),
                                         [&](const char* name) { return *text == name; });
  if (!known) return ConfigBad(path, node.source(), "sched.policy must be \"default\", \"easy\", \"fifo\" or \"firstfit\" (docs/config.md)");
  config.sched_policy = *text;
  return Status::Ok();
}

// The [sched] keys, in the order an unknown key's error lists them, each with its reader.
using SchedKeySetter = Status (*)(const std::string& path, std::string_view key, const toml::node& node, Config& config);
constexpr std::pair<std::string_view, SchedKeySetter> kSchedKeys[] = {
    {"default_partition",
     [](const std::string& path, std::string_view, const toml::node& node, Config& config) {
       auto text = node.value<std::string>();
       if (!text || text->empty()) return Status(ConfigBad(path, node.source(), "sched.default_partition must be the name of a [partitions.NAME] table"));
       config.default_partition = *text;
       return Status::Ok();
     }},
    {"policy", [](const std::string& path, std::string_view, const toml::node& node, Config& config) { return SetPolicy(path, node, config); }},
    {"max_reserve_idle",
     [](const std::string& path, std::string_view, const toml::node& node, Config& config) {
       return SetBoundedDuration(path, node, 0, 86400, "sched.max_reserve_idle must be a duration from \"0s\" to \"1d\", like \"10m\"",
                                 config.max_reserve_idle_s);
     }},
    {"max_unclaimed",
     [](const std::string& path, std::string_view, const toml::node& node, Config& config) {
       return SetBoundedDuration(path, node, 1, 3600, "sched.max_unclaimed must be a duration from \"1s\" to \"1h\", like \"30s\"",
                                 config.max_unclaimed_s);
     }},
    {"max_preemptions_per_job",
     [](const std::string& path, std::string_view, const toml::node& node, Config& config) {
       return SetCount(path, node, 1000, "sched.max_preemptions_per_job must be a whole number from 0 to 1000, like 3",
                       config.max_preemptions_per_job);
     }},
    {"max_preemptions_per_minute",
     [](const std::string& path, std::string_view, const toml::node& node, Config& config) {
       return SetCount(path, node, 100000, "sched.max_preemptions_per_minute must be a whole number from 0 to 100000, like 30",
                       config.max_preemptions_per_minute);
     }},
    {"fair_share_half_life",
     [](const std::string& path, std::string_view key, const toml::node& node, Config& config) {
       return SetFairShareDuration(path, key, node, config.fair_share_half_life_s);
     }},
    {"priority_weight_fair_share",
     [](const std::string& path, std::string_view key, const toml::node& node, Config& config) {
       return SetWeight(path, key, node, config.priority_weight_fair_share);
     }},
    {"priority_weight_age",
     [](const std::string& path, std::string_view key, const toml::node& node, Config& config) {
       return SetWeight(path, key, node, config.priority_weight_age);
     }},
    {"priority_max_age",
     [](const std::string& path, std::string_view key, const toml::node& node, Config& config) {
       return SetFairShareDuration(path, key, node, config.priority_max_age_s);
     }},
};

// A misspelt key is said as one before the user's file is refused the section.
Status SetSchedKey(const std::string& path, bool trusted, std::string_view key, const toml::node& node, Config& config) {
  std::vector<std::string> known;
  for (const auto& [name, set] : kSchedKeys) {
    if (key != name) {
      known.emplace_back(name);
      continue;
    }
    if (!trusted) return ConfigBad(path, node.source(), fmt::format("sched.{} may only be set in /etc/gpulane/config.toml", key));
    return set(path, key, node, config);
  }
  return ConfigBad(path, node.source(), UnknownKeyMessage("sched", key, known));
}

}  // namespace

Status LoadSchedTable(const std::string& path, bool trusted, const toml::table& sched, Config& config) {
  for (auto&& [key, node] : sched)
    if (Status s = SetSchedKey(path, trusted, key.str(), node, config); !s.ok()) return s;
  return Status::Ok();
}

Status LoadSharesTable(const std::string& path, bool trusted, const toml::table& shares, Config& config) {
  std::map<std::string, double> loaded;
  for (auto&& [key, node] : shares) {
    if (!trusted) return ConfigBad(path, node.source(), fmt::format("shares.{} may only be set in /etc/gpulane/config.toml", key.str()));
    auto share = node.value<double>();
    if (!share || !std::isfinite(*share) || *share <= 0 || *share > 1e6)
      return ConfigBad(path, node.source(),
                       fmt::format("shares.{} must be a number above 0 and at most 1000000, like 2 (unlisted users have 1)", key.str()));
    if (key.str().empty() || key.str() == "@") return ConfigBad(path, node.source(), "a [shares] key must be a user name or \"@group\"");
    loaded[std::string(key.str())] = *share;
  }
  config.shares = std::move(loaded);
  return Status::Ok();
}

}  // namespace gpulane
