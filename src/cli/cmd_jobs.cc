// gpulane cancel, hold, release, wait, logs: acting on queued jobs.
#include <unistd.h>

#include <chrono>
#include <fmt/format.h>
#include <memory>
#include <thread>

#include "cli/client.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "util/exit_codes.h"

namespace gpulane::cli {
namespace {

using nlohmann::json;

int RunCancel(const std::vector<std::int64_t>& ids, const std::string& user, const std::string& name) {
  if (ids.empty() && user.empty() && name.empty())
    return Fail(MakeError(ErrorKind::kInvalidArgument, "cancel: give job ids, --user or --name"));
  json request = {{"op", "cancel"}, {"ids", ids}};
  if (!user.empty()) request["user"] = user;
  if (!name.empty()) request["name"] = name;
  auto reply = Call(request);
  if (!reply) return Fail(reply.error());
  for (const auto& e : (*reply)["errors"]) Warn(e.get<std::string>());
  for (const auto& id : (*reply)["cancelled"]) fmt::print("{}\n", id.get<std::int64_t>());
  return kExitOk;
}

int RunHold(const std::vector<std::int64_t>& ids, bool hold) {
  auto reply = Call({{"op", hold ? "hold" : "release"}, {"ids", ids}});
  if (!reply) return Fail(reply.error());
  for (const auto& e : (*reply)["errors"]) Warn(e.get<std::string>());
  return kExitOk;
}

// Calls the daemon; when it goes away mid-call (a restart), tries again for up to 10 minutes, so
// `wait` and `logs -f` outlive a daemon restart as the jobs themselves do.
Result<json> CallSurvivingRestarts(const json& request, double timeout_s) {
  auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(10);
  while (true) {
    auto reply = Call(request, timeout_s);
    const bool lost = !reply && (reply.error().kind == ErrorKind::kIo || reply.error().kind == ErrorKind::kUnavailable);
    if (!lost || std::chrono::steady_clock::now() > give_up) return reply;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

int RunWait(const std::vector<std::int64_t>& ids) {
  auto reply = CallSurvivingRestarts({{"op", "wait"}, {"ids", ids}}, -1);
  if (!reply) return Fail(reply.error());
  int code = kExitOk;
  for (const auto& job : (*reply)["jobs"]) {
    const std::string state = job["state"];
    const bool ran = job.contains("exit_code");
    fmt::print("{} {}{}\n", job["id"].get<std::int64_t>(), state, ran ? fmt::format(" {}", job["exit_code"].get<int>()) : "");
    int job_code = ran ? job["exit_code"].get<int>() : kExitJobDidNotRun;
    if (code == kExitOk) code = job_code;
  }
  return code;
}

int RunLogs(std::int64_t id, bool follow, bool err) {
  std::uint64_t offset = 0;
  while (true) {
    json request = {{"op", "logs"}, {"id", id}, {"offset", offset}, {"stream", err ? "err" : "out"}};
    auto reply = follow ? CallSurvivingRestarts(request, 30) : Call(request);
    if (!reply) return Fail(reply.error());
    const std::string data = (*reply)["data"];
    std::fwrite(data.data(), 1, data.size(), stdout);
    std::fflush(stdout);
    offset = (*reply)["offset"].get<std::uint64_t>();
    if (!follow || ((*reply)["finished"].get<bool>() && data.empty())) return kExitOk;
    if (data.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

}  // namespace

void RegisterJobCommands(CLI::App& app, Runner* run) {
  struct Options {
    std::vector<std::int64_t> ids;
    std::string user, name;
    bool follow = false, err = false;
    std::int64_t id = 0;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cancel = app.add_subcommand("cancel", "Cancel jobs (pending ones never start; running ones get SIGTERM)");
  cancel->add_option("jobs", o->ids, "Job ids (an array's id cancels all its tasks)");
  cancel->add_option("-u,--user", o->user, "All jobs of this user (yours, unless you are an admin)");
  cancel->add_option("-n,--name", o->name, "All jobs with this name");
  cancel->callback([o, run] { *run = [o] { return RunCancel(o->ids, o->user, o->name); }; });

  for (bool hold : {true, false}) {
    CLI::App* sub = app.add_subcommand(hold ? "hold" : "release",
                                       hold ? "Keep pending jobs from starting" : "Let held jobs start");
    sub->add_option("jobs", o->ids, "Job ids")->required();
    sub->callback([o, run, hold] { *run = [o, hold] { return RunHold(o->ids, hold); }; });
  }

  CLI::App* wait = app.add_subcommand("wait", "Wait for jobs to end; exits with the (first failing) job's exit status");
  wait->add_option("jobs", o->ids, "Job ids")->required();
  wait->callback([o, run] { *run = [o] { return RunWait(o->ids); }; });

  CLI::App* logs = app.add_subcommand("logs", "Print a job's output");
  logs->add_option("job", o->id, "Job id")->required();
  logs->add_flag("-f,--follow", o->follow, "Keep printing until the job ends");
  logs->add_flag("--err", o->err, "The stderr log (when it has its own file)");
  logs->callback([o, run] { *run = [o] { return RunLogs(o->id, o->follow, o->err); }; });
}

}  // namespace gpulane::cli
