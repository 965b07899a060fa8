// Slurm jobs in gpulane's commands: submit --cluster slurm, and queue/show/wait/logs/cancel of
// slurm:ID jobs (cli/slurm_jobs.h).
#include "cli/slurm_jobs.h"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fmt/format.h>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>
#include <tuple>

#include "cli/common.h"
#include "daemon/paths.h"
#include "lease/lease_dir.h"
#include "slurm/command_runner.h"
#include "slurm/job_registry.h"
#include "slurm/poller.h"
#include "slurm/sbatch.h"
#include "util/config.h"
#include "util/exit_codes.h"
#include "util/terminal_text.h"
#include "util/units.h"

namespace gpulane::cli {
namespace {

using nlohmann::json;

// The user's Slurm side: the real runner and clock, their registry and poll settings.
struct SlurmSide {
  slurm::RealCommandRunner runner;
  SystemClock clock;
  slurm::JobRegistry registry;
  slurm::PollSettings settings;
  explicit SlurmSide(slurm::JobRegistry r) : registry(std::move(r)) {}
};

// `create`: make the user's private /tmp folder when their state lies there (submit); other
// commands only read what a submit left.
Result<std::unique_ptr<SlurmSide>> OpenSlurmSide(bool create = false) {
  auto config = LoadConfig();
  if (!config) return config.error();
  const daemon::DaemonPaths paths = daemon::UserPaths();
  if (Status secure = daemon::SecureUserPaths(paths, create); !secure.ok()) return secure.error();
  auto side = std::make_unique<SlurmSide>(slurm::JobRegistry(paths.state_dir));
  side->settings.interval_s = config->slurm_poll_interval_s;
  return side;
}

// The registered submissions these ids belong to ("12", "12_3" -> submission 12). Errors:
// kNotFound for an id this user never submitted through gpulane.
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

// The rows of `id`: its own row, or an array's every task for the array's id.
std::vector<slurm::PolledJob> RowsOf(const std::vector<slurm::PolledJob>& rows, const std::string& id) {
  std::vector<slurm::PolledJob> out;
  for (const auto& r : rows)
    if (r.id == id || (id.find('_') == std::string::npos && r.parent == id)) out.push_back(r);
  return out;
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

// A log pattern with sbatch's %j %A %a %x %u %% filled in, relative to the job's directory.
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

}  // namespace

void SplitSlurmIds(const std::vector<std::string>& words, std::vector<std::string>* slurm_ids, std::vector<std::string>* local) {
  for (const auto& w : words) {
    std::string id;
    if (slurm::IsSlurmId(w, &id)) slurm_ids->push_back(id);
    else local->push_back(w);
  }
}

int SubmitToSlurm(const SlurmSubmitArgs& a) {
  auto side = OpenSlurmSide(/*create=*/true);
  if (!side) return Fail(side.error());
  auto config = LoadConfig();
  if (!config) return Fail(config.error());
  slurm::SlurmSubmission s;
  s.request = a.request;
  s.name = a.name.empty() ? a.command.front().substr(a.command.front().rfind('/') + 1) : a.name;
  s.array = a.array;
  s.output_path = a.output;
  s.error_path = a.error;
  s.hold = a.hold;
  for (auto [text, target, option] : {std::tuple{&a.after, &s.after_ok, "--after"}, std::tuple{&a.after_any, &s.after_any, "--after-any"}}) {
    std::size_t start = 0;
    while (!text->empty() && start <= text->size()) {
      const std::size_t comma = text->find(',', start);
      const std::string word = text->substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      std::string id;
      if (!slurm::IsSlurmId(word, &id))
        return Fail(MakeError(ErrorKind::kInvalidArgument,
                              fmt::format("{} {}: a job on --cluster slurm can only wait for Slurm jobs: give their "
                                          "ids as slurm:1234",
                                          option, EscapeForTerminal(word))));
      if (Status ok = slurm::CheckSlurmId(id); !ok.ok()) return Fail(ok.error());
      target->push_back(id);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  char cwd[4096];
  if (!getcwd(cwd, sizeof cwd)) return Fail(MakeError(ErrorKind::kIo, "cannot read the current directory"));
  s.cwd = cwd;
  // The cluster's shards, asked once, only when --mem needs them.
  slurm::ClusterFeatures features;
  if (s.request.mem_bytes) {
    const std::vector<std::string> sinfo = {"sinfo", "-h", "-o", "%G"};
    auto gres = (*side)->runner.Run(sinfo);
    if (!gres) return Fail(gres.error());
    if (gres->exit_code != 0) return Fail(MakeError(ErrorKind::kUnavailable, slurm::DescribeFailure(sinfo, *gres)));
    features.has_shards = slurm::HasShards(gres->stdout_text);
  }
  slurm::SlurmSettings settings;
  settings.gpus_option = config->slurm_gpus_option == "gpus";
  settings.shard_memory_bytes = config->slurm_shard_memory_bytes;
  const std::string dir = (*side)->registry.Dir();
  if (Status made = slurm::MakeDirs(dir); !made.ok()) return Fail(made.error());
  s.script_path = fmt::format("{}/submit-{}.sh", dir, getpid());
  auto argv = slurm::SbatchArgv(s, features, settings);
  if (!argv) return Fail(argv.error());
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return Fail(MakeError(ErrorKind::kIo, "cannot read /proc/self/exe (the gpulane binary's path)"));
  self[n] = '\0';
  const std::string script =
      slurm::BatchScriptText({self, slurm::RunArgsFor(s.request), a.command, (*side)->registry.ExitCodeDir()});
  {
    std::ofstream out(s.script_path, std::ios::trunc);
    out << script;
    if (!out) return Fail(MakeError(ErrorKind::kIo, fmt::format("cannot write the batch script {}", s.script_path)));
  }
  auto ran = (*side)->runner.Run(*argv);
  std::remove(s.script_path.c_str());  // sbatch keeps its own copy
  if (!ran) return Fail(ran.error());
  if (ran->exit_code != 0) return Fail(MakeError(ErrorKind::kUnavailable, slurm::DescribeFailure(*argv, *ran)));
  std::string id = ran->stdout_text.substr(0, ran->stdout_text.find_first_of(";\n"));  // --parsable: "id[;cluster]"
  if (slurm::CheckSlurmId(id).ok() == false)
    return Fail(MakeError(ErrorKind::kInternal, fmt::format("sbatch printed no job id: {}", EscapeForTerminal(ran->stdout_text))));
  slurm::RegisteredJob job;
  job.slurm_id = id;
  job.name = s.name;
  job.argv = a.command;
  job.cwd = s.cwd;
  for (const auto& word : *argv) {
    if (word.rfind("--output=", 0) == 0) job.output_pattern = word.substr(9);
    if (word.rfind("--error=", 0) == 0) job.error_pattern = word.substr(8);
  }
  job.array = !s.array.empty();
  job.gpu_count = s.request.count;
  job.submit_time_s = s.request.submit_time_s;
  if (Status added = (*side)->registry.Add(job); !added.ok())
    Warn(fmt::format("submitted as slurm:{}, but cannot remember it for queue/show/wait: {}", id, added.error().message));
  fmt::print("{}{}\n", slurm::kIdPrefix, id);
  return kExitOk;
}

int ShowSlurmJob(const std::string& id, bool as_json) {
  auto side = OpenSlurmSide();
  if (!side) return Fail(side.error());
  auto jobs = RegisteredFor(**side, {id});
  if (!jobs) return Fail(jobs.error());
  slurm::Poller poller((*side)->runner, (*side)->clock, (*side)->registry, (*side)->settings);
  auto rows = poller.Poll(*jobs);
  if (!rows) return Fail(rows.error());
  auto mine = RowsOf(*rows, id);
  if (mine.empty())
    return Fail(MakeError(ErrorKind::kNotFound, fmt::format("no job slurm:{}: Slurm lists no such task", id)));
  return PrintShow(jobs->front(), mine, as_json);
}

int WaitSlurmJobs(const std::vector<std::string>& ids) {
  auto side = OpenSlurmSide();
  if (!side) return Fail(side.error());
  auto jobs = RegisteredFor(**side, ids);
  if (!jobs) return Fail(jobs.error());
  slurm::Poller poller((*side)->runner, (*side)->clock, (*side)->registry, (*side)->settings);
  // Slurm that stops answering (slurmctld restarting) is waited for, as `wait` waits for a
  // restarting gpulane daemon: up to 10 minutes, said once on stderr.
  double unanswered_since_s = -1;
  while (true) {
    auto rows = poller.Poll(*jobs);
    if (!rows && rows.error().kind == ErrorKind::kUnavailable) {
      const double now_s = (*side)->clock.MonotonicS();
      if (unanswered_since_s < 0) {
        unanswered_since_s = now_s;
        Warn(rows.error().message + "; waiting up to 10 minutes for Slurm to answer");
      }
      if (now_s - unanswered_since_s > 600) return Fail(rows.error());
      std::this_thread::sleep_for(std::chrono::seconds(1));
      continue;
    }
    if (!rows) return Fail(rows.error());
    unanswered_since_s = -1;
    bool all_done = true;
    for (const auto& id : ids) {
      auto mine = RowsOf(*rows, id);
      if (mine.empty()) all_done = false;
      for (const auto& r : mine) all_done = all_done && r.view.finished;
    }
    if (all_done) {
      int code = kExitOk;
      for (const auto& id : ids)
        for (const auto& r : RowsOf(*rows, id)) {
          fmt::print("slurm:{} {}{}\n", EscapeForTerminal(r.id), r.view.state,
                     r.view.exit_code ? fmt::format(" {}", *r.view.exit_code) : "");
          const int job_code = r.view.exit_code ? *r.view.exit_code : kExitJobDidNotRun;
          if (code == kExitOk) code = job_code;
        }
      return code;
    }
    // The shared poll bounds the calls to Slurm; this only re-reads it (and the exit-code files).
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

int SlurmLogs(const std::string& id, bool follow, bool err) {
  auto side = OpenSlurmSide();
  if (!side) return Fail(side.error());
  auto jobs = RegisteredFor(**side, {id});
  if (!jobs) return Fail(jobs.error());
  const slurm::RegisteredJob& job = jobs->front();
  if (job.array && id.find('_') == std::string::npos)
    return Fail(MakeError(ErrorKind::kInvalidArgument,
                          fmt::format("logs slurm:{}: an array has one log per task: name one, e.g. slurm:{}_0", id, id)));
  slurm::Poller poller((*side)->runner, (*side)->clock, (*side)->registry, (*side)->settings);
  std::uint64_t offset = 0;
  while (true) {
    auto rows = poller.Poll(*jobs);
    if (!rows) return Fail(rows.error());
    auto mine = RowsOf(*rows, id);
    if (mine.empty()) return Fail(MakeError(ErrorKind::kNotFound, fmt::format("no job slurm:{}: Slurm lists no such task", id)));
    const std::string pattern = err && !job.error_pattern.empty() ? job.error_pattern : job.output_pattern;
    const std::string path = LogPath(pattern, job, mine.front());
    const bool finished = mine.front().view.finished;
    std::string data;
    if (std::FILE* f = std::fopen(path.c_str(), "rb")) {
      std::fseek(f, static_cast<long>(offset), SEEK_SET);
      char buffer[65536];
      std::size_t got;
      while ((got = std::fread(buffer, 1, sizeof buffer, f)) > 0) data.append(buffer, got);
      std::fclose(f);
    } else if (!follow || finished) {
      if (!mine.front().view.ran && !follow) return kExitOk;  // not started: no output yet
      if (!mine.front().view.ran) return kExitOk;
      return Fail(MakeError(ErrorKind::kNotFound,
                            fmt::format("slurm:{}: its log {} cannot be read here (is the job's directory shared with "
                                        "this machine?)",
                                        id, EscapeForTerminal(path))));
    }
    std::fwrite(data.data(), 1, data.size(), stdout);
    std::fflush(stdout);
    offset += data.size();
    if (!follow || (finished && data.empty())) return kExitOk;
    if (data.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

int CancelSlurmJobs(const std::vector<std::string>& ids) {
  auto side = OpenSlurmSide();
  if (!side) return Fail(side.error());
  auto jobs = RegisteredFor(**side, ids);
  if (!jobs) return Fail(jobs.error());
  slurm::Poller poller((*side)->runner, (*side)->clock, (*side)->registry, (*side)->settings);
  auto rows = poller.Poll(*jobs);
  if (!rows) return Fail(rows.error());
  std::vector<std::string> live;
  int code = kExitOk;
  for (const auto& id : ids) {
    bool running = false;
    for (const auto& r : RowsOf(*rows, id)) running = running || !r.view.finished;
    if (running) {
      live.push_back(id);
    } else {
      Error e = MakeError(ErrorKind::kWrongState, fmt::format("slurm:{} has ended: nothing to cancel", id));
      if (code == kExitOk) code = ExitCodeFor(e.kind);
      Warn(e.message);
    }
  }
  if (live.empty()) return code;
  std::vector<std::string> argv = {"scancel"};
  argv.insert(argv.end(), live.begin(), live.end());
  auto ran = (*side)->runner.Run(argv);
  if (!ran) return Fail(ran.error());
  if (ran->exit_code != 0) {
    const bool denied = ran->stderr_text.find("ermission") != std::string::npos ||
                        ran->stderr_text.find("Access") != std::string::npos;
    return Fail(MakeError(denied ? ErrorKind::kPermission : ErrorKind::kUnavailable, slurm::DescribeFailure(argv, *ran)));
  }
  for (const auto& id : live) fmt::print("slurm:{}\n", id);
  return code;
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
      if (as_json) {
        std::string text = JobJson(job, row).dump(2);
        std::string indented;
        for (char c : text) indented += c == '\n' ? std::string("\n  ") : std::string(1, c);
        lines.push_back(indented);
        continue;
      }
      std::string where = row.view.state == "running" ? row.nodes : row.view.reason;
      if (row.view.exit_code && row.view.finished)
        where = fmt::format("exit {}{}", *row.view.exit_code, row.view.reason.empty() ? "" : "; " + row.view.reason);
      std::string name = EscapeForTerminal(job.name);
      if (name.size() > 16) name = name.substr(0, 15) + "~";
      lines.push_back(fmt::format("{:>10}  {:<10} {:<16} {:<10} {:<9} {:>8}  {}\n", "slurm:" + EscapeForTerminal(row.id),
                                  user, name, GpusText(job), row.view.state, FormatSeconds(now_s - job.submit_time_s),
                                  EscapeForTerminal(where)));
    }
  return lines;
}

}  // namespace gpulane::cli
