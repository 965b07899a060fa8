#pragma once
// Where a job's notifications go and which events it wants (issue 11, item 4): [notify] of the
// submitting user's config with submit --notify / run --notify. Plain data, carried in the job's
// spec (store/job.h) to the supervisor that delivers them (exec/notify.h).
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/result.h"

namespace gpulane {

struct NotifyTarget {
  std::vector<std::string> events;  ///< of "end" (every end), "fail" (failed or timed out), "anomaly"
  std::string webhook;              ///< http(s) URL; "" = none
  std::string format = "json";      ///< "json": {"text", "content", event fields}; "text": the line alone (ntfy)
  std::string command;              ///< run with /bin/sh -c as the job's user; "" = none
  bool empty() const { return webhook.empty() && command.empty(); }
  bool operator==(const NotifyTarget&) const = default;
};

/// The events --notify accepts.
inline constexpr const char* kNotifyEvents[] = {"end", "fail", "anomaly"};

/// Parses --notify's "end,fail,anomaly". Errors: kInvalidArgument naming the unknown event.
Result<std::vector<std::string>> ParseNotifyEvents(const std::string& text);

/// Whether `target` wants `event` (an "end" target wants "fail" too: one notification per end).
bool Wants(const NotifyTarget& target, const std::string& event);

/// The target's JSON members, for any writer of util/json_tree_writer.h's calls (sorted order).
template <typename W>
void WriteNotifyTarget(W& w, const NotifyTarget& t) {
  w.BeginObject();
  if (!t.command.empty()) {
    w.Key("command");
    w.String(t.command);
  }
  w.Key("events");
  w.Strings(t.events);
  w.Key("format");
  w.String(t.format);
  if (!t.webhook.empty()) {
    w.Key("webhook");
    w.String(t.webhook);
  }
  w.EndObject();
}

/// The target as a job spec carries it (WriteNotifyTarget), and back. FromJson errors: kInvalidArgument naming the
/// field (unknown events, a webhook that is not an http(s) URL, an unknown format, over-long text).
nlohmann::json NotifyTargetToJson(const NotifyTarget& target);
Result<NotifyTarget> NotifyTargetFromJson(const nlohmann::json& j);

}  // namespace gpulane
