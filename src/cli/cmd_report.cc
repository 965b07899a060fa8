// gpulane report: what finished jobs used, summed by user, job, GPU or day (issue 11, item 2),
// from the usage records the daemon's sampler keeps (telemetry/report.h sums, render/ words).
#include <ctime>
#include <memory>

#include <fmt/format.h>

#include "cli/client.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "os/user_groups.h"
#include "util/say.h"
#include "proto/telemetry_json.h"
#include "render/report_table.h"
#include "util/exit_codes.h"
#include "util/units.h"

namespace gpulane::cli {
namespace {

using nlohmann::json;

struct ReportOptions {
  std::string user;
  std::string since = "7d";
  std::string by = "user";
  bool as_json = false;
  bool as_csv = false;
};

int RunReport(const ReportOptions& o) {
  auto since = ParseDurationS(o.since, "h");
  if (!since) return Fail(MakeError(ErrorKind::kInvalidArgument, "--since: " + since.error().message));
  if (*since <= 0)
    return Fail(MakeError(ErrorKind::kInvalidArgument,
                          fmt::format("--since {}: give how far back, e.g. 7d, 12h or 30d", o.since)));
  auto by = telemetry::ParseReportBy(o.by);
  if (!by)
    return Fail(MakeError(ErrorKind::kInvalidArgument, fmt::format("--by {}: give user, job, gpu or day", o.by)));
  if (!o.user.empty())
    if (auto known = UidOfUserOption(o.user); !known) return Fail(known.error());
  const double since_s = static_cast<double>(std::time(nullptr)) - *since;
  json request = {{"op", "report"}, {"since_s", since_s}, {"by", o.by}};
  if (!o.user.empty()) request["user"] = o.user;
  auto answer = CallIfRunning(request);
  if (!answer) return Fail(answer.error());
  // No daemon: nothing is known, which is not "no job finished" (jobs of `gpulane run` may have).
  const bool recorded = answer->has_value();
  if (!recorded && !o.as_json && !o.as_csv) {
    fmt::print("(no daemon runs: usage is recorded only while one runs, so nothing is known of this period)\n");
    return kExitOk;
  }
  if (!recorded && o.as_csv)
    Say("gpulane: note: no daemon runs: usage is recorded only while one runs, so nothing is known of this period\n");
  std::vector<telemetry::ReportRow> rows;
  if (*answer && (**answer).contains("rows"))
    for (const auto& row : (**answer)["rows"]) rows.push_back(proto::ReportRowFromJson(row));
  if (o.as_json) {
    json out = {{"by", o.by}, {"since_s", since_s}, {"rows", json::array()}, {"daemon_running", recorded}};
    for (const auto& r : rows) out["rows"].push_back(proto::ReportRowToJson(r));
    fmt::print("{}\n", out.dump(2));
  } else if (o.as_csv) {
    fmt::print("{}", ReportCsv(rows, *by));
  } else {
    fmt::print("{}", ReportTableText(rows, *by));
  }
  return kExitOk;
}

}  // namespace

void RegisterReport(CLI::App& app, Runner* run, const os::Env&) {
  auto o = std::make_shared<ReportOptions>();
  CLI::App* sub = app.add_subcommand(
      "report", "What finished jobs used (GPU-hours, energy, memory, utilisation, waits), by user, job, GPU or day");
  sub->add_option("--user", o->user, "Only this user's jobs")->type_name("USER");
  sub->add_option("--since", o->since, "How far back (default 7d), e.g. 12h, 30d")->type_name("DURATION");
  sub->add_option("--by", o->by, "Sum by user (default), job, gpu or day")->type_name("KEY");
  auto json_flag = sub->add_flag("--json", o->as_json, "Print JSON");
  sub->add_flag("--csv", o->as_csv, "Print CSV")->excludes(json_flag);
  sub->footer("Jobs are recorded by the daemon's sampler when their lease ends: queued jobs and `gpulane run` alike, "
              "while a daemon runs.");
  sub->callback([o, run] { *run = [o] { return RunReport(*o); }; });
}

}  // namespace gpulane::cli
