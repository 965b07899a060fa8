// `wait`, `logs`, `cancel`, `hold` and `release` of Slurm jobs (cli/slurm_jobs.h), and telling
// slurm:ID words from gpulane's own job ids. submit: cli/slurm_submit.cc; show and queue:
// cli/slurm_show.cc.
#include "cli/slurm_jobs.h"

#include <chrono>
#include <cstdio>
#include <fmt/format.h>
#include <thread>

#include "cli/common.h"
#include "cli/slurm_side.h"
#include "util/exit_codes.h"
#include "util/terminal_text.h"

namespace gpulane::cli {
namespace {

// A Slurm command (scancel, scontrol) that exited non-zero: kPermission when Slurm said the job
// is not this user's to change, else kUnavailable; the message is Slurm's (DescribeFailure).
Error CommandFailed(const std::vector<std::string>& argv, const slurm::CommandOutput& out) {
  const bool denied =
      out.stderr_text.find("ermission") != std::string::npos || out.stderr_text.find("Access") != std::string::npos;
  return MakeError(denied ? ErrorKind::kPermission : ErrorKind::kUnavailable, slurm::DescribeFailure(argv, out));
}

// After this user changed jobs: the next command asks Slurm instead of showing the shared poll
// from before the change. A failure only delays that (a warning).
void ForgetPoll(slurm::Poller& poller) {
  if (Status forgot = poller.Invalidate(); !forgot.ok())
    Warn("the shared Slurm poll may show the jobs as before for a few seconds: " + forgot.error().message);
}

}  // namespace

void SplitSlurmIds(const std::vector<std::string>& words, std::vector<std::string>* slurm_ids, std::vector<std::string>* local) {
  for (const auto& w : words) {
    std::string id;
    if (slurm::IsSlurmId(w, &id)) slurm_ids->push_back(id);
    else local->push_back(w);
  }
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
    auto rows = PollCovering(**side, poller, *jobs, {id});
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
      if (!mine.front().view.ran) return kExitOk;  // not started: no output yet
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
  auto rows = PollCovering(**side, poller, *jobs, ids);
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
  if (ran->exit_code != 0) return Fail(CommandFailed(argv, *ran));
  ForgetPoll(poller);
  for (const auto& id : live) fmt::print("slurm:{}\n", id);
  return code;
}

int HoldSlurmJobs(const std::vector<std::string>& ids, bool hold) {
  auto side = OpenSlurmSide();
  if (!side) return Fail(side.error());
  auto jobs = RegisteredFor(**side, ids);
  if (!jobs) return Fail(jobs.error());
  slurm::Poller poller((*side)->runner, (*side)->clock, (*side)->registry, (*side)->settings);
  auto rows = PollCovering(**side, poller, *jobs, ids);
  if (!rows) return Fail(rows.error());
  const char* verb = hold ? "hold" : "release";
  std::string live;  // scontrol's job_list: ids separated by commas
  int code = kExitOk;
  for (const auto& id : ids) {
    bool waiting = false, started = false;
    for (const auto& r : RowsOf(*rows, id)) {
      waiting = waiting || (!r.view.finished && r.view.state != "running");
      started = started || r.view.state == "running";
    }
    if (waiting) {
      live += (live.empty() ? "" : ",") + id;
      continue;
    }
    Error e = MakeError(ErrorKind::kWrongState,
                        started ? fmt::format("slurm:{} is running: only a waiting job can be {} (cancel ends a running one)",
                                              id, hold ? "held" : "released")
                                : fmt::format("slurm:{} has ended: nothing to {}", id, verb));
    if (code == kExitOk) code = ExitCodeFor(e.kind);
    Warn(e.message);
  }
  if (live.empty()) return code;
  const std::vector<std::string> argv = {"scontrol", verb, live};
  auto ran = (*side)->runner.Run(argv);
  if (!ran) return Fail(ran.error());
  if (ran->exit_code != 0) return Fail(CommandFailed(argv, *ran));
  ForgetPoll(poller);
  return code;
}

}  // namespace gpulane::cli
