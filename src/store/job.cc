#include "store/job.h"

#include <algorithm>
#include <cstdint>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "proto/codec.h"
#include "proto/request_json.h"
#include "store/job_fields.h"
#include "util/bytes_json.h"
#include "util/json_tree_writer.h"

namespace gpulane::store {

using nlohmann::json;

namespace {

constexpr const char* kNames[] = {"pending", "held", "launching", "running", "completed", "failed", "cancelled", "timeout"};

// Numbers (job ids) or strings in the job id notation ("12", "12_3", "12_[1-3]"), each kept once;
// `seen` holds those of the fields read before. More than `max` in all is an error, found before
// the rest is expanded.
Result<std::vector<JobRef>> DepsFromJson(const json& j, const char* field, std::set<std::pair<std::int64_t, int>>& seen,
                                         std::size_t max) {
  auto bad = [&](const std::string& why) {
    return MakeError(ErrorKind::kInvalidArgument, fmt::format("spec: {}: {}", field, why));
  };
  std::vector<JobRef> deps;
  if (!j.contains(field)) return deps;
  if (!j[field].is_array()) return bad("give a list of job ids");
  for (const json& dep : j[field]) {
    auto refs = JobRefsFromJson(dep);
    if (!refs) return bad(refs.error().message);
    for (const JobRef& ref : *refs) {
      if (!seen.insert({ref.id, ref.task.value_or(-1)}).second) continue;
      if (seen.size() > max)
        return MakeError(ErrorKind::kInvalidArgument,
                         fmt::format("--after and --after-any name more than {} jobs, the most one job may wait for: wait "
                                     "for an array by its id (one name for all its tasks), or for one job that waits "
                                     "for the others",
                                     max));
      deps.push_back(ref);
    }
  }
  return deps;
}

}  // namespace

const char* StateName(JobState s) { return kNames[static_cast<int>(s)]; }

std::optional<JobState> ParseState(const std::string& name) {
  for (int i = 0; i < 8; ++i)
    if (name == kNames[i]) return static_cast<JobState>(i);
  return std::nullopt;
}

bool IsFinished(JobState s) {
  return s == JobState::kCompleted || s == JobState::kFailed || s == JobState::kCancelled || s == JobState::kTimeout;
}

std::string ExpandLogPath(const std::string& pattern, const Job& job) {
  std::string out;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%' || i + 1 == pattern.size()) {
      out += pattern[i];
      continue;
    }
    char c = pattern[++i];
    if (c == 'j') out += std::to_string(job.id);
    else if (c == 'a') out += job.array_index ? std::to_string(*job.array_index) : "";
    else if (c == 'A') out += std::to_string(job.array_job_id.value_or(job.id));
    else if (c == 'u') out += job.user();
    else if (c == '%') out += '%';
    else out += std::string("%") + c;
  }
  if (out.empty() || out.front() != '/')  // relative to the job's directory: "/" + name at the root, not "//"
    out = job.spec.cwd + (!job.spec.cwd.empty() && job.spec.cwd.back() == '/' ? "" : "/") + out;
  return out;
}

std::string OutputPath(const Job& job) {
  return ExpandLogPath(job.spec.output_path.empty() ? (job.array_index ? "gpulane-%A_%a.out" : "gpulane-%j.out")
                                                    : job.spec.output_path,
                       job);
}

std::string ErrorPath(const Job& job) {
  return job.spec.error_path.empty() ? OutputPath(job) : ExpandLogPath(job.spec.error_path, job);
}

bool HasDefaultOutputPath(const Job& job) { return job.spec.output_path.empty(); }

JobLogs LogsOf(const Job& job) {
  if (!job.logs.unrecorded) return job.logs;
  JobLogs logs;
  logs.stdout_path = OutputPath(job);
  logs.stderr_path = ErrorPath(job);
  return logs;
}

json LogsToJson(const JobLogs& logs) {
  JsonTreeWriter w;
  WriteLogs(w, logs);
  return w.Take();
}

Result<JobLogs> ParseLogs(const json& j) {
  if (!j.is_object()) return MakeError(ErrorKind::kInvalidArgument, "logs: must be a JSON object");
  JobLogs logs;
  // Paths are bytes (util/bytes_json.h): a string, or {"b64": ...}.
  for (auto [key, path] : {std::pair{"stdout_path", &logs.stdout_path}, std::pair{"stderr_path", &logs.stderr_path}})
    if (auto it = j.find(key); it != j.end() && !BytesFromJson(*it, path))
      return MakeError(ErrorKind::kInvalidArgument, fmt::format("logs: \"{}\" must be a string or {{\"b64\": ...}}", key));
  proto::FieldDecoder fields(j, proto::FieldDecoder::Prefix{"logs: "});
  fields("stdout_offset", logs.stdout_offset);
  fields("stderr_offset", logs.stderr_offset);
  fields("stdout_end", logs.stdout_end);
  fields("stderr_end", logs.stderr_end);
  if (!fields.error().empty()) return MakeError(ErrorKind::kInvalidArgument, fields.error());
  return logs;
}

JobLogs LogsFromJson(const json& j) {
  auto logs = ParseLogs(j);
  return logs ? std::move(logs).value() : JobLogs{};
}

std::size_t StringBytes(const std::vector<std::string>& strings) {
  std::size_t bytes = 0;
  for (const auto& s : strings) bytes += s.size() + 1;
  return bytes;
}

namespace {
// "1.5 MiB": sizes near the limits, told apart to a tenth (FormatBytes rounds MiB down).
std::string Mib(std::size_t bytes) { return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1 << 20)); }
}  // namespace

Status CheckSpecLimits(const JobSpec& spec) {
  if (std::size_t bytes = StringBytes(spec.argv); bytes > kMaxArgvBytes)
    return MakeError(ErrorKind::kInvalidArgument,
                     fmt::format("the command line is {}, more than the {} a job may have: pass large inputs in a file",
                                 Mib(bytes), Mib(kMaxArgvBytes)));
  if (std::size_t bytes = StringBytes(spec.env); bytes > kMaxEnvBytes) {
    std::string largest;
    std::size_t largest_bytes = 0;
    for (const auto& e : spec.env)
      if (e.size() > largest_bytes) largest_bytes = e.size(), largest = e.substr(0, e.find('='));
    return MakeError(ErrorKind::kInvalidArgument,
                     fmt::format("the environment is {}, more than the {} a job may carry (the largest variable is {}, "
                                 "{}): unset large variables (env -u {} gpulane submit ...) or pass such data in a file",
                                 Mib(bytes), Mib(kMaxEnvBytes), largest.substr(0, 64), Mib(largest_bytes),
                                 largest.substr(0, 64)));
  }
  return Status::Ok();
}

json SpecToJson(const JobSpec& s, bool with_env) {
  // argv, cwd, env and the log paths are bytes: a value that is not UTF-8 is {"b64": ...} (util/bytes_json.h).
  JsonTreeWriter w;
  WriteSpec(w, s, with_env);
  return w.Take();
}

Status SpecFromJson(const json& j, JobSpec* s, SpecLimits limits) {
  auto bad = [](const std::string& why) { return Status(MakeError(ErrorKind::kInvalidArgument, "spec: " + why)); };
  if (!j.is_object()) return bad("must be a JSON object");
  auto request = j.contains("request") ? proto::RequestFromJson(j["request"])
                                       : Result<sched::Request>(MakeError(ErrorKind::kInvalidArgument, "request: missing"));
  if (!request) return MakeError(ErrorKind::kInvalidArgument, "spec: " + request.error().message);
  s->request = std::move(request).value();
  // The byte fields: a JSON string, or {"b64": "..."} for bytes that are not UTF-8 (util/bytes_json.h).
  const auto bytes = [&j](const char* key, std::string* out) {
    auto it = j.find(key);
    return it == j.end() ? (out->clear(), true) : BytesFromJson(*it, out);
  };
  std::vector<std::string> argv, env;
  const bool bytes_ok = j.contains("argv") && BytesListFromJson(j["argv"], &argv) && j.contains("cwd") &&
                        bytes("cwd", &s->cwd) && bytes("output_path", &s->output_path) &&
                        bytes("error_path", &s->error_path) && (!j.contains("env") || BytesListFromJson(j["env"], &env));
  const char* types = "argv (list of strings), cwd (string) and the optional fields must have their documented types";
  if (!bytes_ok) return bad(types);
  s->argv = std::move(argv);
  s->env = std::move(env);
  try {
    s->name = j.value("name", "");
    s->kill_grace_s = j.value("kill_grace_s", 10.0);
    s->retries = 0;
    if (auto it = j.find("retries"); it != j.end()) {
      // An integer, compared before any conversion (get<int> of 1e20 is undefined behaviour).
      const bool in_range = it->is_number_unsigned()  ? it->get<std::uint64_t>() <= static_cast<std::uint64_t>(kMaxRetries)
                            : it->is_number_integer() ? it->get<std::int64_t>() >= 0 && it->get<std::int64_t>() <= kMaxRetries
                                                      : false;
      if (!in_range) return bad(fmt::format("retries must be a whole number from 0 to {}", kMaxRetries));
      s->retries = it->get<int>();
    }
  } catch (const json::exception&) {
    return bad(types);
  }
  s->notify.reset();
  if (auto it = j.find("notify"); it != j.end() && !it->is_null()) {
    auto target = NotifyTargetFromJson(*it);
    if (!target) return bad(target.error().message);
    s->notify = std::move(target).value();
  }
  if (s->argv.empty()) return bad("argv is empty: give the command to run");
  // The kernel takes these as C strings: a NUL would cut the value short, so the job would not run
  // with the bytes it was given.
  const auto has_nul = [](const std::string& v) { return v.find('\0') != std::string::npos; };
  if (std::any_of(s->argv.begin(), s->argv.end(), has_nul) || std::any_of(s->env.begin(), s->env.end(), has_nul) ||
      has_nul(s->cwd) || has_nul(s->output_path) || has_nul(s->error_path))
    return bad("argv, env, cwd and the log paths cannot hold NUL bytes");
  std::set<std::pair<std::int64_t, int>> seen;
  const std::size_t max_deps = limits == SpecLimits::kSubmitted ? kMaxDependencies : SIZE_MAX;
  for (auto [field, deps] : {std::pair{"after_ok", &s->after_ok}, std::pair{"after_any", &s->after_any}}) {
    auto parsed = DepsFromJson(j, field, seen, max_deps);
    if (!parsed) return parsed.error();
    *deps = std::move(parsed).value();
  }
  if (limits == SpecLimits::kSubmitted)
    if (Status within = CheckSpecLimits(*s); !within.ok()) return within;
  if (!(s->kill_grace_s >= 0 && s->kill_grace_s <= 3600)) return bad("kill_grace_s must be between 0 and 3600 seconds");
  return Status::Ok();
}

Result<std::vector<JobRef>> JobRefsFromJson(const json& value) {
  if (value.is_string()) return ParseJobRefs(value.get<std::string>());
  const bool positive = value.is_number_unsigned() ? value.get<std::uint64_t>() - 1 < static_cast<std::uint64_t>(INT64_MAX)
                                                   : value.is_number_integer() && value.get<std::int64_t>() > 0;
  if (!positive)
    return MakeError(ErrorKind::kInvalidArgument,
                     fmt::format("job id {}: give a number or a string such as \"12\", \"12_3\" or \"12_[1-3,7]\"",
                                 value.dump()));
  return std::vector<JobRef>{{value.get<std::int64_t>(), std::nullopt}};
}

Result<std::vector<int>> ArrayIndicesFromJson(const json& value) {
  auto bad = [] {
    return MakeError(ErrorKind::kInvalidArgument, fmt::format("--array: give 1 to {} different task indices from 0 to {}",
                                                              kMaxArrayTasks, kMaxArrayIndex));
  };
  if (!value.is_array() || value.empty() || value.size() > kMaxArrayTasks) return bad();
  std::vector<int> indices;
  indices.reserve(value.size());
  for (const json& v : value) {
    // Integers only, compared before any conversion: get<int> of 1e20 is undefined behaviour, and
    // of 2^32 wraps to task 0.
    const bool in_range = v.is_number_unsigned()  ? v.get<std::uint64_t>() <= static_cast<std::uint64_t>(kMaxArrayIndex)
                          : v.is_number_integer() ? v.get<std::int64_t>() >= 0 && v.get<std::int64_t>() <= kMaxArrayIndex
                                                  : false;
    if (!in_range) return bad();
    indices.push_back(static_cast<int>(v.get<std::int64_t>()));
  }
  std::vector<int> sorted = indices;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) return bad();
  return indices;
}

Result<std::vector<SharedList<std::string>>> ArrayArgvFromJson(const json& value, std::size_t tasks) {
  auto bad = [](std::string why) { return MakeError(ErrorKind::kInvalidArgument, "--array-file: " + why); };
  if (!value.is_array() || value.size() != tasks)
    return bad(fmt::format("give one command (a list of words) for each of the {} tasks", tasks));
  std::vector<SharedList<std::string>> commands;
  commands.reserve(tasks);
  std::size_t total = 0;
  for (const json& command : value) {
    std::vector<std::string> argv;
    if (!BytesListFromJson(command, &argv) || argv.empty())
      return bad(fmt::format("task {}'s command must be a list of one or more words", commands.size()));
    if (std::any_of(argv.begin(), argv.end(), [](const std::string& w) { return w.find('\0') != std::string::npos; }))
      return bad(fmt::format("task {}'s command holds a NUL byte", commands.size()));
    const std::size_t bytes = StringBytes(argv);
    if (bytes > kMaxArgvBytes)
      return bad(fmt::format("task {}'s command has {} bytes, more than the {} one command may have", commands.size(),
                             bytes, kMaxArgvBytes));
    total += bytes;
    if (total > kMaxArrayArgvBytes)
      return bad(fmt::format("the commands have more than {} bytes together: split the file into several arrays",
                             kMaxArrayArgvBytes));
    commands.emplace_back(std::move(argv));
  }
  return commands;
}

bool ShouldRetry(AttemptEnd end, int attempt, int retries) {
  const bool recorded_failure = end == AttemptEnd::kFailedExit || end == AttemptEnd::kStartFailed;
  return recorded_failure && attempt >= 0 && attempt < retries;
}

int FailedAttempts(const Job& job) {
  return static_cast<int>(std::count_if(job.attempts.begin(), job.attempts.end(),
                                        [](const JobAttempt& a) { return a.state == JobState::kFailed; }));
}

int Preemptions(const Job& job) {
  return static_cast<int>(std::count_if(job.attempts.begin(), job.attempts.end(), [](const JobAttempt& a) { return a.preempted; }));
}

std::string RetryLine(int attempt, int retries, const JobAttempt& previous, int failed) {
  if (previous.state != JobState::kFailed) return fmt::format("attempt {}, requeued: {}", attempt + 1, previous.reason);
  std::string after = previous.exit_code ? fmt::format("exit code {}", *previous.exit_code)
                                         : (previous.reason.empty() ? std::string("a failure") : previous.reason);
  if (failed < 0) failed = attempt;
  if (failed == attempt)
    return fmt::format("attempt {} of {} (retry {} of {}) after {}", attempt + 1, retries + 1, failed, retries, after);
  return fmt::format("attempt {} (retry {} of {}) after {}", attempt + 1, failed, retries, after);
}

namespace {

json AttemptToJson(const JobAttempt& a) {
  json j = {{"state", StateName(a.state)}, {"reason", a.reason}, {"gpu_uuids", a.gpu_uuids}};
  if (a.start_time) j["start_time"] = *a.start_time;
  if (a.end_time) j["end_time"] = *a.end_time;
  if (a.exit_code) j["exit_code"] = *a.exit_code;
  if (a.preempted) j["preempted"] = true;
  return j;
}

}  // namespace

json AttemptsToJson(const std::vector<JobAttempt>& attempts) {
  json out = json::array();
  for (const JobAttempt& a : attempts) out.push_back(AttemptToJson(a));
  return out;
}

Result<std::vector<JobAttempt>> ParseAttempts(const json& j) {
  if (!j.is_array()) return MakeError(ErrorKind::kInvalidArgument, "attempts: must be a list");
  std::vector<JobAttempt> out;
  for (const json& e : j) {
    const std::string where = fmt::format("attempts[{}]: ", out.size());
    if (!e.is_object()) return MakeError(ErrorKind::kInvalidArgument, where + "must be a JSON object");
    JobAttempt a;
    std::string state = StateName(a.state);
    proto::FieldDecoder fields(e, proto::FieldDecoder::Prefix{where});
    fields("state", state);
    fields("reason", a.reason);
    fields("start_time", a.start_time);
    fields("end_time", a.end_time);
    fields("exit_code", a.exit_code);
    fields("gpu_uuids", a.gpu_uuids);
    fields("preempted", a.preempted);
    if (!fields.error().empty()) return MakeError(ErrorKind::kInvalidArgument, fields.error());
    auto parsed = ParseState(state);
    if (!parsed) return MakeError(ErrorKind::kInvalidArgument, where + "\"state\" is not a job state");
    a.state = *parsed;
    out.push_back(std::move(a));
  }
  return out;
}

std::vector<JobAttempt> AttemptsFromJson(const json& j) {
  auto attempts = ParseAttempts(j);
  return attempts ? std::move(attempts).value() : std::vector<JobAttempt>{};
}

json AllAttemptsToJson(const Job& job) {
  json out = AttemptsToJson(job.attempts);
  const bool current_started = job.start_time || job.end_time || job.state == JobState::kRunning;
  if (current_started) {
    JobAttempt now;
    now.state = job.state;
    now.reason = job.reason;
    now.start_time = job.start_time;
    now.end_time = job.end_time;
    now.exit_code = job.exit_code;
    now.gpu_uuids = job.gpu_uuids;
    out.push_back(AttemptToJson(now));
  }
  for (std::size_t i = 0; i < out.size(); ++i) out[i]["attempt"] = i;
  return out;
}

std::string JobIdText(const Job& job) {
  if (job.array_job_id && job.array_index) return fmt::format("{}_{}", *job.array_job_id, *job.array_index);
  return std::to_string(job.id);
}

json JobToJson(const Job& job, bool with_env) {
  JsonTreeWriter w;
  WriteJob(w, job, with_env);
  return w.Take();
}

json JobToStoredJson(const Job& job) {
  json j = JobToJson(job, /*with_env=*/true);
  j["gid"] = job.gid;
  j["attempts"] = AttemptsToJson(job.attempts);  // the earlier ones: a retry's number, its log line
  if (job.own_argv) j["own_argv"] = true;
  if (job.supervisor_pid) j["supervisor_pid"] = *job.supervisor_pid;
  if (!job.isolation.empty()) j["isolation"] = job.isolation;
  // The logs as recorded: JobToJson's are LogsOf's, a guess for a job stored before they were.
  if (job.logs.unrecorded) {
    j.erase("logs");
    j["logs_unrecorded"] = true;
  } else {
    j["logs"] = LogsToJson(job.logs);
  }
  return j;
}

namespace {

// What JobFromJson reads into other places than Job's own members.
struct JobMembers {
  std::string state;
  double submit_time_s = 0;  // "submit_time": the spec's request holds it (Job::submit_time_s)
  std::uint32_t uid = 0;     // "uid" and "user": the spec's request holds them (Job::uid, Job::user)
  std::string user;
  bool logs_unrecorded = false;
};

// The members of JobFromJson that are plain values.
std::string ReadJobFields(const json& j, Job& job, JobMembers& m) {
  proto::FieldDecoder fields(j, proto::FieldDecoder::Prefix{"job: "});
  fields("id", job.id);
  fields("array_job_id", job.array_job_id);
  fields("array_index", job.array_index);
  fields("own_argv", job.own_argv);
  fields("uid", m.uid);
  fields("gid", job.gid);
  fields("user", m.user);
  fields("state", m.state);
  fields("reason", job.reason);
  fields("submit_time", m.submit_time_s);
  fields("start_time", job.start_time);
  fields("end_time", job.end_time);
  fields("exit_code", job.exit_code);
  fields("gpu_uuids", job.gpu_uuids);
  fields("supervisor_pid", job.supervisor_pid);
  fields("isolation", job.isolation);
  fields("logs_unrecorded", m.logs_unrecorded);
  return fields.error();
}

}  // namespace

Result<Job> JobFromJson(const json& j) {
  const auto bad = [](const std::string& why) { return MakeError(ErrorKind::kInvalidArgument, "job: " + why); };
  if (!j.is_object()) return bad("must be a JSON object");
  for (const char* key : {"id", "uid", "gid", "user", "state", "reason", "submit_time", "gpu_uuids", "spec"})
    if (auto it = j.find(key); it == j.end() || it->is_null()) return bad(fmt::format("\"{}\" is missing", key));
  Job job;
  JobMembers m;
  if (std::string why = ReadJobFields(j, job, m); !why.empty()) return MakeError(ErrorKind::kInvalidArgument, why);
  auto state = ParseState(m.state);
  if (!state) return bad(fmt::format("\"state\" '{}' is not a job state", m.state.substr(0, 40)));
  job.state = *state;
  if (Status spec = SpecFromJson(j["spec"], &job.spec); !spec.ok()) return bad(spec.error().message);
  job.spec.request.submit_time_s = m.submit_time_s;  // the same as the spec's, in every version
  // The job's owner as the daemon recorded it (from the kernel), whatever its spec's request says.
  job.spec.request.uid = m.uid;
  job.spec.request.user = std::move(m.user);
  if (auto it = j.find("attempts"); it != j.end() && !it->is_null()) {
    auto attempts = ParseAttempts(*it);
    if (!attempts) return bad(attempts.error().message);
    job.attempts = std::move(attempts).value();
  }
  if (m.logs_unrecorded) {
    job.logs.unrecorded = true;
  } else if (auto it = j.find("logs"); it != j.end() && !it->is_null()) {
    auto logs = ParseLogs(*it);
    if (!logs) return bad(logs.error().message);
    job.logs = std::move(logs).value();
  }
  return job;
}

}  // namespace gpulane::store
