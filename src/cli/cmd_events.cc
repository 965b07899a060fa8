// gpulane events: the anomalies and health events the daemon's sampler raised (issue 11, item 3),
// newest last; --follow keeps printing new ones as they come.
#include <poll.h>

#include <cstdint>
#include <ctime>
#include <memory>

#include <fmt/format.h>

#include "cli/client.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "util/exit_codes.h"
#include "util/terminal_text.h"
#include "util/units.h"

namespace gpulane::cli {
namespace {

using nlohmann::json;

struct EventsOptions {
  std::string since = "1d";
  bool follow = false;
  bool as_json = false;
};

std::string When(double t) {
  const std::time_t when = static_cast<std::time_t>(t);
  std::tm tm{};
  localtime_r(&when, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S", &tm);
  return text;
}

// "2026-12-03 14:02:05  idle      job 12 (alice) has used GPU 1 under 5 % ...  [ended 14:30:00]"
std::string EventLine(const json& e) {
  std::string end = e.contains("cleared_s") ? fmt::format("  [ended {}]", When(e["cleared_s"].get<double>()).substr(11))
                                            : "  [now]";
  return fmt::format("{}  {:<9} {}{}\n", When(e.value("time_s", 0.0)), EscapeForTerminal(e.value("kind", "")),
                     EscapeForTerminal(e.value("message", "")), end);
}

int RunEvents(const EventsOptions& o) {
  auto since = ParseDurationS(o.since, "h");
  if (!since) return Fail(MakeError(ErrorKind::kInvalidArgument, "--since: " + since.error().message));
  if (*since <= 0)
    return Fail(MakeError(ErrorKind::kInvalidArgument, fmt::format("--since {}: give how far back, e.g. 1h, 1d or 7d", o.since)));
  json request = {{"op", "events"}, {"since_s", static_cast<double>(std::time(nullptr)) - *since}};
  std::int64_t last_id = 0;
  while (true) {
    auto answer = CallIfRunning(request);
    if (!answer) return Fail(answer.error());
    if (!*answer) {
      if (!o.as_json) fmt::print("(no daemon runs: no events)\n");
      else fmt::print("{}\n", json{{"events", json::array()}, {"current", json::array()}}.dump(2));
      return kExitOk;
    }
    const json& reply = **answer;
    if (!o.as_json && !o.follow && reply["events"].empty() && reply.value("current", json::array()).empty())
      fmt::print("(no anomaly since {})\n", When(request["since_s"].get<double>()));
    if (o.as_json && !o.follow) {
      fmt::print("{}\n", json{{"events", reply["events"]}, {"current", reply["current"]}}.dump(2));
      return kExitOk;
    }
    for (const auto& e : reply["events"]) {
      last_id = std::max(last_id, e.value("id", std::int64_t{0}));
      if (o.as_json) fmt::print("{}\n", e.dump());
      else fmt::print("{}", EventLine(e));
    }
    std::fflush(stdout);
    if (!o.follow) return kExitOk;
    request["after_id"] = last_id;
    poll(nullptr, 0, 1000);  // the next look a second later (a signal ends the command)
  }
}

}  // namespace

void RegisterEvents(CLI::App& app, Runner* run, const os::Env&) {
  auto o = std::make_shared<EventsOptions>();
  CLI::App* sub = app.add_subcommand("events", "Anomalies and GPU health events the daemon raised (idle or stuck jobs, "
                                               "leaks, ghost memory, foreign processes, throttling, Xid errors)");
  sub->add_option("--since", o->since, "How far back (default 1d), e.g. 1h, 7d")->type_name("DURATION");
  sub->add_flag("-f,--follow", o->follow, "Keep printing new events as they come (Ctrl-C ends)");
  sub->add_flag("--json", o->as_json, "Print JSON (with --follow: one event object a line)");
  sub->callback([o, run] { *run = [o] { return RunEvents(*o); }; });
}

}  // namespace gpulane::cli
