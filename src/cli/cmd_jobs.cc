// gpulane cancel, hold, release, wait, logs: acting on queued jobs.
#include <unistd.h>

#include <chrono>
#include <fmt/format.h>
#include <memory>
#include <map>
#include <set>
#include <thread>

#include "cli/client.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/slurm_jobs.h"
#include "store/job_id.h"
#include "util/bytes_json.h"
#include "util/exit_codes.h"
#include "util/terminal_text.h"

namespace gpulane::cli {
namespace {

using nlohmann::json;

// "--user bob --name train", as the daemon names a cancel's filter.
std::string Filter(const std::string& user, const std::string& name) {
  std::string out = user.empty() ? "" : "--user " + user;
  if (!name.empty()) out += (out.empty() ? "" : " ") + ("--name " + name);
  return out;
}

// The command's result, one line a job it acted on (the ids of the reply's `field`): `done`, or
// `in_progress` for those whose change completes once their supervisor has acted on it, or
// `before_start` (when given) for those cancelled while they waited for GPUs. Tasks of one array in
// a row are one line, as `show` takes them: "released job 12_[0-2999] (3000 tasks)".
void PrintActedOn(const json& reply, const char* field, const char* done, const char* in_progress,
                  const char* before_start = nullptr) {
  std::map<std::string, const char*> words;  // id -> its words, unless `done`
  for (const auto& id : reply.value("in_progress_text", json::array()))
    if (id.is_string()) words[id.get<std::string>()] = in_progress;
  if (before_start)
    for (const auto& id : reply.value("before_start_text", json::array()))
      if (id.is_string()) words[id.get<std::string>()] = before_start;
  std::vector<std::string> run;  // ids in a row with the same words
  const char* run_words = done;
  auto print_run = [&] {
    for (const store::IdGroup& group : store::GroupTaskIds(run)) {
      // The count goes with the ids: "holding job 12_[2-5] (4 tasks) (it leaves the line ...)".
      const std::string ids =
          EscapeForTerminal(group.text) + (group.count > 1 ? fmt::format(" ({} tasks)", group.count) : "");
      fmt::print(fmt::runtime(run_words), ids);
      fmt::print("\n");
    }
    run.clear();
  };
  for (const auto& id : reply.value(field, json::array())) {
    if (!id.is_string()) continue;
    const std::string& text = id.get_ref<const std::string&>();
    const auto found = words.find(text);
    const char* these = found == words.end() ? done : found->second;
    if (!run.empty() && these != run_words) print_run();
    run_words = these;
    run.push_back(text);
  }
  print_run();
}

int RunCancel(const std::vector<std::string>& all_words, const std::string& user, const std::string& name) {
  // Slurm jobs (slurm:ID) are cancelled with scancel, the rest by the daemon.
  std::vector<std::string> slurm_ids, words;
  SplitSlurmIds(all_words, &slurm_ids, &words);
  if (!slurm_ids.empty()) {
    const int slurm_code = CancelSlurmJobs(slurm_ids);
    if (words.empty() && user.empty() && name.empty()) return slurm_code;
    const int local_code = RunCancel(words, user, name);
    return slurm_code != kExitOk ? slurm_code : local_code;
  }
  auto ids = JobIdArgs(words);
  if (!ids) return Fail(ids.error());
  if (ids->empty() && user.empty() && name.empty())
    return Fail(MakeError(ErrorKind::kInvalidArgument, "cancel: give job ids, --user or --name"));
  json request = {{"op", "cancel"}, {"ids", *ids}};
  if (!user.empty()) request["user"] = user;
  if (!name.empty()) request["name"] = name;
  // A large cancel is answered once its last part is stored (other clients are served meanwhile):
  // 300,000 jobs take seconds, more on a busy machine.
  auto answer = CallIfRunning(request, 300, /*error_replies=*/true);
  if (!answer) return Fail(answer.error());
  if (!*answer)  // no daemon: no jobs
    return Fail(ids->empty() ? NothingWithoutDaemon("no queued or running job matches " + Filter(user, name))
                             : NoJobWithoutDaemon(ids->front()));
  const json& reply = **answer;
  const int code = ReportFailures(reply);
  PrintActedOn(reply, "cancelled_text", "cancelled job {}", "cancelling job {} (SIGTERM sent; SIGKILL after its kill grace)",
               "cancelled job {} before it started (it was waiting for GPUs; its command never ran)");
  return code;
}

int RunHold(const std::vector<std::string>& all_words, bool hold) {
  // Slurm jobs (slurm:ID) are held and released with scontrol, the rest by the daemon.
  std::vector<std::string> slurm_ids, words;
  SplitSlurmIds(all_words, &slurm_ids, &words);
  if (!slurm_ids.empty()) {
    const int slurm_code = HoldSlurmJobs(slurm_ids, hold);
    if (words.empty()) return slurm_code;
    const int local_code = RunHold(words, hold);
    return slurm_code != kExitOk ? slurm_code : local_code;
  }
  auto ids = JobIdArgs(words);
  if (!ids) return Fail(ids.error());
  // Like a cancel, a large hold or release is answered once its last part is stored.
  auto answer = CallIfRunning({{"op", hold ? "hold" : "release"}, {"ids", *ids}}, 300, /*error_replies=*/true);
  if (!answer) return Fail(answer.error());
  if (!*answer) return Fail(NoJobWithoutDaemon(ids->front()));
  const int code = ReportFailures(**answer);
  PrintActedOn(**answer, "changed_text", hold ? "held job {}" : "released job {}",
               "holding job {} (it leaves the line for GPUs; held once its supervisor has let go)");
  return code;
}

// How long `wait` and `logs -f` wait for a daemon that went away to come back.
constexpr auto kRestartPatience = std::chrono::minutes(10);

// Calls the daemon (CallIfRunning: starts the user's own again while its state holds jobs); when
// it goes away mid-call or, with `answered_before` (it served this command already), does not
// answer, tries again every 0.5 s for up to kRestartPatience, so that `wait` and `logs -f` outlive
// a daemon restart as the jobs themselves do. The system daemon comes back by systemd, a per-user
// one by this very call.
// Says once on stderr that it waits. Errors: CallIfRunning's; kUnavailable when it gave up.
Result<std::optional<json>> CallSurvivingRestarts(const json& request, double timeout_s, bool answered_before) {
  const auto give_up = std::chrono::steady_clock::now() + kRestartPatience;
  bool lost = answered_before, warned = false;
  while (true) {
    auto reply = CallIfRunning(request, timeout_s);
    if (reply && *reply) return reply;
    const bool none_answers = reply.ok() || reply.error().kind == ErrorKind::kUnavailable;
    if (!reply && reply.error().kind == ErrorKind::kIo) lost = true;  // it went away mid-call
    else if (!none_answers || !lost) return reply;
    if (std::chrono::steady_clock::now() > give_up)
      return MakeError(ErrorKind::kUnavailable, "the gpulane daemon went away and did not come back within 10 minutes");
    if (none_answers && !warned) {
      Warn(reply ? "the gpulane daemon went away; waiting up to 10 minutes for it to come back"
                 : "the gpulane system daemon went away; waiting up to 10 minutes for it to come back");
      warned = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

int RunWait(const std::vector<std::string>& all_words) {
  std::vector<std::string> slurm_ids, words;
  SplitSlurmIds(all_words, &slurm_ids, &words);
  if (!slurm_ids.empty()) {
    if (!words.empty())
      return Fail(MakeError(ErrorKind::kInvalidArgument,
                            "wait: give Slurm jobs (slurm:ID) and this machine's jobs to two wait commands"));
    return WaitSlurmJobs(slurm_ids);
  }
  auto ids = JobIdArgs(words);
  if (!ids) return Fail(ids.error());
  // First which ids name no job, so that a mistyped one is reported now, not when the others end.
  auto checked = CallIfRunning({{"op", "wait"}, {"ids", *ids}, {"check", true}}, 30, /*error_replies=*/true);
  if (!checked) return Fail(checked.error());
  if (!*checked) return Fail(NoJobWithoutDaemon(ids->front()));
  // Ids that name no job fail before any job ends: theirs is the first failure.
  int code = ReportFailures(**checked);
  if (!(**checked).value("ok", false)) return code;
  auto answer = CallSurvivingRestarts({{"op", "wait"}, {"ids", *ids}}, -1, false);
  if (!answer) return Fail(answer.error());
  if (!*answer) return Fail(NoJobWithoutDaemon(ids->front()));
  const json& reply = **answer;
  for (const auto& job : reply["jobs"]) {
    const std::string state = job["state"];
    const bool ran = job.contains("exit_code");
    fmt::print("{} {}{}\n", EscapeForTerminal(job.value("id_text", std::to_string(job["id"].get<std::int64_t>()))),
               EscapeForTerminal(state),
               ran ? fmt::format(" {}", job["exit_code"].get<int>()) : "");
    int job_code = ran ? job["exit_code"].get<int>() : kExitJobDidNotRun;
    if (code == kExitOk) code = job_code;
  }
  return code;
}

int RunLogs(const std::string& word, bool follow, bool err) {
  std::vector<std::string> slurm_ids, local;
  SplitSlurmIds({word}, &slurm_ids, &local);
  if (!slurm_ids.empty()) return SlurmLogs(slurm_ids.front(), follow, err);
  auto ids = JobIdArgs({word});
  if (!ids) return Fail(ids.error());
  if (ids->size() != 1)
    return Fail(MakeError(ErrorKind::kInvalidArgument,
                          fmt::format("logs {}: logs prints one job's output: name one job, e.g. gpulane logs {}", word,
                                      ids->front())));
  const std::string id = ids->front();
  std::uint64_t offset = 0;
  for (bool answered = false;; answered = true) {
    json request = {{"op", "logs"}, {"id", id}, {"offset", offset}, {"stream", err ? "err" : "out"}};
    auto answer = follow ? CallSurvivingRestarts(request, 30, answered) : CallIfRunning(request);
    if (!answer) return Fail(answer.error());
    if (!*answer) return Fail(NoJobWithoutDaemon(id));
    const json& reply = **answer;
    std::string data;  // bytes: a string, or {"b64": ...} for output that is not UTF-8 (util/bytes_json.h)
    if (!BytesFromJson(reply["data"], &data))
      return Fail(MakeError(ErrorKind::kInternal, "the daemon's answer to logs holds no output data"));
    std::fwrite(data.data(), 1, data.size(), stdout);
    std::fflush(stdout);
    offset = reply["offset"].get<std::uint64_t>();
    if (!follow || (reply["finished"].get<bool>() && data.empty())) return kExitOk;
    if (data.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

}  // namespace

void RegisterJobCommands(CLI::App& app, Runner* run, const os::Env&) {
  struct Options {
    std::vector<std::string> ids;
    std::string user, name;
    bool follow = false, err = false;
    std::string id;
  };
  auto o = std::make_shared<Options>();
  const std::string ids_help = "Job ids: 12, an array's id (all its tasks), 12_3 (task 3 of array 12), 12_[1-3,7], slurm:1234 (a Slurm job)";
  CLI::App* cancel = app.add_subcommand("cancel", "Cancel jobs (pending ones never start; running ones get SIGTERM); prints 'cancelled job 12' (or 'cancelling job 12 ...' for one being stopped) for each; tasks of an array as 'cancelled job 12_[0-99] (100 tasks)'");
  cancel->add_option("jobs", o->ids, ids_help);
  cancel->add_option("-u,--user", o->user, "All jobs of this user (yours, unless you are an admin)");
  cancel->add_option("-n,--name", o->name, "All jobs with this name");
  cancel->callback([o, run] { *run = [o] { return RunCancel(o->ids, o->user, o->name); }; });

  for (bool hold : {true, false}) {
    CLI::App* sub = app.add_subcommand(hold ? "hold" : "release",
                                       hold ? "Keep pending jobs from starting; prints 'held job 12' for each (an array's tasks: 'held job 12_[0-99] (100 tasks)')" : "Let held jobs start; prints 'released job 12' for each (an array's tasks: 'released job 12_[0-99] (100 tasks)')");
    sub->add_option("jobs", o->ids, ids_help)->required();
    sub->callback([o, run, hold] { *run = [o, hold] { return RunHold(o->ids, hold); }; });
  }

  CLI::App* wait = app.add_subcommand("wait", "Wait for jobs to end; exits with the (first failing) job's exit status");
  wait->add_option("jobs", o->ids, ids_help)->required();
  wait->callback([o, run] { *run = [o] { return RunWait(o->ids); }; });

  CLI::App* logs = app.add_subcommand("logs", "Print a job's output");
  logs->add_option("job", o->id, "Job id: 12, or 12_3 for task 3 of array 12")->required();
  logs->add_flag("-f,--follow", o->follow, "Keep printing until the job ends");
  logs->add_flag("--err", o->err, "The stderr log (when it has its own file)");
  logs->callback([o, run] { *run = [o] { return RunLogs(o->id, o->follow, o->err); }; });
}

}  // namespace gpulane::cli
