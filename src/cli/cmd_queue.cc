// gpulane queue and gpulane show.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <functional>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fmt/format.h>
#include <memory>

#include "cli/client.h"
#include "proto/request_json.h"
#include "proto/telemetry_json.h"
#include "telemetry/job_usage.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/slurm_jobs.h"
#include "cli/watch_frames.h"
#include "lease/lease_dir.h"
#include "os/user_groups.h"
#include "render/queue_table.h"
#include "sched/partition.h"
#include "store/job_id.h"
#include "util/bytes_json.h"
#include "util/config.h"
#include "util/exit_codes.h"
#include "util/shell_words.h"
#include "util/strings.h"
#include "util/terminal_text.h"
#include "util/units.h"
#include "util/week_window.h"

namespace gpulane::cli {
namespace {

using nlohmann::json;

std::string GpusColumn(const json& spec) {
  const json& g = spec["request"];
  std::string out = std::to_string(g.value("count", 1));
  if (g.contains("mem_bytes")) out += "x" + FormatBytes(g["mem_bytes"].get<std::uint64_t>());
  return out;
}

// Writes a part of the listing to stdout as it came. Errors: kIo when stdout does not take it.
Status WriteOut(std::string_view text) {
  if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size())
    return MakeError(ErrorKind::kIo, fmt::format("cannot write the queue to stdout: {}", std::strerror(errno)));
  return Status::Ok();
}

// The listing: the daemon writes the text itself (the table, or the JSON of docs/protocol.md) and
// streams it (fast with 100,000 jobs: nothing is parsed or built here); this copies it to stdout.
// With no daemon (and none installed) no job exists anywhere, so the queue is empty rather than
// an error. An older daemon that does not stream answers in one reply, printed as before.
// The requests in the GPUs' line that are no queued job (`gpulane run`, Python leases: their job ids
// do not start with a digit; a queued job's supervisor is the daemon's row), in line order, each
// with its place in the whole line (1: first); `user`'s alone when given. A ticket that names no
// job (an older gpulane's) is left out: whose it is, `status` says.
struct WaitingRun {
  const lease::TicketRecord& ticket;
  unsigned place;
  const char* kind;  ///< "gpulane run", "Python lease", "lease"
  double waited_s;
};

void ForEachWaitingRun(const lease::DirContents& contents, const std::string& user, const gpulane::Clock& clock,
                       const std::function<void(const WaitingRun&)>& each) {
  for (std::size_t i = 0; i < contents.tickets.size(); ++i) {
    const lease::TicketRecord& t = contents.tickets[i];
    if (t.job_text.empty() || std::isdigit(static_cast<unsigned char>(t.job_text[0])) || (!user.empty() && t.request.user != user))
      continue;
    const char* kind = t.job_text[0] == 'r' ? "gpulane run" : t.job_text[0] == 'p' ? "Python lease" : "lease";
    each({t, static_cast<unsigned>(i + 1), kind, std::max(0.0, clock.WallS() - static_cast<double>(t.seq) / 1e9)});
  }
}

// The `gpulane run`s (and Python leases) that hold GPUs now: live leases that are no queued job's
// (their job ids do not start with a digit), `user`'s alone when given, each with its kind and
// its GPUs as a request (how many, the memory declared). An unreadable lease names no job: whose
// it is, `status` says.
struct RunningRun {
  const lease::LeaseRecord& lease;
  const char* kind;
  sched::Request request;
  double age_s;  ///< since it asked for its GPUs (or started, when that is not known)
};

void ForEachRunningRun(const lease::DirContents& contents, const std::string& user, const gpulane::Clock& clock,
                       const std::function<void(const RunningRun&)>& each) {
  for (const lease::LeaseRecord& l : contents.leases) {
    const std::string id = lease::JobText(l);
    if (!l.unreadable.empty() || id.empty() || std::isdigit(static_cast<unsigned char>(id[0])) || (!user.empty() && l.user != user))
      continue;
    sched::Request request;
    request.count = static_cast<unsigned>(l.gpus.size());
    if (!l.gpus.empty()) request.mem_bytes = l.gpus.front().mem_bytes;
    const char* kind = id[0] == 'r' ? "gpulane run" : id[0] == 'p' ? "Python lease" : "lease";
    each({l, kind, request, std::max(0.0, clock.WallS() - l.requested_s.value_or(l.started_s))});
  }
}

// What a running run's lease tells of its request: how many GPUs and the memory declared on each,
// nothing more (its lease does not say when it asked, for whom or how: not zeros, absent).
json RunRequestJson(const sched::Request& request) {
  json out = {{"count", request.count}};
  if (request.mem_bytes) out["mem_bytes"] = *request.mem_bytes;
  return out;
}

// The running and waiting runs as rows of the table.
std::string LineRows(const std::string& user, const gpulane::Clock& clock) {
  std::string rows;
  const lease::DirContents contents = ReadLeaseDirIfPresent(clock);
  ForEachRunningRun(contents, user, clock, [&](const RunningRun& r) {
    AppendRunningRow(lease::JobText(r.lease), r.lease.user, r.lease.label, r.request, r.age_s,
                     fmt::format("{}{}", r.kind, r.lease.parent.empty() ? "" : ", inside a job"), rows);
  });
  ForEachWaitingRun(contents, user, clock, [&](const WaitingRun& w) {
    const lease::TicketRecord& t = w.ticket;
    AppendLineRow(t.job_text, t.request.user, t.label, t.request, w.waited_s,
                  fmt::format("{}, {} in line{}", w.kind, Ordinal(w.place), t.parent.empty() ? "" : ", inside a job"), rows);
  });
  return rows;
}

// The waiting runs as objects of `queue --json`'s list (docs/queue.md), indented for their place in
// it: told from a queued job by their "line" object (and by having no numeric "id").
std::vector<std::string> LineObjects(const std::string& user, const gpulane::Clock& clock) {
  std::vector<std::string> objects;
  auto add = [&](const json& object) {
    std::string indented;
    for (char c : object.dump(2)) indented += c == '\n' ? std::string("\n  ") : std::string(1, c);
    objects.push_back(std::move(indented));
  };
  const lease::DirContents contents = ReadLeaseDirIfPresent(clock);
  ForEachRunningRun(contents, user, clock, [&](const RunningRun& r) {
    json uuids = json::array();
    for (const auto& gpu : r.lease.gpus) uuids.push_back(gpu.uuid);
    add({{"id_text", lease::JobText(r.lease)},
         {"user", r.lease.user},
         {"state", "running"},
         {"submit_time", r.lease.requested_s.value_or(r.lease.started_s)},
         {"start_time", r.lease.started_s},
         {"gpu_uuids", uuids},
         {"spec", {{"name", r.lease.label}, {"request", RunRequestJson(r.request)}}},
         {"run", {{"kind", r.kind}, {"inside_job", !r.lease.parent.empty()}}}});
  });
  ForEachWaitingRun(contents, user, clock, [&](const WaitingRun& w) {
    const lease::TicketRecord& t = w.ticket;
    const json object = {
        {"id_text", t.job_text},
        {"user", t.request.user},
        {"state", "waiting"},
        {"submit_time", static_cast<double>(t.seq) / 1e9},
        {"spec", {{"name", t.label}, {"request", proto::RequestToJson(t.request)}}},
        {"line", {{"kind", w.kind}, {"place", w.place}, {"inside_job", !t.parent.empty()}}}};
    add(object);
  });
  return objects;
}

// The queue as `queue` prints it, written through `out`.
int WriteQueue(bool as_json, bool all, const std::string& user, std::uint64_t limit,
               const std::function<Status(std::string_view)>& out, const gpulane::Clock& clock) {
  if (!user.empty())  // as `report --user` decides it, with or without a daemon
    if (auto known = UidOfUserOption(user); !known) return Fail(known.error());
  json request = {{"op", "queue"}, {"all", all}, {"stream", as_json ? "json" : "table"}};
  if (!user.empty()) request["user"] = user;
  if (limit) request["limit"] = limit;  // with --all; the daemon's default (1000) otherwise
  if (!as_json) request["format"] = "table";  // for an older daemon
  // The user's Slurm jobs (cli/slurm_jobs.h) follow this machine's: JSON output is then collected
  // and the Slurm jobs' objects put into the same list, as the waiting runs' are.
  const std::vector<std::string> slurm_rows = user.empty() ? SlurmQueueRows(all, as_json) : std::vector<std::string>{};
  // --json's list: the daemon's jobs, then the waiting runs (LineObjects), then the Slurm jobs.
  std::vector<std::string> tail;
  if (as_json) {
    tail = LineObjects(user, clock);
    tail.insert(tail.end(), slurm_rows.begin(), slurm_rows.end());
  }
  std::string collected;
  const bool collect = !tail.empty();
  auto sink = [&](std::string_view text) -> Status {
    if (!collect) return out(text);
    collected.append(text);
    return Status::Ok();
  };
  auto answer = StreamIfRunning(request, sink);
  if (!answer) return Fail(answer.error());
  // The daemon's word on its job store (unavailable since when; rows it cannot read): stderr, so
  // the listing on stdout stays exact.
  if (*answer && (*answer)->contains("warnings"))
    for (const auto& line : (**answer)["warnings"])
      if (line.is_string()) Warn(line.get<std::string>());
  Status written = Status::Ok();
  if (!*answer) written = sink(as_json ? "[]\n" : QueueTableHeader());
  else if ((*answer)->contains("stream")) written = Status::Ok();  // written as it came
  else if (as_json) written = sink((**answer)["jobs"].dump(2) + "\n");
  else written = sink((**answer)["table"].get_ref<const std::string&>());
  if (written.ok() && collect) {
    // "[]\n" or "[\n  {...},\n  {...}\n]\n" (render/queue_json.h): the tail goes before the "]".
    std::string items;
    for (const auto& row : tail) items += (items.empty() ? "  " : ",\n  ") + row;
    const bool empty = collected.rfind("[]", 0) == 0;
    if (empty) collected = "[\n" + items + "\n]\n";
    else collected = collected.substr(0, collected.rfind("\n]")) + ",\n" + items + "\n]\n";
    written = out(collected);
  } else if (written.ok() && !as_json) {
    written = out(LineRows(user, clock));
    for (const auto& row : slurm_rows)
      if (written.ok()) written = out(row);
  }
  // Under the table: the machine's partitions, open or closed now and until when (as `status`).
  if (written.ok() && !as_json)
    if (auto config = LoadConfig(); config && !config->partitions.empty()) {
      std::string lines;
      const double week_s = LocalWeekSeconds(std::time(nullptr));
      for (const PartitionConfig& p : config->partitions) lines += sched::StatusLine(p, week_s) + "\n";
      written = out(lines);
    }
  return written.ok() ? kExitOk : Fail(written.error());
}

int RunQueue(bool as_json, bool all, const std::string& user, std::uint64_t limit, const gpulane::Clock& clock) {
  return WriteQueue(as_json, all, user, limit, [](std::string_view text) { return WriteOut(text); }, clock);
}

// `queue --watch`: the table (or with --json one document a frame) every `interval_s`, redrawn in
// place on a terminal, until Ctrl-C. A frame that cannot be had ends the watch with its error.
int WatchQueue(bool as_json, bool all, const std::string& user, std::uint64_t limit, double interval_s,
               const gpulane::Clock& clock) {
  return WatchFrames(interval_s, 0, isatty(STDOUT_FILENO) == 1 && !as_json, [&](bool) -> Frame {
    std::string frame;
    const int code = WriteQueue(as_json, all, user, limit, [&](std::string_view text) {
      frame.append(text);
      return Status::Ok();
    }, clock);
    if (code != kExitOk) return code;
    return frame;
  });
}

// A text member of a job object for the terminal: escaped (util/terminal_text.h), "" when absent.
std::string Text(const json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? EscapeForTerminal(it->get_ref<const std::string&>()) : "";
}

// A byte member (argv's elements, cwd, paths: a string or {"b64": ...}, util/bytes_json.h) for the
// terminal: the bytes it holds, escaped, so that an argument "\xff" shows as such.
std::string BytesText(const json& value) {
  std::string bytes;
  return BytesFromJson(value, &bytes) ? EscapeForTerminal(bytes) : "?";
}
// A command line as sh reads it back, each word quoted where it has to be, escaped for the terminal.
std::string CommandText(const json& argv) {
  std::string out;
  for (const auto& a : argv) {
    std::string bytes;
    out += (out.empty() ? "" : " ") + (BytesFromJson(a, &bytes) ? EscapeForTerminal(QuoteForShellIfNeeded(bytes)) : "?");
  }
  return out;
}
std::string BytesText(const json& object, const char* key) {
  auto it = object.find(key);
  return it == object.end() ? "" : BytesText(*it);
}

// The files the job's output went to ("output /p/train.log (from byte 1200)" for an appended file).
void PrintLogs(const json& logs) {
  auto line = [&](const char* label, const std::string& path, std::uint64_t offset) {
    if (path.empty()) return;
    fmt::print("  {:<9} {}{}\n", label, path, offset ? fmt::format(" (from byte {})", offset) : "");
  };
  const std::string out = BytesText(logs, "stdout_path"), err = BytesText(logs, "stderr_path");
  line("output", out, logs.value("stdout_offset", std::uint64_t{0}));
  if (err != out) line("errors", err, logs.value("stderr_offset", std::uint64_t{0}));
}

// "2026-12-01 14:02:05": seconds since the epoch in local time; "-" when absent.
std::string LocalTime(const json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_number()) return "-";
  const std::time_t t = static_cast<std::time_t>(it->get<double>());
  std::tm tm{};
  localtime_r(&t, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S", &tm);
  return text;
}

// "12, 15_3": a dependency list of the spec (ids as numbers, tasks as "12_3"); "" when none.
std::string DependencyList(const json& spec, const char* field) {
  std::string out;
  for (const auto& dep : spec.value(field, json::array()))
    out += (out.empty() ? "" : ", ") + (dep.is_string() ? EscapeForTerminal(dep.get<std::string>()) : dep.dump());
  return out;
}

// What `show --json` had alone: the jobs it waits for, its time limit, and when it was submitted,
// started and ended (local time).
void PrintDependenciesAndTimes(const json& job) {
  const json& spec = job["spec"];
  if (auto after = DependencyList(spec, "after_ok"); !after.empty()) fmt::print("  after     {} (each must complete)\n", after);
  if (auto any = DependencyList(spec, "after_any"); !any.empty()) fmt::print("  after any {} (each must end)\n", any);
  const json request = spec.value("request", json::object());
  if (auto it = request.find("time_limit_s"); it != request.end() && it->is_number())
    fmt::print("  timelimit {}\n", FormatSeconds(it->get<double>()));
  fmt::print("  submitted {}\n", LocalTime(job, "submit_time"));
  if (job.contains("start_time")) fmt::print("  started   {}\n", LocalTime(job, "start_time"));
  if (job.contains("end_time")) fmt::print("  ended     {}\n", LocalTime(job, "end_time"));
}

// A retried job's attempts (or any job submitted with --retry), one line each:
//   attempt 1  2026-12-01 14:02:05 - 14:02:06  exit code 3  GPU0
void PrintAttempts(const json& job) {
  const int retries = job["spec"].value("retries", 0);
  const auto it = job.find("attempts");
  if (it == job.end() || !it->is_array() || it->empty() || (retries == 0 && it->size() <= 1)) return;
  // Requeued attempts (a preemption, a partition's close) use none of --retry.
  const int used = job.value("retries_used", 0), requeues = job.value("requeues", 0);
  const int preempted = job.value("preemptions", 0);
  fmt::print("  attempts  {}: {} of --retry {} used{}{}\n", it->size(), used, retries,
             requeues ? fmt::format(", requeued {}x (preempted, or stopped as its partition closed)", requeues) : "",
             preempted ? fmt::format(", preempted {}x", preempted) : "");
  for (const json& a : *it) {
    std::string outcome = a.contains("exit_code") ? fmt::format("exit code {}", a["exit_code"].get<int>()) : Text(a, "state");
    if (!a.value("reason", "").empty()) outcome += ": " + Text(a, "reason");
    std::string gpus;
    for (const auto& i : a.value("gpu_indices", json::array())) gpus += fmt::format("{}GPU{}", gpus.empty() ? "" : ",", i.get<unsigned>());
    fmt::print("    {:>3}  {} - {}  {}{}\n", a.value("attempt", 0) + 1, LocalTime(a, "start_time"), LocalTime(a, "end_time"),
               outcome, gpus.empty() ? "" : "  " + gpus);
  }
}

// The GPUs the job holds or last held: "GPU0 GPU-7f87..., GPU3 GPU-e98f..." (the index where the
// daemon knows it).
std::string GpuUuidsText(const json& job) {
  const json indices = job.value("gpu_indices", json::array());
  std::string out;
  for (std::size_t i = 0; i < job["gpu_uuids"].size(); ++i) {
    const json& index = i < indices.size() ? indices[i] : json();
    out += fmt::format("{}{}{}", out.empty() ? "" : ", ", index.is_number_unsigned() ? fmt::format("GPU{} ", index.get<unsigned>()) : "",
                       job["gpu_uuids"][i].is_string() ? EscapeForTerminal(job["gpu_uuids"][i].get<std::string>()) : "?");
  }
  return out;
}

// One job, as `gpulane show` prints it. Every text the job's owner (or NVML) chose is escaped for
// the terminal; `show --json` prints the exact values instead.
void PrintJob(const json& job) {
  const json& spec = job["spec"];
  // Another user's command line, directory and log paths come hidden (store/job_view.h): said so,
  // never shown as empty.
  const std::string argv = spec.value("argv_hidden", false) || !spec["argv"].is_array() ? Text(spec, "argv")
                                                                                      : CommandText(spec["argv"]);
  const std::string id = job.contains("id_text") ? Text(job, "id_text") : std::to_string(job["id"].get<std::int64_t>());
  fmt::print("job {}  {}  {}\n", id, Text(job, "user"), EscapeForTerminal(StateLabelOf(job.value("state", ""))));
  fmt::print("  name      {}\n  command   {}\n  directory {}\n  gpus      {}\n", Text(spec, "name"), argv,
             BytesText(spec, "cwd"), GpusColumn(spec));
  if (job.contains("array_index"))
    fmt::print("  array     {} (task {}, job id {})\n", job["array_job_id"].get<std::int64_t>(),
               job["array_index"].get<int>(), job["id"].get<std::int64_t>());
  PrintDependenciesAndTimes(job);
  if (!job.value("reason", "").empty()) fmt::print("  reason    {}\n", Text(job, "reason"));
  if (job.contains("isolation") && job["isolation"].is_string())
    fmt::print("  isolation {}\n", Text(job, "isolation"));
  else if (job.contains("isolation_setting"))  // not started yet (or not recorded): the daemon's setting
    fmt::print("  isolation not recorded for this job (the daemon's setting: {})\n", Text(job, "isolation_setting"));
  if (!job["gpu_uuids"].empty()) fmt::print("  gpu uuids {}\n", GpuUuidsText(job));
  if (job.contains("exit_code")) fmt::print("  exit code {}\n", job["exit_code"].get<int>());
  if (job.contains("logs")) PrintLogs(job["logs"]);
  if (job.contains("usage"))
    fmt::print("  usage     {}{}\n", EscapeForTerminal(telemetry::UsageLine(id, proto::UsageFromJson(job["usage"]))),
               job.value("usage_running", false) ? " (so far)" : "");
  PrintAttempts(job);
}

// `show` asks for the usage of this many jobs at most (an array's first tasks).
constexpr std::size_t kUsageLookups = 20;

// Adds "usage" (proto/telemetry_json.h UsageToJson) to `job` when the daemon's sampler metered it
// ("usage_running": true while it still runs); nothing when telemetry is off or it was not metered.
// Asked by the job's own id, a number, as its lease and usage record carry it (an array task's
// "12_3" is its lease's job_text only; its usage record, kept for `report`, has the number alone).
void AddUsage(json& job) {
  const std::string id = std::to_string(job["id"].get<std::int64_t>());
  auto answer = CallIfRunning({{"op", "usage"}, {"job_id", id}}, 5, /*error_replies=*/true);
  if (!answer || !*answer || !(**answer).value("ok", false) || !(**answer).contains("record")) return;
  job["usage"] = (**answer)["record"]["usage"];
  if ((**answer).value("running", false)) job["usage_running"] = true;
}

// A live `gpulane run` (r<pid>), as its lease tells it (what `status` knows): whose, its program,
// its GPUs and since when. --json: the same as an object.
int ShowRun(const lease::LeaseRecord& run, bool as_json) {
  json gpus = json::array();
  for (const auto& gpu : run.gpus)
    gpus.push_back(gpu.mem_bytes ? json{{"uuid", gpu.uuid}, {"mem_bytes", *gpu.mem_bytes}} : json{{"uuid", gpu.uuid}});
  json out = {{"id_text", run.job_id}, {"kind", "run"}, {"state", "running"}, {"user", run.user}, {"pid", run.pid},
              {"name", run.label}, {"gpus", gpus}, {"start_time", run.started_s}};
  if (run.time_limit_s) out["time_limit_s"] = *run.time_limit_s;
  if (as_json) {
    fmt::print("{}\n", out.dump(2));
    return kExitOk;
  }
  std::string uuids;
  for (const auto& gpu : run.gpus) uuids += (uuids.empty() ? "" : ", ") + EscapeForTerminal(gpu.uuid);
  fmt::print("job {}  {}  running (a `gpulane run`, not a queued job: stop it with Ctrl-C where it runs, or kill {})\n",
             run.job_id, EscapeForTerminal(run.user), run.job_id.substr(1));
  fmt::print("  name      {}\n  gpus      {}\n  started   {}\n", EscapeForTerminal(run.label),
             uuids.empty() ? "none" : uuids, LocalTime(out, "start_time"));
  if (run.time_limit_s) fmt::print("  timelimit {}\n", FormatSeconds(*run.time_limit_s));
  return kExitOk;
}

// One job (a job, a task), or with an array's id or 12_[1-3] each task, a blank line between.
// --json: the job's object, or a list of them for an array or a list of tasks. A run's id
// (r<pid>): the live run, or "no running gpulane run" (RunIdError).
int RunShow(const std::string& word, bool as_json) {
  if (store::IsRunId(word)) {
    if (auto run = LiveRunLease(word)) return ShowRun(*run, as_json);
    return Fail(RunIdError(word));
  }
  std::vector<std::string> slurm_ids, local;
  SplitSlurmIds({word}, &slurm_ids, &local);
  if (!slurm_ids.empty()) return ShowSlurmJob(slurm_ids.front(), as_json);
  auto ids = JobIdArgs({word});
  if (!ids) return Fail(ids.error());
  if (ids->size() != 1)
    return Fail(MakeError(ErrorKind::kInvalidArgument,
                          fmt::format("show {}: give one job id (an array's id shows all its tasks, 12_[1-3] several)", word)));
  auto answer = CallIfRunning({{"op", "show"}, {"id", ids->front()}}, 30, /*error_replies=*/true);
  if (!answer) return Fail(answer.error());
  if (!*answer) return Fail(NoJobWithoutDaemon(ids->front()));
  const json& reply = **answer;
  const int code = ReportFailures(reply);
  if (!reply.value("ok", false)) return code;
  json jobs = reply["jobs"];
  // What the daemon's sampler metered of each job that ran (a few tasks of an array at most: one
  // request each).
  for (std::size_t i = 0; i < jobs.size() && i < kUsageLookups; ++i)
    if (jobs[i].contains("start_time")) AddUsage(jobs[i]);
  if (as_json) {
    fmt::print("{}\n", (reply.contains("job") ? jobs.at(0) : jobs).dump(2));
    return code;
  }
  bool first = true;
  for (const auto& job : jobs) {
    if (!first) fmt::print("\n");
    first = false;
    PrintJob(job);
  }
  return code;
}

}  // namespace

void RegisterQueue(CLI::App& app, Runner* run, const os::Env& env) {
  struct Options {
    bool json = false, all = false;
    std::string user, id, watch;
    std::uint64_t limit = 0;
  };
  auto o = std::make_shared<Options>();
  CLI::App* queue = app.add_subcommand("queue", "List queued and running jobs");
  queue->add_flag("--json", o->json, "Print the jobs as JSON");
  CLI::Option* all = queue->add_flag("-a,--all", o->all, "Include finished jobs (the newest 1000; --limit for more)");
  queue->add_option("-u,--user", o->user, "Only this user's jobs");
  queue->add_option("--limit", o->limit, "With --all: list the newest N jobs (default 1000)")
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{10000000}))
      ->needs(all);
  queue->add_option("--watch", o->watch, "Refresh every SECONDS (default 2) until Ctrl-C; with --json, one document a frame")
      ->expected(0, 1)
      ->type_name("SECONDS");
  queue->callback([o, run, queue, &env] {
    const bool watch = queue->count("--watch") > 0;
    *run = [o, watch, &env] {
      if (!watch) return RunQueue(o->json, o->all, o->user, o->limit, env.clock);
      auto interval_s = o->watch.empty() ? Result<double>(2.0) : ParseDurationOrSecondsS(o->watch);
      if (!interval_s || *interval_s < 0.1)
        return Fail(MakeError(ErrorKind::kInvalidArgument,
                              fmt::format("--watch '{}': give the refresh interval in seconds, at least 0.1", EscapeForTerminal(o->watch))));
      return WatchQueue(o->json, o->all, o->user, o->limit, *interval_s, env.clock);
    };
  });

  CLI::App* show = app.add_subcommand("show", "Show a job, or every task of an array");
  show->add_option("job", o->id, "Job id: 12 (an array's id: all its tasks), 12_3 (task 3 of array 12), 12_[1-3]")->required();
  show->add_flag("--json", o->json, "Print the job as JSON");
  show->callback([o, run] { *run = [o] { return RunShow(o->id, o->json); }; });
}

}  // namespace gpulane::cli
