// The daemon's request handlers. Identity is the connection's peer (SO_PEERCRED), never a field of
// the request; users act on their own jobs, root and daemon.admin_group on all.
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fmt/format.h>

#include "daemon/daemon.h"
#include "exec/job_env.h"
#include "gpu/snapshot_json.h"
#include "gpu/visible_devices.h"
#include "lease/occupancy.h"
#include "render/queue_table.h"
#include "os/process_table.h"

namespace gpulane::daemon {
namespace {

using nlohmann::json;
using store::Job;
using store::JobState;

double Now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

json Ok(json body = json::object()) {
  body["v"] = proto::kVersion;
  body["ok"] = true;
  return body;
}

json Err(ErrorKind kind, const std::string& message) { return proto::ErrorResponse(kind, message); }

std::vector<std::int64_t> IdsOf(const json& req) {
  std::vector<std::int64_t> ids;
  if (req.contains("ids") && req["ids"].is_array())
    for (const auto& v : req["ids"])
      if (v.is_number_integer()) ids.push_back(v.get<std::int64_t>());
  return ids;
}

}  // namespace

void Daemon::HandleRequest(Connection& c, const std::string& payload) {
  json req = json::parse(payload, nullptr, false);
  if (req.is_discarded() || !req.is_object()) {
    Reply(c, Err(ErrorKind::kInvalidArgument, "malformed request: not a JSON object"));
    return;
  }
  if (!req.contains("v") || req["v"] != proto::kVersion) {
    Reply(c, Err(ErrorKind::kInvalidArgument,
                 fmt::format("protocol version {} is not supported (this daemon speaks {}): use a matching gpulane",
                             req.contains("v") ? req["v"].dump() : "missing", proto::kVersion)));
    return;
  }
  if (!req.contains("op") || !req["op"].is_string()) {
    Reply(c, Err(ErrorKind::kInvalidArgument, "malformed request: \"op\", the operation, is missing or not a string"));
    return;
  }
  const std::string op = req["op"].get<std::string>();
  try {
    if (op == "ping") {
      Reply(c, Ok({{"pid", getpid()}, {"mode", paths_.system ? "system" : "user"}, {"gpus", gpu_count_}}));
    } else if (op == "submit") {
      std::vector<Job> jobs;
      json error = HandleSubmit(c.peer, req, &jobs);
      if (!error.is_null()) Reply(c, error);
      else submits_.push_back({c.fd, std::move(jobs), req.contains("array")});
    } else if (op == "snapshot") {
      Reply(c, HandleSnapshot(req));
    } else if (op == "queue") {
      Reply(c, HandleQueue(c.peer, req));
    } else if (op == "show") {
      Reply(c, HandleShow(c.peer, req));
    } else if (op == "cancel") {
      Reply(c, HandleCancel(c.peer, req));
    } else if (op == "hold" || op == "release") {
      Reply(c, HandleHold(c.peer, req, op == "hold"));
    } else if (op == "logs") {
      Reply(c, HandleLogs(c.peer, req));
    } else if (op == "wait") {
      if (!HandleWait(c, req)) Reply(c, Err(ErrorKind::kInvalidArgument, "wait: give job ids"));
    } else {
      Reply(c, Err(ErrorKind::kInvalidArgument, fmt::format("unknown operation '{}'", op)));
    }
  } catch (const json::exception& e) {
    Reply(c, Err(ErrorKind::kInvalidArgument, fmt::format("malformed {} request: {}", op, e.what())));
  }
}

json Daemon::HandleSubmit(const Peer& peer, const json& req, std::vector<Job>* jobs) {
  Job job;
  if (!req.contains("spec")) return Err(ErrorKind::kInvalidArgument, "submit: the spec is missing");
  if (Status s = store::SpecFromJson(req["spec"], &job.spec); !s.ok()) return Err(s.error().kind, "submit: " + s.error().message);
  // A client that sends no kill grace (gpulane submit always sends its user's) gets the machine's.
  if (!req["spec"].contains("kill_grace_s")) job.spec.kill_grace_s = config_.kill_grace_s;
  sched::Request& request = job.spec.request;
  request.uid = peer.uid;
  request.user = peer.user;
  request.submit_time_s = Now();
  if (request.priority > 0 && !peer.admin)
    return Err(ErrorKind::kPermission,
               fmt::format("--priority {}: only root and members of daemon.admin_group may raise a job's priority above "
                           "0; give 0 or a negative number",
                           request.priority));
  auto allowed = ResolveAllowedGpus(request.gpu_list, exec::EnvValue(job.spec.env, "CUDA_VISIBLE_DEVICES"), gpu_identity_);
  if (!allowed) return Err(allowed.error().kind, allowed.error().message);
  request.allowed_uuids = std::move(allowed).value();
  if (Status possible = lease::CanEverQualify(gpu_identity_, request, sched::Limits{config_.memory_margin_bytes});
      !possible.ok())
    return Err(possible.error().kind, possible.error().message);
  if (job.spec.cwd.empty() || job.spec.cwd.front() != '/')
    return Err(ErrorKind::kInvalidArgument, "submit: the working directory must be an absolute path");
  for (auto dep : job.spec.after_ok) {
    auto other = FindJob(dep);
    if (!other) return Err(ErrorKind::kNotFound, fmt::format("--after {}: no such job", dep));
  }
  for (auto dep : job.spec.after_any)
    if (!FindJob(dep)) return Err(ErrorKind::kNotFound, fmt::format("--after-any {}: no such job", dep));
  job.uid = peer.uid;
  job.gid = peer.gid;
  job.user = peer.user;
  job.submit_time = request.submit_time_s;
  job.state = req.value("hold", false) ? JobState::kHeld : JobState::kPending;
  if (req.contains("array")) {
    auto indices = req["array"].get<std::vector<int>>();
    if (indices.empty() || indices.size() > 100000)
      return Err(ErrorKind::kInvalidArgument, "--array: give 1 to 100000 task indices");
    for (int i : indices) {
      Job task = job;
      task.array_index = i;
      jobs->push_back(std::move(task));
    }
  } else {
    jobs->push_back(std::move(job));
  }
  return json();
}

void Daemon::CommitSubmissions() {
  if (submits_.empty()) return;
  // Held submissions cannot start anything: no need to walk the queue for them afterwards.
  bool any_runnable = false;
  for (const auto& sub : submits_)
    for (const auto& job : sub.jobs) any_runnable = any_runnable || job.state != JobState::kHeld;
  // Group commit: every submission read in this round goes into one transaction (one fsync);
  // arrays each need their own to number their tasks, so they commit separately.
  std::vector<Job> batch;
  std::vector<std::pair<int, std::size_t>> owners;  // fd, count
  auto flush_batch = [&]() {
    if (batch.empty()) return;
    auto ids = store_->Insert(batch, false);
    std::size_t k = 0;
    for (auto& [fd, count] : owners) {
      auto it = connections_.find(fd);
      json reply = ids ? Ok({{"ids", std::vector<std::int64_t>(ids->begin() + k, ids->begin() + k + count)}})
                       : Err(ErrorKind::kIo, "the job could not be stored: " + ids.error().message);
      if (it != connections_.end()) Reply(it->second, reply);
      k += count;
    }
    if (ids)
      for (auto& job : batch) jobs_->Add(std::move(job));
    batch.clear();
    owners.clear();
  };
  for (auto& s : submits_) {
    if (s.array) {
      auto ids = store_->Insert(s.jobs, true);
      auto it = connections_.find(s.fd);
      if (it != connections_.end())
        Reply(it->second, ids ? Ok({{"ids", *ids}, {"array_job_id", ids->front()}})
                              : Err(ErrorKind::kIo, "the array could not be stored: " + ids.error().message));
      if (ids)
        for (auto& job : s.jobs) jobs_->Add(std::move(job));
      continue;
    }
    owners.emplace_back(s.fd, s.jobs.size());
    for (auto& job : s.jobs) batch.push_back(std::move(job));
  }
  flush_batch();
  if (any_runnable) schedule_needed_ = true;
  submits_.clear();
}

std::vector<unsigned> Daemon::GpuIndices(const Job& job) const {
  std::vector<unsigned> indices;
  for (const auto& uuid : job.gpu_uuids) {
    auto it = gpu_index_.find(uuid);
    if (it != gpu_index_.end()) indices.push_back(it->second);
  }
  return indices;
}

json Daemon::JobForClient(const Job& job, bool with_env) const {
  json j = store::JobToJson(job, with_env);
  j["gpu_indices"] = GpuIndices(job);
  return j;
}

json Daemon::HandleSnapshot(const json& req) {
  ReadOptions options{req.value("sensors", true), req.value("utilization", true), req.value("topology", true)};
  auto snapshot = backend_->Read(options);
  if (!snapshot) return Err(snapshot.error().kind, snapshot.error().message);
  ProcfsProcessTable processes;
  AnnotateProcesses(*snapshot, processes);
  return Ok({{"snapshot", SnapshotToJson(*snapshot)}});
}

json Daemon::HandleQueue(const Peer& peer, const json& req) {
  std::optional<std::uint32_t> uid;
  if (req.contains("user") && req["user"].is_string()) {
    struct passwd* pw = getpwnam(req["user"].get<std::string>().c_str());
    if (!pw) return Err(ErrorKind::kNotFound, fmt::format("--user {}: no such user", req["user"].get<std::string>()));
    uid = pw->pw_uid;
  }
  // The jobs to list: every unfinished one, or with "all" the newest `limit` of every state.
  std::vector<const Job*> selected;
  std::vector<Job> stored;
  if (req.value("all", false)) {
    store::JobFilter filter;
    filter.include_finished = true;
    filter.uid = uid;
    filter.limit = req.value("limit", 1000u);
    auto list = store_->List(filter);
    if (!list) return Err(ErrorKind::kIo, list.error().message);
    stored = std::move(list).value();
    for (auto& job : stored) {
      auto live = jobs_->active().find(job.id);
      selected.push_back(live != jobs_->active().end() ? &live->second : &job);
    }
  } else {
    for (auto& [id, job] : jobs_->active())
      if (!uid || job.uid == *uid) selected.push_back(&job);
  }
  (void)peer;
  if (req.value("format", "") == "table") {
    const double now = Now();
    std::string table = QueueTableHeader();
    table.reserve(table.size() + selected.size() * 96);
    for (const Job* job : selected) AppendQueueRow(*job, GpuIndices(*job), now, table);
    return Ok({{"table", std::move(table)}, {"count", selected.size()}});
  }
  json jobs = json::array();
  for (const Job* job : selected) jobs.push_back(JobForClient(*job, false));
  return Ok({{"jobs", std::move(jobs)}});
}

json Daemon::HandleShow(const Peer& peer, const json& req) {
  auto id = req.at("id").get<std::int64_t>();
  auto job = FindJob(id);
  if (!job) return Err(ErrorKind::kNotFound, fmt::format("no job {}", id));
  json j = JobForClient(*job, CanAct(peer, *job));
  if (!CanAct(peer, *job)) j["spec"]["env"] = "(hidden: another user's job)";
  return Ok({{"job", j}});
}

std::vector<std::int64_t> Daemon::ExpandIds(const std::vector<std::int64_t>& ids, bool with_finished) const {
  std::vector<std::int64_t> out;
  for (auto id : ids) {
    if (with_finished) {  // every task of the array, also those that have already ended
      auto tasks = store_->ArrayTaskIds(id);
      if (tasks && !tasks->empty()) {
        out.insert(out.end(), tasks->begin(), tasks->end());
        continue;
      }
    }
    bool array = false;
    for (auto& [jid, job] : jobs_->active())
      if (job.array_job_id && *job.array_job_id == id) out.push_back(jid), array = true;
    if (!array) out.push_back(id);
  }
  return out;
}

json Daemon::HandleCancel(const Peer& peer, const json& req) {
  std::vector<std::int64_t> ids = ExpandIds(IdsOf(req));
  const std::string user = req.value("user", ""), name = req.value("name", "");
  // --name alone means the caller's own jobs of that name (all users' for an admin); --user names whose.
  if (!user.empty() || !name.empty())
    for (auto& [id, job] : jobs_->active())
      if ((user.empty() ? peer.admin || job.uid == peer.uid : job.user == user) && (name.empty() || job.spec.name == name))
        ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  json cancelled = json::array(), errors = json::array();
  std::vector<Job*> never_ran;  // pending and held: cancelled here, stored together below
  for (auto id : ids) {
    auto it = jobs_->active().find(id);
    if (it == jobs_->active().end()) {
      errors.push_back(FindJob(id) ? fmt::format("job {} has already ended", id) : fmt::format("no job {}", id));
      continue;
    }
    Job& job = it->second;
    if (!CanAct(peer, job)) {
      Log(fmt::format("refused: {} (uid {}) may not cancel job {} of {}", peer.user, peer.uid, id, job.user));
      errors.push_back(fmt::format("job {} belongs to {}: only they or an admin may cancel it", id, job.user));
      continue;
    }
    if (job.state == JobState::kPending || job.state == JobState::kHeld) {
      job.state = JobState::kCancelled;
      job.exit_code.reset();
      job.reason = fmt::format("cancelled by {}", peer.user);
      job.end_time = Now();
      never_ran.push_back(&job);
    } else {
      jobs_->RequestCancel(id);
      job.reason = fmt::format("cancelling (by {})", peer.user);
      if (job.supervisor_pid) kill(*job.supervisor_pid, SIGTERM);
    }
    cancelled.push_back(id);
  }
  if (!never_ran.empty()) {
    // One transaction (one fsync) for all of them: cancelling a 10,000-task array takes a moment, not minutes.
    Status s = store_->Update(std::vector<const Job*>(never_ran.begin(), never_ran.end()));
    if (!s.ok()) Log("cannot store cancellations: " + s.error().message);
    for (Job* job : never_ran) Finish(*job, JobState::kCancelled, std::nullopt, job->reason, job->end_time, s.ok());
  }
  json body = {{"cancelled", cancelled}, {"errors", errors}};
  if (cancelled.empty() && !errors.empty()) {
    bool denied = false;
    for (auto& e : errors) denied = denied || e.get<std::string>().find("belongs to") != std::string::npos;
    json err = Err(denied ? ErrorKind::kPermission : ErrorKind::kNotFound, errors.front().get<std::string>());
    err["errors"] = errors;
    return err;
  }
  return Ok(body);
}

json Daemon::HandleHold(const Peer& peer, const json& req, bool hold) {
  json changed = json::array(), errors = json::array();
  for (auto id : ExpandIds(IdsOf(req))) {
    auto it = jobs_->active().find(id);
    if (it == jobs_->active().end()) {
      errors.push_back(fmt::format("job {} is not queued", id));
      continue;
    }
    Job& job = it->second;
    if (!CanAct(peer, job)) {
      Log(fmt::format("refused: {} (uid {}) may not {} job {} of {}", peer.user, peer.uid, hold ? "hold" : "release", id, job.user));
      errors.push_back(fmt::format("job {} belongs to {}: only they or an admin may {} it", id, job.user, hold ? "hold" : "release"));
      continue;
    }
    if (hold && job.state == JobState::kLaunching) {
      // Waiting for GPUs under its supervisor: it leaves the line and becomes held (not if it
      // starts first: a running job is never stopped by hold).
      jobs_->RequestHold(id);
      job.reason = fmt::format("holding (by {})", peer.user);
      if (job.supervisor_pid) kill(*job.supervisor_pid, HoldSignal());
      changed.push_back(id);
      continue;
    }
    JobState from = hold ? JobState::kPending : JobState::kHeld;
    if (job.state != from) {
      errors.push_back(fmt::format("job {} is {}, not {}", id, store::StateName(job.state), store::StateName(from)));
      continue;
    }
    job.state = hold ? JobState::kHeld : JobState::kPending;
    job.reason = hold ? fmt::format("held by {}", peer.user) : "";
    MarkDirty(job);
    schedule_needed_ = true;
    changed.push_back(id);
  }
  if (changed.empty() && !errors.empty()) {
    bool denied = errors.front().get<std::string>().find("belongs to") != std::string::npos;
    return Err(denied ? ErrorKind::kPermission : ErrorKind::kInvalidArgument, errors.front().get<std::string>());
  }
  return Ok({{"changed", changed}, {"errors", errors}});
}

json Daemon::HandleLogs(const Peer& peer, const json& req) {
  auto id = req.at("id").get<std::int64_t>();
  auto job = FindJob(id);
  if (!job) return Err(ErrorKind::kNotFound, fmt::format("no job {}", id));
  if (!CanAct(peer, *job)) {
    Log(fmt::format("refused: {} (uid {}) may not read the logs of job {} of {}", peer.user, peer.uid, id, job->user));
    return Err(ErrorKind::kPermission, fmt::format("job {} belongs to {}: only they or an admin may read its logs", id, job->user));
  }
  // Exactly the file the job's output went to, from where this job's part of it starts; nothing
  // before its command opened it (a default name may be taken by an older job's file).
  const store::JobLogs logs = store::LogsOf(*job);
  const bool err_stream = req.value("stream", "out") == "err";
  const std::string& path = err_stream ? logs.stderr_path : logs.stdout_path;
  const std::uint64_t start = err_stream ? logs.stderr_offset : logs.stdout_offset;
  const std::optional<std::uint64_t> end = err_stream ? logs.stderr_end : logs.stdout_end;
  const bool finished = store::IsFinished(job->state);
  auto offset = req.value("offset", std::uint64_t{0});
  auto nothing = [&] { return Ok({{"data", ""}, {"offset", offset}, {"finished", finished}, {"path", path}}); };
  if (path.empty()) return nothing();
  // Read as the daemon, but only a regular file the job's owner owns, never through a symlink.
  int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return nothing();
    return Err(ErrorKind::kIo, fmt::format("cannot read {}: {}", path, std::strerror(errno)));
  }
  struct stat st {};
  const bool null_device = fstat(fd, &st) == 0 && S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3);
  if (null_device) {  // -o /dev/null: the output was thrown away
    close(fd);
    return nothing();
  }
  if (!S_ISREG(st.st_mode) || (st.st_uid != job->uid && job->uid != 0)) {
    close(fd);
    return Err(ErrorKind::kUnsafe, fmt::format("{} is not a regular file owned by {}", path, job->user));
  }
  const std::uint64_t size = std::min<std::uint64_t>(static_cast<std::uint64_t>(st.st_size), end.value_or(UINT64_MAX));
  const std::uint64_t from = start + offset;
  std::string data(std::min<std::uint64_t>(4u << 20, size > from ? size - from : 0), '\0');
  ssize_t n = data.empty() ? 0 : pread(fd, data.data(), data.size(), static_cast<off_t>(from));
  close(fd);
  data.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  return Ok({{"data", data}, {"offset", offset + data.size()}, {"finished", finished}, {"path", path}});
}

bool Daemon::HandleWait(Connection& c, const json& req) {
  auto ids = ExpandIds(IdsOf(req), /*with_finished=*/true);
  if (ids.empty()) return false;
  for (auto id : ids) {
    if (!FindJob(id)) {
      Reply(c, Err(ErrorKind::kNotFound, fmt::format("no job {}", id)));
      return true;
    }
  }
  waiters_.push_back({c.fd, ids});
  return true;
}

void Daemon::AnswerWaiters() {
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    bool done = std::all_of(it->ids.begin(), it->ids.end(), [&](std::int64_t id) { return !jobs_->active().count(id); });
    if (!done) {
      ++it;
      continue;
    }
    json jobs = json::array();
    for (auto id : it->ids) {
      auto job = FindJob(id);
      if (job) jobs.push_back(store::JobToJson(*job, false));
    }
    auto conn = connections_.find(it->fd);
    if (conn != connections_.end()) Reply(conn->second, Ok({{"jobs", jobs}}));
    it = waiters_.erase(it);
  }
}

}  // namespace gpulane::daemon
