#include "util/config.h"
#include "util/config_daemon.h"
#include "util/config_toml.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <cstdlib>
#include <fmt/format.h>
#include <toml++/toml.h>

#include "util/did_you_mean.h"
#include "util/units.h"
#include "util/web_config.h"

namespace gpulane {
namespace {

// The files in order (docs/config.md), each on top of the one before.
Result<Config> ReadConfigFiles() {
  Config config;
  Status s = LoadConfigFile(kMachineConfigFile, true, config);
  if (!s.ok()) return s.error();
  std::string user_file;
  if (const char* explicit_file = std::getenv("GPULANE_CONFIG"); explicit_file && *explicit_file) {
    // A file the user named is meant to be read: one that is not there is an error, not "no settings".
    if (access(explicit_file, F_OK) != 0)
      return MakeError(ErrorKind::kInvalidArgument,
                       fmt::format("GPULANE_CONFIG={}: {}: create the file or unset GPULANE_CONFIG (docs/config.md)",
                                   explicit_file, std::strerror(errno)));
    user_file = explicit_file;
  } else if (const char* xdg = std::getenv("XDG_CONFIG_HOME"); xdg && *xdg) {
    user_file = std::string(xdg) + "/gpulane/config.toml";
  } else if (const char* home = std::getenv("HOME"); home && *home) {
    user_file = std::string(home) + "/.config/gpulane/config.toml";
  }
  // A user's file may set machine-wide keys only when it is root's own.
  if (!user_file.empty()) s = LoadConfigFile(user_file, geteuid() == 0, config);
  if (!s.ok()) return s.error();
  return config;
}

// [partitions.NAME] tables (docs/config.md); a file that has any replaces the earlier files' set.
Status LoadPartitions(const std::string& path, bool trusted, const toml::table& partitions, Config& config) {
  std::vector<PartitionConfig> loaded;
  for (auto&& [name, node] : partitions) {
    const std::string where = fmt::format("partitions.{}", name.str());
    if (!trusted) return ConfigBad(path, node.source(), where + " may only be set in /etc/gpulane/config.toml");
    auto table = node.as_table();
    if (!table) return ConfigBad(path, node.source(), fmt::format("{} must be a table: [{}] with gpus = [0, 1]", where, where));
    PartitionConfig p;
    p.name = std::string(name.str());
    bool has_gpus = false;
    for (auto&& [key, value] : *table) {
      const std::string k = fmt::format("{}.{}", where, key.str());
      if (key == "gpus") {
        auto list = value.as_array();
        if (!list || list->empty()) return ConfigBad(path, value.source(), k + " must be a list of GPU indices or UUIDs, e.g. [0, 1]");
        for (auto&& gpu : *list) {
          if (auto index = ConfigInteger(gpu); index && gpu.is_integer()) {
            if (*index < 0) return ConfigBad(path, gpu.source(), k + ": a GPU index is 0 or more");
            p.gpus.push_back(std::to_string(*index));
          } else if (auto uuid = gpu.value<std::string>(); uuid && !uuid->empty()) {
            p.gpus.push_back(*uuid);
          } else {
            return ConfigBad(path, gpu.source(), k + " must be a list of GPU indices or UUIDs, e.g. [0, 1]");
          }
        }
        has_gpus = true;
      } else if (key == "windows") {
        auto list = value.as_array();
        if (!list || list->empty()) return ConfigBad(path, value.source(), k + " must be a list like [\"Mon-Fri 08:00-20:00\"]");
        for (auto&& w : *list) {
          auto text = w.value<std::string>();
          if (!text) return ConfigBad(path, w.source(), k + " must be a list like [\"Mon-Fri 08:00-20:00\"]");
          auto window = ParseWeekWindow(*text);
          if (!window) return ConfigBad(path, w.source(), k + ": " + window.error().message);
          p.windows.push_back(*window);
        }
      } else if (key == "max_time_limit") {
        auto text = value.value<std::string>();
        auto seconds = text ? ParseDurationOrSecondsS(*text) : Result<double>(MakeError(ErrorKind::kInvalidArgument, "give a duration"));
        if (!seconds || !std::isfinite(*seconds) || *seconds <= 0)
          return ConfigBad(path, value.source(), k + " must be a positive duration like \"12h\"");
        p.max_time_limit_s = *seconds;
      } else if (key == "max_gpus_per_user") {
        auto n = ConfigInteger(value);
        if (!value.is_integer() || !n || *n < 1 || *n > 1024)
          return ConfigBad(path, value.source(), k + " must be an integer from 1 to 1024");
        p.max_gpus_per_user = static_cast<unsigned>(*n);
      } else if (key == "ends") {
        auto text = value.value<std::string>();
        if (text && *text == "none") p.ends = PartitionEnds::kNone;
        else if (text && *text == "stop") p.ends = PartitionEnds::kStop;
        else if (text && *text == "requeue") p.ends = PartitionEnds::kRequeue;
        else return ConfigBad(path, value.source(), k + " must be \"none\", \"stop\" or \"requeue\"");
      } else {
        static const std::vector<std::string> kKnown = {"gpus", "windows", "max_time_limit", "max_gpus_per_user", "ends"};
        return ConfigBad(path, value.source(), UnknownKeyMessage(where, key.str(), kKnown));
      }
    }
    if (!has_gpus) return ConfigBad(path, node.source(), where + " needs gpus = [...] (GPU indices or UUIDs)");
    loaded.push_back(std::move(p));
  }
  config.partitions = std::move(loaded);
  return Status::Ok();
}

// One table of limit values (`where`: "limits", "limits.users.alice") into `out`.
Status LoadLimitValues(const std::string& path, const std::string& where, const toml::table& table, LimitsConfig& out) {
  for (auto&& [key, node] : table) {
    const std::string name = fmt::format("{}.{}", where, key.str());
    if (key == "max_gpus" || key == "max_queued") {
      auto n = ConfigInteger(node);
      const std::int64_t most = key == "max_gpus" ? 1024 : 1000000;
      if (!n || *n < 0 || *n > most)
        return ConfigBad(path, node.source(), fmt::format("{} must be an integer from 0 to {}", name, most));
      if (key == "max_gpus") out.max_gpus = static_cast<unsigned>(*n);
      else out.max_queued = static_cast<std::size_t>(*n);
    } else if (key == "max_time_limit" || key == "default_time_limit") {
      auto text = node.value<std::string>();
      auto seconds = text ? ParseDurationOrSecondsS(*text) : Result<double>(MakeError(ErrorKind::kInvalidArgument, "not a string"));
      if (!seconds || !std::isfinite(*seconds) || *seconds <= 0 || *seconds > 365.0 * 86400)
        return ConfigBad(path, node.source(), fmt::format("{} must be a duration from 1s to 365d, like \"3d\"", name));
      (key == "max_time_limit" ? out.max_time_limit_s : out.default_time_limit_s) = *seconds;
    } else if (key == "max_gpu_hours_per_day") {
      auto hours = node.value<double>();
      if (!hours || !std::isfinite(*hours) || *hours <= 0 || *hours > 100000)
        return ConfigBad(path, node.source(), fmt::format("{} must be a number of GPU-hours above 0 and at most 100000, like 24", name));
      out.max_gpu_hours_per_day = *hours;
    } else if (where == "limits" && (key == "users" || key == "groups")) {
      continue;  // the tables of names, read by LoadLimits
    } else {
      std::vector<std::string> known = {"max_gpus", "max_queued", "max_time_limit", "default_time_limit", "max_gpu_hours_per_day"};
      if (where == "limits") known.insert(known.end(), {"users.NAME", "groups.NAME"});
      return ConfigBad(path, node.source(), UnknownKeyMessage(where, key.str(), known));
    }
  }
  if (out.max_time_limit_s && out.default_time_limit_s && *out.default_time_limit_s > *out.max_time_limit_s)
    return ConfigBad(path, table.source(), fmt::format("{}.default_time_limit is longer than its max_time_limit", where));
  return Status::Ok();
}

// [limits], [limits.users.NAME], [limits.groups.NAME] (machine's file only).
// [telemetry]: enabled, and durations within bounds (a sampler reading NVML 100 times a second, or
// history kept for centuries, is a mistake to refuse, not to obey). Any file may set them: only a
// daemon reads them, and a daemon reads its own user's files (root's for the system daemon).
Status LoadTelemetry(const std::string& path, const toml::table& telemetry, Config& config) {
  struct Duration {
    const char* key;
    double* target;
    double min_s, max_s;
    const char* range;
  };
  const Duration durations[] = {
      {"interval", &config.telemetry_interval_s, 0.1, 60, "from \"100ms\" to \"60s\""},
      {"keep_10s", &config.telemetry_keep_10s_s, 600, 30 * 86400, "from \"10m\" to \"30d\""},
      {"keep_1m", &config.telemetry_keep_1m_s, 3600, 3650 * 86400.0, "from \"1h\" to \"3650d\""},
      {"keep_records", &config.telemetry_keep_records_s, 86400, 3650 * 86400.0, "from \"1d\" to \"3650d\""},
  };
  for (auto&& [key, node] : telemetry) {
    if (key == "hpc_job_mapping_dir") {
      auto text = node.value<std::string>();
      if (!text || text->empty() || (*text)[0] != '/')
        return ConfigBad(path, node.source(), "telemetry.hpc_job_mapping_dir must be an absolute path, like \"/run/gpulane/jobs\"");
      config.telemetry_hpc_job_mapping_dir = *text;
      continue;
    }
    if (key == "enabled") {
      auto flag = node.value<bool>();
      if (!flag) return ConfigBad(path, node.source(), "telemetry.enabled must be true or false");
      config.telemetry_enabled = *flag;
      continue;
    }
    const Duration* d = nullptr;
    for (const auto& candidate : durations)
      if (key == candidate.key) d = &candidate;
    if (!d) {
      std::vector<std::string> known = {"enabled"};  // and the durations, and the folder read above
      for (const auto& candidate : durations) known.emplace_back(candidate.key);
      known.emplace_back("hpc_job_mapping_dir");
      return ConfigBad(path, node.source(), UnknownKeyMessage("telemetry", key.str(), known));
    }
    auto text = node.value<std::string>();
    auto seconds = text ? ParseDurationOrSecondsS(*text) : Result<double>(MakeError(ErrorKind::kInvalidArgument, "not a string"));
    if (!seconds || !std::isfinite(*seconds) || *seconds < d->min_s || *seconds > d->max_s)
      return ConfigBad(path, node.source(), fmt::format("telemetry.{} must be a duration {}", key.str(), d->range));
    *d->target = *seconds;
  }
  return Status::Ok();
}

// [anomaly]: each rule's threshold, within bounds. Read by daemons only (as [telemetry]).
Status LoadAnomaly(const std::string& path, bool trusted, const toml::table& anomaly, Config& config) {
  enum class Kind { kPercent, kDuration, kSize };
  struct Key {
    const char* name;
    Kind kind;
    double* seconds_or_pct;
    std::uint64_t* bytes;
    double min, max;
    const char* range;
  };
  const Key keys[] = {
      {"idle_util", Kind::kPercent, &config.anomaly_idle_util_pct, nullptr, 0, 100, "a percentage from 0 to 100"},
      {"idle_after", Kind::kDuration, &config.anomaly_idle_after_s, nullptr, 1, 7 * 86400, "a duration from \"1s\" to \"7d\""},
      {"stuck_util", Kind::kPercent, &config.anomaly_stuck_util_pct, nullptr, 50, 100, "a percentage from 50 to 100"},
      {"stuck_after", Kind::kDuration, &config.anomaly_stuck_after_s, nullptr, 600, 30 * 86400, "a duration from \"10m\" to \"30d\""},
      {"leak_window", Kind::kDuration, &config.anomaly_leak_window_s, nullptr, 300, 86400, "a duration from \"5m\" to \"1d\""},
      {"leak_min_growth", Kind::kSize, nullptr, &config.anomaly_leak_min_growth_bytes, 1 << 20, 1e15, "a size from 1MiB, like \"1GiB\""},
      {"ghost_min", Kind::kSize, nullptr, &config.anomaly_ghost_min_bytes, 1 << 20, 1e15, "a size from 1MiB, like \"2GiB\""},
      {"ghost_after", Kind::kDuration, &config.anomaly_ghost_after_s, nullptr, 1, 86400, "a duration from \"1s\" to \"1d\""},
      {"throttle_after", Kind::kDuration, &config.anomaly_throttle_after_s, nullptr, 1, 86400, "a duration from \"1s\" to \"1d\""},
      {"xid_clear_after", Kind::kDuration, &config.anomaly_xid_clear_after_s, nullptr, 1, 7 * 86400, "a duration from \"1s\" to \"7d\""},
      {"idle_cancel_after", Kind::kDuration, &config.anomaly_idle_cancel_after_s, nullptr, 1, 30 * 86400, "a duration from \"1s\" to \"30d\""},
  };
  for (auto&& entry : anomaly) {
    // Not a structured binding: clang 14 (the fuzz gate's compiler) cannot capture one in a lambda.
    const auto& name = entry.first;
    const auto& node = entry.second;
    if (name == "idle_action") {
      auto text = node.value<std::string>();
      if (!text || (*text != "warn" && *text != "cancel"))
        return ConfigBad(path, node.source(), "anomaly.idle_action must be \"warn\" or \"cancel\"");
      config.anomaly_idle_action = *text;
      continue;
    }
    if (name == "overuse_grace") {  // enforces a promise to other users: the machine's to set
      if (!trusted) return ConfigBad(path, node.source(), "anomaly.overuse_grace may only be set in /etc/gpulane/config.toml");
      auto text = node.value<std::string>();
      auto seconds = text ? ParseDurationOrSecondsS(*text) : Result<double>(MakeError(ErrorKind::kInvalidArgument, "not a string"));
      if (!seconds || !std::isfinite(*seconds) || *seconds < 0 || *seconds > 86400)
        return ConfigBad(path, node.source(), "anomaly.overuse_grace must be a duration from \"0s\" (warn only) to \"1d\", like \"10s\"");
      config.anomaly_overuse_grace_s = *seconds;
      continue;
    }
    const Key* key = nullptr;
    for (const auto& k : keys)
      if (name == k.name) key = &k;
    if (!key) {
      std::vector<std::string> known;  // the table's, and the two read above
      for (const auto& k : keys) known.emplace_back(k.name);
      known.insert(known.end(), {"idle_action", "overuse_grace"});
      return ConfigBad(path, node.source(), UnknownKeyMessage("anomaly", name.str(), known));
    }
    const auto bad = [&] { return ConfigBad(path, node.source(), fmt::format("anomaly.{} must be {}", name.str(), key->range)); };
    if (key->kind == Kind::kPercent) {
      auto v = node.value<double>();
      if (!v || !std::isfinite(*v) || *v < key->min || *v > key->max) return bad();
      *key->seconds_or_pct = *v;
      continue;
    }
    auto text = node.value<std::string>();
    if (!text) return bad();
    if (key->kind == Kind::kDuration) {
      auto seconds = ParseDurationOrSecondsS(*text);
      if (!seconds || !std::isfinite(*seconds) || *seconds < key->min || *seconds > key->max) return bad();
      *key->seconds_or_pct = *seconds;
    } else {
      auto bytes = ParseSizeBytes(*text);
      if (!bytes || static_cast<double>(*bytes) < key->min || static_cast<double>(*bytes) > key->max) return bad();
      *key->bytes = *bytes;
    }
  }
  return Status::Ok();
}

Status LoadLimits(const std::string& path, bool trusted, const toml::table& limits, Config& config) {
  if (!trusted) return ConfigBad(path, limits.source(), "limits may only be set in /etc/gpulane/config.toml");
  if (Status s = LoadLimitValues(path, "limits", limits, config.limits); !s.ok()) return s;
  for (const char* kind : {"users", "groups"}) {
    const toml::node* node = limits.get(kind);
    if (!node) continue;
    auto names = node->as_table();
    if (!names) return ConfigBad(path, node->source(), fmt::format("limits.{} must hold tables: [limits.{}.NAME]", kind, kind));
    auto& list = std::string(kind) == "users" ? config.user_limits : config.group_limits;
    for (auto&& [name, value] : *names) {
      const std::string where = fmt::format("limits.{}.{}", kind, name.str());
      auto table = value.as_table();
      if (!table) return ConfigBad(path, value.source(), fmt::format("{} must be a table: [{}] with max_gpus = 4", where, where));
      LimitsConfig values;
      if (Status s = LoadLimitValues(path, where, *table, values); !s.ok()) return s;
      list.emplace_back(std::string(name.str()), values);
    }
  }
  return Status::Ok();
}

}  // namespace

// Bounds of the [run] durations, so that no file (a user's own included) makes a waiter spin:
// nvml_poll 0.1 s .. 1 h; stray_check 0 (never) or 0.05 s .. 1 h; kill_grace at most 1 h.
static Status CheckRunBounds(std::string_view key, double seconds) {
  constexpr double kHourS = 3600;
  if (key == "nvml_poll" && (seconds < 0.1 || seconds > kHourS))
    return MakeError(ErrorKind::kInvalidArgument, fmt::format("run.nvml_poll = {:g}s is out of range: give 100ms to 1h", seconds));
  if (key == "stray_check" && seconds != 0 && (seconds < 0.05 || seconds > kHourS))
    return MakeError(ErrorKind::kInvalidArgument,
                     fmt::format("run.stray_check = {:g}s is out of range: give 0 (never) or 50ms to 1h", seconds));
  if (key == "kill_grace" && seconds > kHourS)
    return MakeError(ErrorKind::kInvalidArgument, fmt::format("run.kill_grace = {:g}s is out of range: give at most 1h", seconds));
  return Status::Ok();
}

// [submit] backend and [slurm] gpus_option, shard_memory, poll_interval (any config file: they
// only shape the user's own submissions).
Status LoadClusterSections(const std::string& path, const toml::table& table, Config& config) {
  if (auto submit = table["submit"].as_table()) {
    for (auto&& [key, node] : *submit) {
      if (key != "backend") return ConfigBad(path, node.source(), UnknownKeyMessage("submit", key.str(), {"backend"}));
      auto text = node.value<std::string>();
      if (!text || (*text != "local" && *text != "slurm"))
        return ConfigBad(path, node.source(), "submit.backend must be \"local\" (the gpulane daemon) or \"slurm\" (sbatch)");
      config.submit_backend = *text;
    }
  }
  if (auto slurm = table["slurm"].as_table()) {
    for (auto&& [key, node] : *slurm) {
      auto text = node.value<std::string>();
      if (key == "gpus_option") {
        if (!text || (*text != "gres" && *text != "gpus"))
          return ConfigBad(path, node.source(), "slurm.gpus_option must be \"gres\" (--gres=gpu:N) or \"gpus\" (--gpus=N)");
        config.slurm_gpus_option = *text;
      } else if (key == "shard_memory") {
        auto bytes = text ? ParseSizeBytes(*text) : Result<std::uint64_t>(MakeError(ErrorKind::kInvalidArgument, "give a size like \"10GiB\""));
        if (!bytes || *bytes == 0) return ConfigBad(path, node.source(), "slurm.shard_memory must be a size like \"10GiB\"");
        config.slurm_shard_memory_bytes = *bytes;
      } else if (key == "poll_interval") {
        auto seconds = text ? ParseDurationOrSecondsS(*text) : Result<double>(MakeError(ErrorKind::kInvalidArgument, "give a duration"));
        if (!seconds || *seconds < 1 || *seconds > 600)
          return ConfigBad(path, node.source(), "slurm.poll_interval must be a duration from \"1s\" to \"10m\"");
        config.slurm_poll_interval_s = *seconds;
      } else {
        return ConfigBad(path, node.source(), UnknownKeyMessage("slurm", key.str(), {"gpus_option", "shard_memory", "poll_interval"}));
      }
    }
  }
  return Status::Ok();
}

// [run] isolate and isolate_required: they protect other users' GPUs, so only the machine's file
// sets them.
Status SetIsolation(const std::string& path, bool trusted, std::string_view key, const toml::node& node, Config& config) {
  if (!trusted) return ConfigBad(path, node.source(), fmt::format("run.{} may only be set in /etc/gpulane/config.toml", key));
  if (key == "isolate_required") {
    auto required = node.value<bool>();
    if (!required) return ConfigBad(path, node.source(), "run.isolate_required must be true or false");
    config.isolate_required = *required;
    return Status::Ok();
  }
  auto mode = node.value<std::string>();
  if (!mode || (*mode != "devices" && *mode != "off"))
    return ConfigBad(path, node.source(), "run.isolate must be \"devices\" (jobs see only their GPUs) or \"off\"");
  config.isolate = *mode;
  return Status::Ok();
}

namespace {

// Every top-level key is a known section, and a table.
Status CheckSections(const std::string& path, const toml::table& table) {
  static const std::vector<std::string> kSections = {"lease",     "run",     "daemon", "sched",  "limits", "shares",         "telemetry",
                                                     "anomaly",   "notify",  "web",    "submit", "slurm",  "partitions.NAME"};
  for (auto&& [key, node] : table) {
    const std::string name(key.str());
    if (name != "partitions" && std::find(kSections.begin(), kSections.end(), name) == kSections.end())
      return ConfigBad(path, node.source(), node.is_table() ? UnknownSectionMessage(name, kSections) : UnknownKeyMessage("", name, kSections));
    if (!node.is_table()) return ConfigBad(path, node.source(), fmt::format("{} must be a section: [{}]", key.str(), key.str()));
  }
  return Status::Ok();
}

// [lease] dir and memory_margin: the machine's file only.
Status LoadLeaseTable(const std::string& path, bool trusted, const toml::table& lease, Config& config) {
  static const std::vector<std::string> kKeys = {"dir", "memory_margin"};
  for (auto&& [key, node] : lease) {
    if (std::find(kKeys.begin(), kKeys.end(), key.str()) == kKeys.end())
      return ConfigBad(path, node.source(), UnknownKeyMessage("lease", key.str(), kKeys));
    if (!trusted) return ConfigBad(path, node.source(), fmt::format("lease.{} may only be set in /etc/gpulane/config.toml", key.str()));
    auto text = node.value<std::string>();
    if (!text) return ConfigBad(path, node.source(), fmt::format("lease.{} must be a string", key.str()));
    if (key == "dir") {
      config.lease_dir = *text;
      continue;
    }
    auto bytes = ParseSizeBytes(*text);
    if (!bytes) return ConfigBad(path, node.source(), "lease.memory_margin: " + bytes.error().message);
    config.memory_margin_bytes = *bytes;
  }
  return Status::Ok();
}

// [notify] webhook, format, command (any file: they shape the user's own notifications).
Status LoadNotifyTable(const std::string& path, const toml::table& notify, Config& config) {
  static constexpr std::pair<std::string_view, std::string Config::*> kKeys[] = {
      {"webhook", &Config::notify_webhook}, {"format", &Config::notify_format}, {"command", &Config::notify_command}};
  for (auto&& [key, node] : notify) {
    std::string* target = nullptr;
    std::vector<std::string> known;
    for (const auto& [name, member] : kKeys) {
      if (key == name) target = &(config.*member);
      known.emplace_back(name);
    }
    if (!target) return ConfigBad(path, node.source(), UnknownKeyMessage("notify", key.str(), known));
    auto text = node.value<std::string>();
    if (!text) return ConfigBad(path, node.source(), fmt::format("notify.{} must be a string", key.str()));
    *target = *text;
  }
  if (!config.notify_webhook.empty() && config.notify_webhook.rfind("http://", 0) != 0 &&
      config.notify_webhook.rfind("https://", 0) != 0)
    return ConfigBad(path, notify["webhook"].node()->source(), "notify.webhook must be an http:// or https:// URL");
  if (config.notify_format != "json" && config.notify_format != "text")
    return ConfigBad(path, notify["format"].node()->source(), "notify.format must be \"json\" or \"text\"");
  return Status::Ok();
}

// A [run] duration key: kill_grace, nvml_poll, stray_check (a number of seconds or "10s").
Status SetRunDuration(const std::string& path, std::string_view key, const toml::node& node, double& target) {
  auto text = node.value<std::string>();
  auto number = node.value<double>();
  if (number) {
    target = *number;
  } else if (text) {
    auto seconds = ParseDurationOrSecondsS(*text);
    if (!seconds) return ConfigBad(path, node.source(), fmt::format("run.{}: {}", key, seconds.error().message));
    target = *seconds;
  } else {
    return ConfigBad(path, node.source(), fmt::format("run.{} must be a duration like \"10s\"", key));
  }
  if (!std::isfinite(target) || target < 0)
    return ConfigBad(path, node.source(), fmt::format("run.{} must be a duration like \"10s\", not negative", key));
  if (Status bounded = CheckRunBounds(key, target); !bounded.ok()) return ConfigBad(path, node.source(), bounded.error().message);
  return Status::Ok();
}

Status LoadRunTable(const std::string& path, bool trusted, const toml::table& run, Config& config) {
  static constexpr std::string_view kIsolationKeys[] = {"isolate", "isolate_required"};
  static constexpr std::pair<std::string_view, double Config::*> kDurationKeys[] = {
      {"kill_grace", &Config::kill_grace_s}, {"nvml_poll", &Config::nvml_poll_s}, {"stray_check", &Config::stray_check_s}};
  for (auto&& [key, node] : run) {
    if (key == kIsolationKeys[0] || key == kIsolationKeys[1]) {
      if (Status set = SetIsolation(path, trusted, key.str(), node, config); !set.ok()) return set;
      continue;
    }
    double* target = nullptr;
    std::vector<std::string> known(std::begin(kIsolationKeys), std::end(kIsolationKeys));
    for (const auto& [name, member] : kDurationKeys) {
      if (key == name) target = &(config.*member);
      known.emplace_back(name);
    }
    if (!target) return ConfigBad(path, node.source(), UnknownKeyMessage("run", key.str(), known));
    if (Status set = SetRunDuration(path, key.str(), node, *target); !set.ok()) return set;
  }
  return Status::Ok();
}

// [limits]: a file that has it replaces the earlier files' limits as a whole.
Status ReplaceLimits(const std::string& path, bool trusted, const toml::table& limits, Config& config) {
  Config fresh;
  config.limits = fresh.limits;
  config.user_limits.clear();
  config.group_limits.clear();
  return LoadLimits(path, trusted, limits, config);
}

// sched.default_partition names a [partitions.NAME] table of the files read so far.
Status CheckDefaultPartition(const std::string& path, const toml::table& table, const Config& config) {
  if (config.default_partition.empty()) return Status::Ok();
  for (const auto& p : config.partitions)
    if (p.name == config.default_partition) return Status::Ok();
  const toml::node* key = table["sched"]["default_partition"].node();
  return ConfigBad(path, key ? key->source() : table.source(),
             fmt::format("sched.default_partition = \"{}\": no [partitions.{}] table", config.default_partition,
                         config.default_partition));
}

// The sections in the order their errors are reported (the first wins).
Status LoadSections(const std::string& path, bool trusted, const toml::table& table, Config& config) {
  using Loader = Status (*)(const std::string&, bool, const toml::table&, Config&);
  const std::pair<const char*, Loader> kLoaders[] = {
      {"lease", LoadLeaseTable},
      {"daemon", LoadDaemonTable},
      {"partitions", LoadPartitions},
      {"telemetry", [](const std::string& p, bool, const toml::table& t, Config& c) { return LoadTelemetry(p, t, c); }},
      {"", [](const std::string& p, bool, const toml::table& t, Config& c) { return LoadClusterSections(p, t, c); }},
      {"notify", [](const std::string& p, bool, const toml::table& t, Config& c) { return LoadNotifyTable(p, t, c); }},
      {"anomaly", LoadAnomaly},
      {"web", [](const std::string& p, bool, const toml::table& t, Config& c) { return LoadWebTable(p, t, c); }},
      {"limits", ReplaceLimits},
      {"sched", LoadSchedTable},
      {"shares", LoadSharesTable},
  };
  for (const auto& [name, load] : kLoaders) {
    const toml::table* section = *name ? table[name].as_table() : &table;  // "": reads several sections itself
    if (!section) continue;
    if (Status s = load(path, trusted, *section, config); !s.ok()) return s;
  }
  if (Status s = CheckDefaultPartition(path, table, config); !s.ok()) return s;
  if (auto run = table["run"].as_table()) return LoadRunTable(path, trusted, *run, config);
  return Status::Ok();
}

}  // namespace

Status LoadConfigFile(const std::string& path, bool trusted, Config& config) {
  if (access(path.c_str(), F_OK) != 0) return Status::Ok();
  toml::table table;
  try {
    table = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    return ConfigBad(path, e.source(), std::string(e.description()));
  }
  if (Status s = CheckSections(path, table); !s.ok()) return s;
  return LoadSections(path, trusted, table, config);
}

Result<Config> LoadConfig() {
  static const Result<Config> loaded = ReadConfigFiles();
  return loaded;
}

}  // namespace gpulane
