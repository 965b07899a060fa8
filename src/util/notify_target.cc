#include "util/notify_target.h"

#include <algorithm>
#include <sstream>

#include <fmt/format.h>

#include "util/json_tree_writer.h"

namespace gpulane {

using nlohmann::json;

Result<std::vector<std::string>> ParseNotifyEvents(const std::string& text) {
  std::vector<std::string> events;
  std::istringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty()) continue;
    if (std::find(std::begin(kNotifyEvents), std::end(kNotifyEvents), item) == std::end(kNotifyEvents))
      return MakeError(ErrorKind::kInvalidArgument,
                       fmt::format("--notify {}: '{}' is no event; give end, fail and/or anomaly, e.g. --notify end,anomaly",
                                   text, item));
    if (std::find(events.begin(), events.end(), item) == events.end()) events.push_back(item);
  }
  if (events.empty())
    return MakeError(ErrorKind::kInvalidArgument, "--notify: give end, fail and/or anomaly, e.g. --notify fail");
  return events;
}

bool Wants(const NotifyTarget& t, const std::string& event) {
  auto has = [&](const char* e) { return std::find(t.events.begin(), t.events.end(), e) != t.events.end(); };
  if (event == "fail") return has("fail") || has("end");
  return has(event.c_str());
}

json NotifyTargetToJson(const NotifyTarget& t) {
  JsonTreeWriter w;
  WriteNotifyTarget(w, t);
  return w.Take();
}

Result<NotifyTarget> NotifyTargetFromJson(const json& j) {
  auto bad = [](const std::string& why) { return MakeError(ErrorKind::kInvalidArgument, "notify: " + why); };
  if (!j.is_object()) return bad("must be an object");
  NotifyTarget t;
  const auto text = [&](const char* key, std::size_t max, std::string* out) {
    auto it = j.find(key);
    if (it == j.end()) return true;
    if (!it->is_string() || it->get_ref<const std::string&>().size() > max) return false;
    *out = it->get<std::string>();
    return true;
  };
  if (!text("webhook", 2048, &t.webhook) || !text("command", 4096, &t.command) || !text("format", 16, &t.format))
    return bad("webhook (a URL up to 2048 bytes), command (up to 4096) and format must be strings");
  if (!t.webhook.empty() && t.webhook.rfind("http://", 0) != 0 && t.webhook.rfind("https://", 0) != 0)
    return bad(fmt::format("webhook {} is not an http:// or https:// URL", t.webhook.substr(0, 80)));
  if (t.format != "json" && t.format != "text") return bad("format must be \"json\" or \"text\"");
  if (!j.contains("events") || !j["events"].is_array() || j["events"].empty() || j["events"].size() > 3)
    return bad("events must list end, fail and/or anomaly");
  for (const auto& e : j["events"]) {
    if (!e.is_string() ||
        std::find(std::begin(kNotifyEvents), std::end(kNotifyEvents), e.get<std::string>()) == std::end(kNotifyEvents))
      return bad("events must list end, fail and/or anomaly");
    t.events.push_back(e.get<std::string>());
  }
  return t;
}

}  // namespace gpulane
