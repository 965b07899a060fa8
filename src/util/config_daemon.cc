#include "util/config_daemon.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "util/config_toml.h"
#include "util/did_you_mean.h"
#include "util/units.h"

namespace gpulane {
namespace {

// daemon.history_min_free: "256MiB" (a size, 0 allowed: history always stored) or "5%" (of the
// state folder's file system, 0 to 100).
Status LoadHistoryMinFree(const toml::node& node, Config& config) {
  const char* what = "daemon.history_min_free must be a size (\"256MiB\", \"10GiB\") or a percentage of the file "
                     "system from \"0%\" to \"100%\"";
  auto text = node.value<std::string>();
  if (!text || !node.is_string()) return MakeError(ErrorKind::kInvalidArgument, what);
  std::string_view t = *text;
  while (!t.empty() && t.back() == ' ') t.remove_suffix(1);
  if (!t.empty() && t.back() == '%') {
    t.remove_suffix(1);
    double pct = 0;
    const std::string number(t);
    std::size_t used = 0;
    try {
      pct = std::stod(number, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (number.empty() || used != number.size() || !std::isfinite(pct) || pct < 0 || pct > 100)
      return MakeError(ErrorKind::kInvalidArgument, what);
    config.daemon_history_min_free_pct = pct;
    config.daemon_history_min_free_bytes.reset();
    return Status::Ok();
  }
  auto bytes = ParseSizeBytes(t);
  if (!bytes) return MakeError(ErrorKind::kInvalidArgument, what);
  config.daemon_history_min_free_bytes = *bytes;
  config.daemon_history_min_free_pct.reset();
  return Status::Ok();
}

}  // namespace

Status LoadDaemonTable(const std::string& path, bool trusted, const toml::table& daemon, Config& config) {
  static const std::vector<std::string> kKnown = {"admin_group", "max_waiting", "show_commands", "mode", "keep_finished", "history_min_free"};
  for (auto&& [key, node] : daemon) {
    // A misspelt key is said as one before the user's file is refused the section.
    if (std::find(kKnown.begin(), kKnown.end(), key.str()) == kKnown.end())
      return ConfigBad(path, node.source(), UnknownKeyMessage("daemon", key.str(), kKnown));
    if (!trusted) return ConfigBad(path, node.source(), fmt::format("daemon.{} may only be set in /etc/gpulane/config.toml", key.str()));
    if (key == "admin_group") {
      auto text = node.value<std::string>();
      if (!text) return ConfigBad(path, node.source(), "daemon.admin_group must be a group name");
      config.admin_group = *text;
    } else if (key == "max_waiting") {
      auto n = ConfigInteger(node);
      if (!n || *n < 1 || *n > 100000)
        return ConfigBad(path, node.source(), "daemon.max_waiting must be an integer from 1 to 100000");
      config.max_waiting_supervisors = static_cast<unsigned>(*n);
    } else if (key == "show_commands") {
      auto flag = node.value<bool>();
      if (!flag || !node.is_boolean()) return ConfigBad(path, node.source(), "daemon.show_commands must be true or false");
      config.daemon_show_commands = *flag;
    } else if (key == "mode") {
      auto text = node.value<std::string>();
      if (!text || (*text != "auto" && *text != "system" && *text != "user"))
        return ConfigBad(path, node.source(), "daemon.mode must be \"auto\", \"system\" or \"user\"");
      config.daemon_mode = *text;
    } else if (key == "keep_finished") {
      // "forever" (or 0): never removed; else a duration (docs/config.md, "Retention").
      auto text = node.value<std::string>();
      auto seconds = !text ? Result<double>(MakeError(ErrorKind::kInvalidArgument, "not a string"))
                     : *text == "forever" ? Result<double>(0.0)
                                          : ParseDurationOrSecondsS(*text);
      if (!seconds || !std::isfinite(*seconds) || (*seconds != 0 && (*seconds < 1 || *seconds > 3650 * 86400.0)))
        return ConfigBad(path, node.source(), "daemon.keep_finished must be a duration from \"1s\" to \"3650d\", or \"forever\"");
      config.daemon_keep_finished_s = *seconds;
    } else if (key == "history_min_free") {
      // A size ("256MiB") or a percentage of the file system ("5%"): docs/config.md, "Retention".
      if (Status s = LoadHistoryMinFree(node, config); !s.ok())
        return ConfigBad(path, node.source(), s.error().message);
    } else {
      return ConfigBad(path, node.source(), UnknownKeyMessage("daemon", key.str(), kKnown));  // kKnown and this chain disagree
    }
  }
  return Status::Ok();
}

}  // namespace gpulane
