// The Slurm commands' shared pieces (cli/slurm_side.h).
#include "cli/slurm_side.h"

#include <unistd.h>

#include <chrono>
#include <thread>

#include <fmt/format.h>

#include "cli/common.h"
#include "daemon/paths.h"
#include "lease/lease_dir.h"
#include "slurm/job_state.h"
#include "util/config.h"

namespace gpulane::cli {

using nlohmann::json;

Result<std::unique_ptr<SlurmSide>> OpenSlurmSide(bool create) {
  auto config = LoadConfig();
  if (!config) return config.error();
  const daemon::DaemonPaths paths = daemon::UserPaths();
  if (Status secure = daemon::SecureUserPaths(paths, create); !secure.ok()) return secure.error();
  auto side = std::make_unique<SlurmSide>(slurm::JobRegistry(paths.state_dir));
  side->settings.interval_s = config->slurm_poll_interval_s;
  return side;
}

Result<std::vector<slurm::RegisteredJob>> RegisteredFor(const SlurmSide& side, const std::vector<std::string>& ids) {
  auto all = side.registry.All();
  if (!all) return all.error();
  std::vector<slurm::RegisteredJob> found;
  for (const auto& id : ids) {
    if (Status ok = slurm::CheckSlurmId(id); !ok.ok()) return ok.error();
    const std::string parent = id.substr(0, id.find('_'));
    bool known = false;
    for (const auto& job : *all)
      if (job.slurm_id == parent) {
        known = true;
        bool listed = false;
        for (const auto& f : found) listed = listed || f.slurm_id == parent;
        if (!listed) found.push_back(job);
      }
    if (!known)
      return MakeError(ErrorKind::kNotFound,
                       fmt::format("no job slurm:{} among the Slurm jobs you submitted through gpulane (squeue -j {} "
                                   "shows any Slurm job)",
                                   id, parent));
  }
  return found;
}

std::vector<slurm::PolledJob> RowsOf(const std::vector<slurm::PolledJob>& rows, const std::string& id) {
  std::vector<slurm::PolledJob> out;
  for (const auto& r : rows)
    if (r.id == id || (id.find('_') == std::string::npos && r.parent == id)) out.push_back(r);
  return out;
}

Result<std::vector<slurm::PolledJob>> PollCovering(const SlurmSide& side, slurm::Poller& poller,
                                                   const std::vector<slurm::RegisteredJob>& jobs,
                                                   const std::vector<std::string>& ids) {
  auto rows = poller.Poll(jobs);
  for (int round = 0; round < 3 && rows.ok(); ++round) {
    bool covered = true;
    for (const auto& id : ids) covered = covered && !RowsOf(*rows, id).empty();
    if (covered) break;
    std::this_thread::sleep_for(std::chrono::duration<double>(side.settings.new_job_interval_s));
    rows = poller.Poll(jobs);
  }
  return rows;
}

std::string GpusText(const slurm::RegisteredJob& job) { return std::to_string(job.gpu_count); }

json JobJson(const slurm::RegisteredJob& job, const slurm::PolledJob& row) {
  json j = {{"id_text", std::string(slurm::kIdPrefix) + row.id},
            {"cluster", "slurm"},
            {"state", row.view.state},
            {"reason", row.view.reason},
            {"submit_time", job.submit_time_s},
            {"slurm", {{"id", row.id}, {"job_id", row.job_id}, {"state", row.slurm_state}, {"partition", row.partition},
                       {"nodes", row.nodes}}},
            {"spec", {{"name", job.name}, {"argv", job.argv}, {"cwd", job.cwd}, {"request", {{"count", job.gpu_count}}}}}};
  if (row.view.exit_code) j["exit_code"] = *row.view.exit_code;
  return j;
}

std::string LogPath(const std::string& pattern, const slurm::RegisteredJob& job, const slurm::PolledJob& row) {
  std::string out;
  const std::size_t bar = row.id.find('_');
  const std::string array_id = bar == std::string::npos ? row.id : row.id.substr(0, bar);
  const std::string task = bar == std::string::npos ? "4294967294" : row.id.substr(bar + 1);
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%' || i + 1 == pattern.size()) {
      out += pattern[i];
      continue;
    }
    const char c = pattern[++i];
    if (c == 'j') out += row.job_id.empty() ? row.id : row.job_id;
    else if (c == 'A') out += array_id;
    else if (c == 'a') out += task;
    else if (c == 'x') out += job.name;
    else if (c == 'u') out += lease::UserNameOf(static_cast<std::uint32_t>(getuid()));
    else if (c == '%') out += '%';
    else out += std::string("%") + c;
  }
  return !out.empty() && out[0] == '/' ? out : job.cwd + "/" + out;
}

}  // namespace gpulane::cli
