// `show` and `queue` of Slurm jobs (cli/slurm_jobs.h): one shared poll, printed as gpulane's own
// jobs are.
#include <unistd.h>

#include <fmt/format.h>

#include "cli/common.h"
#include "cli/slurm_jobs.h"
#include "cli/slurm_side.h"
#include "lease/lease_dir.h"
#include "util/exit_codes.h"
#include "util/terminal_text.h"
#include "util/units.h"

namespace gpulane::cli {
namespace {

using nlohmann::json;

int PrintShow(const slurm::RegisteredJob& job, const std::vector<slurm::PolledJob>& rows, bool as_json) {
  if (as_json) {
    json list = json::array();
    for (const auto& row : rows) list.push_back(JobJson(job, row));
    fmt::print("{}\n", (list.size() == 1 ? list.at(0) : list).dump(2));
    return kExitOk;
  }
  bool first = true;
  for (const auto& row : rows) {
    if (!first) fmt::print("\n");
    first = false;
    std::string argv;
    for (const auto& a : job.argv) argv += (argv.empty() ? "" : " ") + EscapeForTerminal(a);
    fmt::print("job slurm:{}  {}  {}\n", EscapeForTerminal(row.id), lease::UserNameOf(static_cast<std::uint32_t>(getuid())),
               row.view.state);
    fmt::print("  name      {}\n  command   {}\n  directory {}\n  gpus      {}\n", EscapeForTerminal(job.name), argv,
               EscapeForTerminal(job.cwd), GpusText(job));
    fmt::print("  slurm     {}{}{}{}\n", row.slurm_state.empty() ? "(no longer listed)" : EscapeForTerminal(row.slurm_state),
               row.view.finished && !row.confirmed ? " (at the last poll)" : "",
               row.partition.empty() ? "" : ", partition " + EscapeForTerminal(row.partition),
               row.nodes.empty() ? "" : ", nodes " + EscapeForTerminal(row.nodes));
    if (!row.view.reason.empty()) fmt::print("  reason    {}\n", EscapeForTerminal(row.view.reason));
    if (row.view.exit_code) fmt::print("  exit code {}\n", *row.view.exit_code);
    if (row.id.find('[') == std::string::npos) {
      const std::string out = LogPath(job.output_pattern, job, row);
      fmt::print("  output    {}\n", EscapeForTerminal(out));
      if (!job.error_pattern.empty()) fmt::print("  errors    {}\n", EscapeForTerminal(LogPath(job.error_pattern, job, row)));
    }
  }
  return kExitOk;
}

// One queue table row, columns as the local queue's.
std::string QueueLine(const slurm::RegisteredJob& job, const slurm::PolledJob& row, const std::string& user, double now_s) {
  std::string where = row.view.state == "running" ? row.nodes : row.view.reason;
  if (row.view.exit_code && row.view.finished)
    where = fmt::format("exit {}{}", *row.view.exit_code, row.view.reason.empty() ? "" : "; " + row.view.reason);
  std::string name = EscapeForTerminal(job.name);
  if (name.size() > 16) name = name.substr(0, 15) + "~";
  return fmt::format("{:>10}  {:<10} {:<16} {:<10} {:<9} {:>8}  {}\n", "slurm:" + EscapeForTerminal(row.id), user, name,
                     GpusText(job), row.view.state, FormatSeconds(now_s - job.submit_time_s), EscapeForTerminal(where));
}

// A job's JSON indented by two spaces, for its place in queue --json's list.
std::string IndentedJson(const json& j) {
  std::string indented;
  for (char c : j.dump(2)) indented += c == '\n' ? std::string("\n  ") : std::string(1, c);
  return indented;
}

}  // namespace

int ShowSlurmJob(const std::string& id, bool as_json) {
  auto side = OpenSlurmSide();
  if (!side) return Fail(side.error());
  auto jobs = RegisteredFor(**side, {id});
  if (!jobs) return Fail(jobs.error());
  slurm::Poller poller((*side)->runner, (*side)->clock, (*side)->registry, (*side)->settings);
  auto rows = PollCovering(**side, poller, *jobs, {id});
  if (!rows) return Fail(rows.error());
  auto mine = RowsOf(*rows, id);
  if (mine.empty())
    return Fail(MakeError(ErrorKind::kNotFound, fmt::format("no job slurm:{}: Slurm lists no such task", id)));
  return PrintShow(jobs->front(), mine, as_json);
}

std::vector<std::string> SlurmQueueRows(bool all, bool as_json) {
  std::vector<std::string> lines;
  auto side = OpenSlurmSide();
  if (!side) return lines;
  auto registered = (*side)->registry.All();
  if (!registered || registered->empty()) return lines;
  slurm::Poller poller((*side)->runner, (*side)->clock, (*side)->registry, (*side)->settings);
  auto rows = poller.Poll(*registered);
  if (!rows) {
    Warn("Slurm jobs not listed: " + rows.error().message);
    return lines;
  }
  const double now_s = (*side)->clock.WallS();
  const std::string user = lease::UserNameOf(static_cast<std::uint32_t>(getuid()));
  for (const auto& job : *registered)
    for (const auto& row : RowsOf(*rows, job.slurm_id)) {
      if (row.view.finished && !all) continue;
      lines.push_back(as_json ? IndentedJson(JobJson(job, row)) : QueueLine(job, row, user, now_s));
    }
  return lines;
}

}  // namespace gpulane::cli
