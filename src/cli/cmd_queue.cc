// gpulane queue and gpulane show.
#include <chrono>
#include <ctime>
#include <fmt/format.h>
#include <memory>

#include "cli/client.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "render/queue_table.h"
#include "util/exit_codes.h"
#include "util/units.h"

namespace gpulane::cli {
namespace {

using nlohmann::json;

std::string GpusColumn(const json& spec) {
  const json& g = spec["request"];
  std::string out = std::to_string(g.value("count", 1));
  if (g.contains("mem_bytes")) out += "x" + FormatBytes(g["mem_bytes"].get<std::uint64_t>());
  return out;
}

// What the daemon answers for an empty queue; also the answer when no daemon runs (and none is
// installed): then no job exists anywhere, so the queue is empty rather than an error.
json EmptyQueueReply(bool as_json) {
  if (as_json) return {{"jobs", json::array()}};
  return {{"table", QueueTableHeader()}, {"count", 0}};
}

int RunQueue(bool as_json, bool all, const std::string& user) {
  json request = {{"op", "queue"}, {"all", all}};
  if (!user.empty()) request["user"] = user;
  if (!as_json) request["format"] = "table";  // rendered by the daemon: fast with 100,000 jobs
  auto answer = CallIfRunning(request);
  if (!answer) return Fail(answer.error());
  const json reply = answer->value_or(EmptyQueueReply(as_json));
  if (as_json) {
    fmt::print("{}\n", reply["jobs"].dump(2));
    return kExitOk;
  }
  const std::string& table = reply["table"].get_ref<const std::string&>();
  std::fwrite(table.data(), 1, table.size(), stdout);
  return kExitOk;
}

// The files the job's output went to ("output /p/train.log (from byte 1200)" for an appended file).
void PrintLogs(const json& logs) {
  auto line = [&](const char* label, const std::string& path, std::uint64_t offset) {
    if (path.empty()) return;
    fmt::print("  {:<9} {}{}\n", label, path, offset ? fmt::format(" (from byte {})", offset) : "");
  };
  const std::string out = logs.value("stdout_path", ""), err = logs.value("stderr_path", "");
  line("output", out, logs.value("stdout_offset", std::uint64_t{0}));
  if (err != out) line("errors", err, logs.value("stderr_offset", std::uint64_t{0}));
}

int RunShow(std::int64_t id, bool as_json) {
  auto answer = CallIfRunning({{"op", "show"}, {"id", id}});
  if (!answer) return Fail(answer.error());
  if (!*answer) return Fail(NoJobWithoutDaemon(id));
  const json& job = (**answer)["job"];
  if (as_json) {
    fmt::print("{}\n", job.dump(2));
    return kExitOk;
  }
  const json& spec = job["spec"];
  std::string argv;
  for (const auto& a : spec["argv"]) argv += (argv.empty() ? "" : " ") + a.get<std::string>();
  fmt::print("job {}  {}  {}\n", job["id"].get<std::int64_t>(), job["user"].get<std::string>(), job["state"].get<std::string>());
  fmt::print("  name      {}\n  command   {}\n  directory {}\n  gpus      {}\n", spec.value("name", ""), argv,
             spec.value("cwd", ""), GpusColumn(spec));
  if (job.contains("array_index")) fmt::print("  array     job {} task {}\n", job["array_job_id"].get<std::int64_t>(), job["array_index"].get<int>());
  if (!job.value("reason", "").empty()) fmt::print("  reason    {}\n", job["reason"].get<std::string>());
  if (!job["gpu_uuids"].empty()) fmt::print("  gpu uuids {}\n", job["gpu_uuids"].dump());
  if (job.contains("exit_code")) fmt::print("  exit code {}\n", job["exit_code"].get<int>());
  if (job.contains("logs")) PrintLogs(job["logs"]);
  return kExitOk;
}

}  // namespace

void RegisterQueue(CLI::App& app, Runner* run) {
  struct Options {
    bool json = false, all = false;
    std::string user;
    std::int64_t id = 0;
  };
  auto o = std::make_shared<Options>();
  CLI::App* queue = app.add_subcommand("queue", "List queued and running jobs");
  queue->add_flag("--json", o->json, "Print the jobs as JSON");
  queue->add_flag("-a,--all", o->all, "Include finished jobs (the last 1000)");
  queue->add_option("-u,--user", o->user, "Only this user's jobs");
  queue->callback([o, run] { *run = [o] { return RunQueue(o->json, o->all, o->user); }; });

  CLI::App* show = app.add_subcommand("show", "Show one job");
  show->add_option("job", o->id, "Job id")->required();
  show->add_flag("--json", o->json, "Print the job as JSON");
  show->callback([o, run] { *run = [o] { return RunShow(o->id, o->json); }; });
}

}  // namespace gpulane::cli
