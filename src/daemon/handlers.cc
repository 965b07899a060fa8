// The daemon's request handlers. Identity is the connection's peer (SO_PEERCRED), never a field of
// the request; users act on their own jobs, root and daemon.admin_group on all.
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <fmt/format.h>

#include "daemon/daemon.h"
#include "daemon/outcome.h"
#include "daemon/queue_stream.h"
#include "exec/device_isolation.h"
#include "exec/job_env.h"
#include "gpu/snapshot_json.h"
#include "gpu/visible_devices.h"
#include "lease/occupancy.h"
#include "render/queue_json.h"
#include "render/queue_table.h"
#include "render/share_table.h"
#include "os/process_table.h"
#include "os/user_file.h"
#include "os/user_groups.h"
#include "sched/user_limits.h"
#include "store/job_id.h"
#include "store/job_view.h"
#include "util/bytes_json.h"

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

// Every job named by the request's "ids" (a list of job ids: store::JobRefsFromJson), in order;
// `op` names the request in errors.
Result<std::vector<store::JobRef>> RefsOfIds(const json& req, const std::string& op) {
  std::vector<store::JobRef> refs;
  if (!req.contains("ids")) return refs;
  if (!req["ids"].is_array()) return MakeError(ErrorKind::kInvalidArgument, op + ": \"ids\" must be a list of job ids");
  for (const json& value : req["ids"]) {
    auto named = store::JobRefsFromJson(value);
    if (!named) return MakeError(ErrorKind::kInvalidArgument, op + ": " + named.error().message);
    refs.insert(refs.end(), named->begin(), named->end());
  }
  return refs;
}

// What one job id names, found: one job, or (the array's own id) every task of an array.
struct Named {
  std::string text;               ///< as people write it: "12", "12_3" (also for a task named by its number)
  std::vector<std::int64_t> ids;  ///< the job, or the array's tasks, finished ones included, in order
  bool array = false;             ///< the whole array
};

// Finds the jobs that ids name, reading each array's tasks from the store once per request. The
// jobs it finds stay valid while the request is handled (until a job is finished and forgotten).
class Resolver {
 public:
  Resolver(store::JobStore& store, const std::map<std::int64_t, Job>& active) : store_(store), active_(active) {}

  // Errors: kNotFound, "no job 12_3: array 12 has tasks 0-3".
  Result<Named> operator()(const store::JobRef& ref) {
    const std::string text = store::FormatJobRef(ref);
    if (ref.task) {
      const Array& array = Tasks(ref.id);
      if (auto it = array.by_index.find(*ref.task); it != array.by_index.end()) return Named{text, {it->second}, false};
      if (array.ids.empty())
        return MakeError(ErrorKind::kNotFound, Find(ref.id) ? fmt::format("no job {}: job {} is not an array", text, ref.id)
                                                             : NoJobMessage(store_, ref.id, text));
      std::vector<int> indices;
      for (const auto& [index, id] : array.by_index) indices.push_back(index);
      return MakeError(ErrorKind::kNotFound, fmt::format("no job {}: array {} has tasks {}", text, ref.id,
                                                         store::FormatTaskIndices(indices)));
    }
    const Job* job = Find(ref.id);
    if (!job && damaged_.count(ref.id)) return damaged_.at(ref.id);
    if (!job && WasPruned(store_, ref.id) && !Tasks(ref.id).ids.empty()) return Named{text, Tasks(ref.id).ids, true};
    if (!job) return MakeError(ErrorKind::kNotFound, NoJobMessage(store_, ref.id, text));  // retention.h
    if (!job->array_job_id || *job->array_job_id != ref.id) return Named{store::JobIdText(*job), {ref.id}, false};
    if (Tasks(ref.id).ids.empty()) return Named{text, {ref.id}, true};  // the store failed: at least the first task
    return Named{text, Tasks(ref.id).ids, true};
  }

  // The job `id`: the daemon's copy while it is unfinished, else the stored one; nullptr when none.
  const Job* Find(std::int64_t id) {
    if (auto it = active_.find(id); it != active_.end()) return &it->second;
    if (auto it = stored_.find(id); it != stored_.end()) return &it->second;
    auto stored = store_.Get(id);
    if (!stored && stored.error().kind == ErrorKind::kStore) damaged_.emplace(id, stored.error());
    return !stored || !*stored ? nullptr : &stored_.emplace(id, std::move(**stored)).first->second;
  }

 private:
  struct Array {
    std::vector<std::int64_t> ids;        ///< its tasks' job ids, in order
    std::map<int, std::int64_t> by_index;  ///< array index -> job id
  };

  const Array& Tasks(std::int64_t array_id) {
    auto it = arrays_.find(array_id);
    if (it != arrays_.end()) return it->second;
    Array array;
    if (auto tasks = store_.ArrayTasks(array_id))
      for (const auto& task : *tasks) {
        array.ids.push_back(task.id);
        array.by_index.emplace(task.index, task.id);
      }
    return arrays_.emplace(array_id, std::move(array)).first->second;
  }

  store::JobStore& store_;
  const std::map<std::int64_t, Job>& active_;
  std::map<std::int64_t, Job> stored_;
  std::map<std::int64_t, Array> arrays_;
  std::map<std::int64_t, Error> damaged_;  ///< rows found that cannot be read (kStore), by id
};

// "job 12_3" or "array 12", for messages.
std::string What(const Named& named) { return fmt::format("{} {}", named.array ? "array" : "job", named.text); }

// The unfinished jobs of `named` (not those that have ended while their end waits for the store).
std::vector<Job*> Live(std::map<std::int64_t, Job>& active, const Named& named) {
  std::vector<Job*> live;
  for (auto id : named.ids)
    if (auto it = active.find(id); it != active.end() && !store::IsFinished(it->second.state)) live.push_back(&it->second);
  return live;
}

// When `peer` may not `op` `named` (another user's; an array's tasks all have its owner): says so in
// `out` and returns the line for the daemon's log.
std::optional<std::string> Refuse(const Peer& peer, const Named& named, Resolver& resolve, const std::string& op,
                                  Outcome& out) {
  const Job* job = resolve.Find(named.ids.front());
  if (!job || peer.admin || peer.uid == job->uid) return std::nullopt;  // as Daemon::CanAct
  out.Failed(ErrorKind::kPermission, named.text,
             fmt::format("{} belongs to {}: only they or an admin may {} it", What(named), job->user, op));
  return fmt::format("refused: {} (uid {}) may not {} {} of {}", peer.user, peer.uid, op, What(named), job->user);
}

// Why a command cannot act on `named`, none of whose jobs is unfinished.
std::string Ended(const Named& named, Resolver& resolve) {
  if (named.array) return fmt::format("array {} has ended: none of its tasks is queued or running", named.text);
  const Job* job = resolve.Find(named.ids.front());
  return fmt::format("job {} has already ended ({})", named.text, job ? store::StateName(job->state) : "gone");
}

// Why hold (`hold`) or release cannot change the unfinished `job`; `hold_requested`: it is leaving
// the line for GPUs to be held.
std::string NotApplicable(const Job& job, bool hold, bool hold_requested) {
  const std::string id = store::JobIdText(job);
  if (!hold && hold_requested)
    return fmt::format("job {} is not held yet (it is leaving the line for GPUs): release it once it is held", id);
  if (!hold) return fmt::format("job {} is {}, not held", id, StateLabel(job.state));
  if (job.state == JobState::kRunning)
    return fmt::format("job {} is running: hold keeps queued jobs from starting (gpulane cancel {} ends it)", id, id);
  return fmt::format("job {} is held already", id);
}

// The jobs a queue request lists, in id order: every unfinished one (of "user"), or with "all"
// the newest "limit" (kDefaultQueueLimit when none or 0; at most kMaxQueueLimit, or
// kMaxStreamedQueueLimit when `streamed`) of every state. A streamed selection holds only the ids:
// PumpStream reads the jobs part by part. Errors: kNotFound for an unknown user, kInvalidArgument
// for a limit over the maximum, kIo.
Result<QueueSelection> SelectForQueue(const json& req, store::JobStore& store, const JobTable& table, bool streamed) {
  const std::map<std::int64_t, Job>& active = table.active();
  // One frame is built whole while everyone else waits: more jobs than it may hold are refused by
  // their count alone (a listing of them is streamed).
  const auto too_many = [](std::size_t count) {
    return MakeError(ErrorKind::kInvalidArgument,
                     fmt::format("queue: {} jobs are more than the {} of one reply: ask for a streamed reply (\"stream\": "
                                 "\"json\" or \"table\", as gpulane queue does), or for one user's jobs",
                                 count, kMaxQueueLimit));
  };
  std::optional<std::uint32_t> uid;
  if (req.contains("user") && req["user"].is_string()) {
    struct passwd* pw = getpwnam(req["user"].get<std::string>().c_str());
    if (!pw) return MakeError(ErrorKind::kNotFound, fmt::format("--user {}: no such user", req["user"].get<std::string>()));
    uid = pw->pw_uid;
  }
  QueueSelection selection;
  if (req.value("all", false)) {
    store::JobFilter filter;
    filter.include_finished = true;
    filter.uid = uid;
    filter.limit = req.value("limit", std::size_t{0});
    if (filter.limit == 0) filter.limit = kDefaultQueueLimit;
    const std::size_t max = streamed ? kMaxStreamedQueueLimit : kMaxQueueLimit;
    if (filter.limit > max)
      return MakeError(ErrorKind::kInvalidArgument,
                       fmt::format("queue: a limit of {} jobs is more than the {} of one {}: give a smaller \"limit\"{}",
                                   filter.limit, max, streamed ? "listing" : "reply",
                                   streamed ? "" : ", or ask for a streamed reply (\"stream\") for more"));
    if (streamed) {
      auto ids = store.ListIds(filter);
      if (!ids) return MakeError(ErrorKind::kIo, ids.error().message);
      selection.ids = std::move(ids).value();
      filter.limit = 0;
      selection.filter = filter;
      return selection;
    }
    auto list = store.List(filter);
    if (!list) return MakeError(ErrorKind::kIo, list.error().message);
    for (auto& job : *list) {
      selection.ids.push_back(job.id);
      selection.stored.emplace(job.id, std::move(job));
    }
  } else if (uid) {
    // One user's: from the index by uid, never a walk over everyone's jobs.
    const std::set<std::int64_t>& ids = table.IdsOfUid(*uid);
    if (!streamed && ids.size() > kMaxQueueLimit) return too_many(ids.size());
    selection.ids.assign(ids.begin(), ids.end());
  } else {
    if (!streamed && active.size() > kMaxQueueLimit) return too_many(active.size());
    selection.ids.reserve(active.size());
    for (const auto& entry : active) selection.ids.push_back(entry.first);
  }
  return selection;
}

}  // namespace

const Job* QueueSelection::Find(std::int64_t id, const std::map<std::int64_t, Job>& active) const {
  if (auto it = active.find(id); it != active.end()) return &it->second;
  if (auto it = stored.find(id); it != stored.end()) return &it->second;
  return nullptr;
}

namespace {
// What a request's "v" holds, for the version error: an integer is echoed, anything else is only
// named by its type (a client's value is never copied into a reply: it may be megabytes long).
std::string DescribeVersion(const json& req) {
  if (!req.contains("v")) return "missing";
  const json& v = req["v"];
  if (v.is_number_integer() || v.is_number_unsigned()) return v.dump();
  return std::string("of type ") + v.type_name();
}
}  // namespace

void Daemon::HandleRequest(Connection& c, const std::string& payload) {
  HandleParsedRequest(c, json::parse(payload, nullptr, false));
}

void Daemon::HandleParsedRequest(Connection& c, const json& req) {
  if (req.is_discarded() || !req.is_object()) {
    Reply(c, Err(ErrorKind::kInvalidArgument, "malformed request: not a JSON object"));
    return;
  }
  if (!req.contains("v") || req["v"] != proto::kVersion) {
    Reply(c, Err(ErrorKind::kInvalidArgument,
                 fmt::format("protocol version {} is not supported (this daemon speaks {}): use a matching gpulane",
                             DescribeVersion(req), proto::kVersion)));
    return;
  }
  if (!req.contains("op") || !req["op"].is_string()) {
    Reply(c, Err(ErrorKind::kInvalidArgument, "malformed request: \"op\", the operation, is missing or not a string"));
    return;
  }
  const std::string op = req["op"].get<std::string>();
  // Replies go out in the order of the requests: a submission of this connection still waiting
  // for its group commit is committed (and answered) before anything else is answered.
  if (op != "submit" && std::any_of(submits_.begin(), submits_.end(), [&](const PendingSubmit& s) { return s.fd == c.fd; }))
    CommitSubmissions();
  // While the jobs load at the start, only ping is answered (with how far it is): the other
  // requests would see or decide on an incomplete table.
  if (jobs_->loading() && op != "ping") {
    Reply(c, Err(ErrorKind::kUnavailable, LoadingLine()));
    return;
  }
  try {
    if (op == "ping") {
      Reply(c, Pong(req));
    } else if (op == "submit") {
      std::vector<Job> jobs;
      std::vector<int> indices;
      std::string key;
      std::vector<store::SharedList<std::string>> task_argv;
      json error = HandleSubmit(c.peer, req, &jobs, &indices, &key, &task_argv);
      if (!error.is_null()) {
        Reply(c, error);
      } else {
        const bool array = req.contains("array");
        // An array is answered once all its parts are stored: the requests behind it wait (ReadFrom).
        if (array) c.storing = true;
        submits_.push_back(
            {c.fd, c.serial, std::move(jobs), array, std::move(key), std::move(indices), std::move(task_argv)});
      }
    } else if (op == "snapshot") {
      Reply(c, HandleSnapshot(req));
    } else if (op == "queue") {
      if (req.contains("stream")) StartQueueStream(c, req);
      else Reply(c, HandleQueue(c.peer, req));
    } else if (op == "show") {
      Reply(c, HandleShow(c.peer, req));
    } else if (op == "share") {
      // Every user's share, decayed use and fair-share factor (`gpulane share`): not secret, as
      // `queue` shows every user's jobs.
      Reply(c, WithStoreWarnings(Ok({{"users", ShareRowsToJson(jobs_->ShareTable())}, {"half_life_s", jobs_->half_life_s()}})));
    } else if (op == "cancel") {
      HandleCancel(c, req);
    } else if (op == "hold" || op == "release") {
      HandleHold(c, req, op == "hold");
    } else if (op == "logs") {
      Reply(c, HandleLogs(c.peer, req));
    } else if (op == "history" || op == "report" || op == "usage" || op == "telemetry" || op == "metrics" ||
               op == "events") {
      AskSampler(c, req);
    } else if (op == "wait") {
      if (!HandleWait(c, req)) Reply(c, Err(ErrorKind::kInvalidArgument, "wait: give job ids"));
    } else {
      Reply(c, Err(ErrorKind::kInvalidArgument, fmt::format("unknown operation '{}'", op)));
    }
  } catch (const json::exception& e) {
    Reply(c, Err(ErrorKind::kInvalidArgument, fmt::format("malformed {} request: {}", op, e.what())));
  }
}

json Daemon::Pong(const json& req) {
  json pong = Ok({{"pid", getpid()}, {"mode", paths_.system ? "system" : "user"}, {"gpus", gpu_count_},
                  {"socket", paths_.socket}, {"web", WebInfo(web_.get())}});
  // Just started on a large store: how far the loading of its jobs is.
  if (const auto& loading = jobs_->loading()) pong["loading"] = {{"loaded", loading->loaded}, {"total", loading->total}};
  // The loop's turns since the last such ping, and the longest (bench/daemon_latency.py).
  if (req.value("loop_stats", false)) {
    pong["loop_turns"] = loop_turns_;
    pong["loop_worst_turn_ms"] = loop_worst_turn_s_ * 1e3;
    pong["loop_worst_tick_turn_ms"] = loop_worst_tick_turn_s_ * 1e3;
    loop_turns_ = 0;
    loop_worst_turn_s_ = loop_worst_tick_turn_s_ = 0;
  }
  return pong;
}

json Daemon::HandleSubmit(const Peer& peer, const json& req, std::vector<Job>* jobs, std::vector<int>* array_indices,
                          std::string* key, std::vector<store::SharedList<std::string>>* task_argv) {
  Job job;
  if (!req.contains("spec")) return Err(ErrorKind::kInvalidArgument, "submit: the spec is missing");
  if (req.contains("idempotency_key")) {
    const json& k = req["idempotency_key"];
    const bool valid = k.is_string() && !k.get_ref<const std::string&>().empty() &&
                       k.get_ref<const std::string&>().size() <= proto::kMaxIdempotencyKeyBytes &&
                       std::all_of(k.get_ref<const std::string&>().begin(), k.get_ref<const std::string&>().end(), [](char ch) {
                         return std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' || ch == '.' || ch == ':';
                       });
    if (!valid)
      return Err(ErrorKind::kInvalidArgument,
                 fmt::format("submit: \"idempotency_key\" must be a string of 1 to {} letters, digits and - _ . :",
                             proto::kMaxIdempotencyKeyBytes));
    *key = k.get<std::string>();
  }
  if (Status s = store::SpecFromJson(req["spec"], &job.spec, store::SpecLimits::kSubmitted); !s.ok()) return Err(s.error().kind, "submit: " + s.error().message);
  // A client that sends no kill grace (gpulane submit always sends its user's) gets the machine's.
  if (!req["spec"].contains("kill_grace_s")) job.spec.kill_grace_s = config_.kill_grace_s;
  sched::Request& request = job.spec.request;
  request.uid = peer.uid;
  request.user = peer.user;
  request.submit_time_s = Now();
  const LimitsConfig& user_limits = LimitsOfUid(peer.uid, peer.user);
  if (Status s = sched::ApplyTimeLimits(user_limits, peer.user, request); !s.ok()) return Err(s.error().kind, s.error().message);
  if (Status s = sched::CheckGpuLimitEver(user_limits, peer.user, request.count); !s.ok())
    return Err(s.error().kind, s.error().message);
  if (request.priority > 0 && !peer.admin)
    return Err(ErrorKind::kPermission,
               fmt::format("--priority {}: only root and members of daemon.admin_group may raise a job's priority above "
                           "0; give 0 or a negative number",
                           request.priority));
  if (request.count > 0) {  // a CPU-only job (-g 0) chooses no GPU
    auto allowed = ResolveAllowedGpus(
        request.gpu_list, InheritedGpusFrom([&](const char* name) { return exec::EnvValue(job.spec.env, name); }),
        gpu_identity_);
    if (!allowed) return Err(allowed.error().kind, allowed.error().message);
    request.allowed_uuids = std::move(allowed).value();
    if (Status possible = lease::CanEverQualify(gpu_identity_, request, sched::Limits{config_.memory_margin_bytes});
        !possible.ok())
      return Err(possible.error().kind, possible.error().message);
  }
  if (job.spec.cwd.empty() || job.spec.cwd.front() != '/')
    return Err(ErrorKind::kInvalidArgument, "submit: the working directory must be an absolute path");
  // Every dependency must name a job: a look-up or two each (at most kMaxDependencies of them),
  // never reading an array's tasks or a job's spec. Only a failure is worded by the Resolver.
  for (auto [option, deps] : {std::pair{"--after", &job.spec.after_ok}, std::pair{"--after-any", &job.spec.after_any}})
    for (const store::JobRef& dep : *deps) {
      bool found = dep.task ? jobs_->TaskState(dep).has_value() : jobs_->active().count(dep.id) > 0;
      if (!found && !dep.task) {
        auto head = store_->Head(dep.id);
        found = head && *head;
      }
      if (found) continue;
      Resolver resolve(*store_, jobs_->active());
      auto named = resolve(dep);
      return Err(named ? ErrorKind::kNotFound : named.error().kind,
                 fmt::format("{} {}: {}", option, dep, named ? "no such job" : named.error().message));
    }
  job.uid = peer.uid;
  job.gid = peer.gid;
  job.user = peer.user;
  job.submit_time = request.submit_time_s;
  job.state = req.value("hold", false) ? JobState::kHeld : JobState::kPending;
  // Counted (a walk over every unfinished job, once a turn) only for a user with limits.max_queued.
  std::size_t uncounted = 0;
  std::size_t& unfinished = user_limits.max_queued ? UnfinishedOf(peer.uid) : uncounted;
  if (req.contains("array")) {
    auto indices = store::ArrayIndicesFromJson(req["array"]);  // found by fuzz_request: a float index was UB
    if (!indices) return Err(indices.error().kind, indices.error().message);
    if (Status s = sched::CheckQueuedLimit(user_limits, peer.user, unfinished, indices->size()); !s.ok())
      return Err(s.error().kind, s.error().message);
    if (req.contains("array_argv")) {  // submit --array-file: a command of its own for each task
      auto commands = store::ArrayArgvFromJson(req["array_argv"], indices->size());
      if (!commands) return Err(commands.error().kind, commands.error().message);
      *task_argv = std::move(commands).value();
    }
    unfinished += indices->size();
    *array_indices = std::move(indices).value();  // the tasks are made part by part (StoreArrayParts)
    jobs->push_back(std::move(job));
  } else {
    if (req.contains("array_argv")) return Err(ErrorKind::kInvalidArgument, "submit: \"array_argv\" needs \"array\"");
    if (Status s = sched::CheckQueuedLimit(user_limits, peer.user, unfinished, 1); !s.ok())
      return Err(s.error().kind, s.error().message);
    ++unfinished;
    jobs->push_back(std::move(job));
  }
  return json();
}

const LimitsConfig& Daemon::LimitsOfUid(std::uint32_t uid, const std::string& user) {
  auto it = limits_of_uid_.find(uid);
  if (it == limits_of_uid_.end())
    it = limits_of_uid_.emplace(uid, sched::LimitsOf(config_, uid, user, sched::AnyLimits(config_) ? GroupNamesOf(uid)
                                                                                                      : std::vector<std::string>{}))
             .first;
  return it->second;
}

std::size_t& Daemon::UnfinishedOf(std::uint32_t uid) {
  if (!unfinished_of_uid_) {
    unfinished_of_uid_.emplace();
    for (const auto& [id, job] : jobs_->active()) ++(*unfinished_of_uid_)[job.uid];
    for (const ArrayInProgress& a : arrays_) (*unfinished_of_uid_)[a.sub.jobs.front().uid] += a.sub.indices.size();
  }
  return (*unfinished_of_uid_)[uid];
}

void Daemon::CommitSubmissions() {
  if (submits_.empty()) {
    unfinished_of_uid_.reset();
    return;
  }
  // Held submissions cannot start anything: no need to walk the queue for them afterwards.
  bool any_runnable = false;
  for (const auto& sub : submits_)
    for (const auto& job : sub.jobs) any_runnable = any_runnable || job.state != JobState::kHeld;
  // Group commit: every submission read in this round goes into one transaction (one fsync);
  // arrays each need their own to number their tasks, so they commit separately. Each reply is
  // written as soon as its commit is durable, not after the rest of the loop's turn (which may
  // walk the whole queue to launch jobs).
  auto answer = [this](int fd, const json& reply) {
    auto it = connections_.find(fd);
    if (it == connections_.end()) return;
    Reply(it->second, reply);
    WriteTo(it->second);
  };
  auto accepted = [](const std::vector<std::int64_t>& ids, bool array, bool repeated) {
    json reply = Ok({{"ids", ids}});
    if (array) reply["array_job_id"] = ids.front();
    if (repeated) reply["repeated"] = true;
    return reply;
  };
  // Idempotency keys: a key stored before gets that submission's ids, and nothing is queued; one
  // repeated within this round gets the ids of its first submission once that is stored.
  std::map<std::pair<std::uint32_t, std::string>, std::size_t> first_of_key;  // -> index in submits_
  std::vector<std::optional<std::size_t>> repeat_of(submits_.size());
  std::vector<std::optional<std::vector<std::int64_t>>> stored_ids(submits_.size());
  std::vector<bool> skip(submits_.size(), false);
  for (std::size_t i = 0; i < submits_.size(); ++i) {
    PendingSubmit& sub = submits_[i];
    if (sub.key.empty()) continue;
    const auto key = std::pair{sub.jobs.front().uid, sub.key};
    if (auto first = first_of_key.find(key); first != first_of_key.end()) {
      repeat_of[i] = first->second;
      skip[i] = true;
      continue;
    }
    // The first submission with this key is an array still being stored: answered with it.
    if (auto storing = std::find_if(arrays_.begin(), arrays_.end(), [&](const ArrayInProgress& a) {
          return a.sub.jobs.front().uid == key.first && a.sub.key == key.second;
        });
        storing != arrays_.end()) {
      storing->repeats.emplace_back(sub.fd, sub.serial);
      skip[i] = true;
      continue;
    }
    auto found = store_->FindSubmission(key.first, key.second);
    if (!found) {
      answer(sub.fd, Err(ErrorKind::kIo, "the job could not be stored: " + found.error().message));
      if (sub.array) ResumeAfterArray(sub.fd, sub.serial);
      skip[i] = true;
    } else if (*found && !(*found)->empty()) {
      Log(fmt::format("submission of {} with a known idempotency key: answered with job {} again", sub.jobs.front().user,
                      (*found)->front()));
      answer(sub.fd, accepted(**found, sub.array, true));
      if (sub.array) ResumeAfterArray(sub.fd, sub.serial);
      skip[i] = true;
    } else {
      first_of_key.emplace(key, i);
    }
  }
  auto key_of = [&](std::size_t i, std::size_t first) {
    const PendingSubmit& sub = submits_[i];
    return store::SubmissionKey{sub.jobs.front().uid, sub.key, first, sub.jobs.size()};
  };
  std::vector<Job> batch;
  std::vector<std::pair<std::size_t, std::size_t>> owners;  // index in submits_, count
  std::vector<store::SubmissionKey> batch_keys;
  auto flush_batch = [&]() {
    if (batch.empty()) return;
    auto ids = store_->Insert(batch, false, batch_keys);
    jobs_->NoteWrite(ids ? Status::Ok() : Status(ids.error()));
    std::size_t k = 0;
    for (auto& [index, count] : owners) {
      if (ids) stored_ids[index] = std::vector<std::int64_t>(ids->begin() + k, ids->begin() + k + count);
      answer(submits_[index].fd, ids ? accepted(*stored_ids[index], false, false)
                                     : Err(ErrorKind::kIo, "the job could not be stored: " + ids.error().message));
      k += count;
    }
    if (ids)
      for (auto& job : batch) jobs_->Add(std::move(job));
    batch.clear();
    owners.clear();
    batch_keys.clear();
  };
  for (std::size_t i = 0; i < submits_.size(); ++i) {
    if (skip[i]) continue;
    PendingSubmit& s = submits_[i];
    if (s.array) {
      // Stored part by part from this turn on (StoreArrayParts); a repeat of its key in this round
      // waits with it.
      const std::size_t queued = arrays_.size();
      StartArray(std::move(s));
      for (std::size_t j = i + 1; j < submits_.size(); ++j)
        if (repeat_of[j] == i) {
          arrays_[queued].repeats.emplace_back(submits_[j].fd, submits_[j].serial);
          repeat_of[j].reset();
        }
      continue;
    }
    if (!s.key.empty()) batch_keys.push_back(key_of(i, batch.size()));
    owners.emplace_back(i, s.jobs.size());
    for (auto& job : s.jobs) batch.push_back(std::move(job));
  }
  flush_batch();
  for (std::size_t i = 0; i < submits_.size(); ++i) {
    if (!repeat_of[i]) continue;
    const auto& ids = stored_ids[*repeat_of[i]];
    answer(submits_[i].fd, ids ? accepted(*ids, submits_[i].array, true)
                               : Err(ErrorKind::kIo, "the job could not be stored (its first submission with this "
                                                     "idempotency key was not stored either)"));
    if (submits_[i].array) ResumeAfterArray(submits_[i].fd, submits_[i].serial);
  }
  if (any_runnable) schedule_needed_ = true;
  submits_.clear();
  unfinished_of_uid_.reset();  // counted afresh in the next turn that has a submission
}

void Daemon::AskSampler(Connection& c, const json& req) {
  if (!sampler_) {
    Reply(c, Err(ErrorKind::kUnavailable,
                 "telemetry is off on this daemon (telemetry.enabled = false in /etc/gpulane/config.toml, or NVML could not be "
                 "opened for it: see the daemon's log)"));
    return;
  }
  json extra;
  if (req.value("op", "") == "metrics") extra["jobs_by_state"] = jobs_->CountByState();
  // Who asks: a usage record's name is hidden from other users as a job's command is.
  extra["viewer"] = {{"uid", c.peer.uid}, {"sees_all", c.peer.admin || ShowsCommandsTo(c.peer)}};
  c.asking = true;
  sampler_->Ask(c.fd, c.serial, req, std::move(extra));
}

json Daemon::WithStoreWarnings(json reply) const {
  json warnings = json::array();
  if (std::string line = jobs_->StoreTroubleLine(); !line.empty()) warnings.push_back(std::move(line));
  if (const auto& damaged = jobs_->damaged(); !damaged.empty()) {
    std::string ids;
    for (std::size_t i = 0; i < damaged.size() && i < 10; ++i) ids += (i ? ", " : "") + std::to_string(damaged[i].id);
    if (damaged.size() > 10) ids += fmt::format(" and {} more", damaged.size() - 10);
    warnings.push_back(fmt::format("job{} {} cannot be read from the job store: kept there as {}, not run (see the "
                                   "daemon's log)",
                                   damaged.size() == 1 ? "" : "s", ids, damaged.size() == 1 ? "it is" : "they are"));
  }
  // Fair share switched off for `gpulane run` (a lease directory it cannot publish in): said
  // wherever the daemon's health is shown, not only in its log.
  if (!share_error_.empty())
    warnings.push_back(fmt::format("fair share is not published to the lease line ({}): `gpulane run` and lease() "
                                   "wait in submission order until it is; see the daemon's log",
                                   share_error_));
  if (std::string line = sampler_ ? sampler_->NoRoomForHistory() : ""; !line.empty()) warnings.push_back(std::move(line));
  if (!warnings.empty()) reply["warnings"] = std::move(warnings);
  return reply;
}

std::vector<unsigned> Daemon::GpuIndices(const Job& job) const {
  std::vector<unsigned> indices;
  for (const auto& uuid : job.gpu_uuids) {
    auto it = gpu_index_.find(uuid);
    if (it != gpu_index_.end()) indices.push_back(it->second);
  }
  return indices;
}

bool Daemon::ShowsCommandsTo(const Peer& peer) const {
  if (config_.daemon_show_commands) return true;
  // The daemon's own gpulane-web (its child: the pid cannot be another process's while it is not
  // reaped) with web.show_commands: the admin chose to show command lines over HTTP.
  return config_.web_show_commands && web_ && web_->pid() > 0 && peer.pid == web_->pid();
}

store::JobVisibility Daemon::VisibilityFor(const Peer& peer, const Job& job) const {
  if (CanAct(peer, job)) return store::kSeesAll;
  return {ShowsCommandsTo(peer), false};
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
  // What the sampler says of each GPU: drained (no new jobs: every waiter reads this snapshot)
  // and its anomalies now.
  if (sampler_) {
    SamplerThread::Marks marks = sampler_->CurrentMarks();
    for (auto& d : snapshot->devices) {
      if (auto it = marks.drained.find(d.uuid); it != marks.drained.end()) d.drained = it->second;
      if (auto it = marks.anomalies.find(d.uuid); it != marks.anomalies.end()) d.anomalies = it->second;
    }
  }
  return WithStoreWarnings(Ok({{"snapshot", SnapshotToJson(*snapshot)}}));
}

json Daemon::HandleQueue(const Peer& peer, const json& req) {
  auto selection = SelectForQueue(req, *store_, *jobs_, false);
  if (!selection) return Err(selection.error().kind, selection.error().message);
  // One frame is built whole while everyone else waits: larger listings are streamed.
  if (selection->ids.size() > kMaxQueueLimit)
    return Err(ErrorKind::kInvalidArgument,
               fmt::format("queue: {} jobs are more than the {} of one reply: ask for a streamed reply (\"stream\": "
                           "\"json\" or \"table\", as gpulane queue does), or for one user's jobs",
                           selection->ids.size(), kMaxQueueLimit));
  std::vector<const Job*> selected;
  selected.reserve(selection->ids.size());
  for (std::int64_t id : selection->ids)
    if (const Job* job = selection->Find(id, jobs_->active())) selected.push_back(job);
  if (req.value("format", "") == "table") {
    const double now = Now();
    std::string table = QueueTableHeader();
    table.reserve(table.size() + selected.size() * 96);
    for (const Job* job : selected) AppendQueueRow(*job, GpuIndices(*job), now, table);
    return WithStoreWarnings(Ok({{"table", std::move(table)}, {"count", selected.size()}}));
  }
  json jobs = json::array();
  for (const Job* job : selected) {
    json j = JobForClient(*job, false);
    store::HideFields(j, {VisibilityFor(peer, *job).commands, true});  // a listing has no environment
    jobs.push_back(std::move(j));
  }
  return WithStoreWarnings(Ok({{"jobs", std::move(jobs)}}));
}

void Daemon::StartQueueStream(Connection& c, const json& req) {
  const std::string kind = req["stream"].is_string() ? req["stream"].get<std::string>() : "";
  if (kind != "json" && kind != "table") {
    Reply(c, Err(ErrorKind::kInvalidArgument, "queue: \"stream\" must be \"json\" or \"table\""));
    return;
  }
  auto selection = SelectForQueue(req, *store_, *jobs_, true);
  if (!selection) {
    Reply(c, Err(selection.error().kind, selection.error().message));
    return;
  }
  auto stream = std::make_shared<QueueStream>();
  stream->json = kind == "json";
  stream->jobs = std::move(selection).value();
  stream->now = Now();
  Reply(c, WithStoreWarnings(Ok({{"stream", kind}, {"count", stream->jobs.ids.size()}})));
  c.stream = std::move(stream);
}

void Daemon::PumpStream(Connection& c) {
  QueueStream& s = *c.stream;
  if (c.out.size() >= kStreamLowWaterBytes) return;  // the client has not taken the last part yet
  std::string text;
  text.reserve(kStreamPartBytes + 16384);
  if (!s.json && s.next == 0) text += QueueTableHeader();
  if (s.jobs.filter && s.next < s.jobs.ids.size()) {
    // "all": this part's jobs, in one read of the store (a range of ids), as they are now.
    store::JobFilter part = *s.jobs.filter;
    part.min_id = s.jobs.ids[s.next];
    part.max_id = s.jobs.ids[std::min(s.next + kStreamPartJobs, s.jobs.ids.size()) - 1];
    s.jobs.stored.clear();
    if (auto jobs = store_->List(part))
      for (auto& job : *jobs) s.jobs.stored.emplace(job.id, std::move(job));
  }
  // A part read from the store ("all") is kStreamPartJobs jobs at most (about 50 us a job); one
  // of the table's jobs costs a few microseconds, so such a part is bounded by its bytes alone:
  // 200 rows a part made a 5,000-job queue take 25 parts, one a turn (issue 23, item 8).
  for (std::size_t n = 0; s.next < s.jobs.ids.size() && text.size() < kStreamPartBytes && (!s.jobs.filter || n < kStreamPartJobs);
       ++n) {
    const std::int64_t id = s.jobs.ids[s.next++];
    std::optional<Job> ended;  // ended since the request: listed as the store has it now
    const Job* job = s.jobs.Find(id, jobs_->active());
    if (!job && (ended = FindJob(id))) job = &*ended;
    if (!job) continue;
    if (s.json) {
      text += QueueJsonSeparator(s.sent);
      AppendQueueJobJson(*job, GpuIndices(*job), text, VisibilityFor(c.peer, *job).commands);
    } else {
      AppendQueueRow(*job, GpuIndices(*job), s.now, text);
    }
    ++s.sent;
  }
  const bool done = s.next == s.jobs.ids.size();
  if (done && s.json) text += QueueJsonEnd(s.sent);
  if (!text.empty()) proto::AppendRawFrame(text, c.out);
  if (!done) return;
  proto::AppendRawFrame("", c.out);
  c.stream.reset();
  ReadFrom(c);  // the requests that came in behind the stream, in order
}

json Daemon::HandleShow(const Peer& peer, const json& req) {
  if (!req.contains("id")) return Err(ErrorKind::kInvalidArgument, "show: give the job's id");
  auto refs = store::JobRefsFromJson(req["id"]);
  if (!refs) return Err(ErrorKind::kInvalidArgument, "show: " + refs.error().message);
  Resolver resolve(*store_, jobs_->active());
  Outcome out;
  json jobs = json::array();
  bool one = refs->size() == 1;  // a job or task, not an array or a list of tasks: answered as "job" too
  for (const store::JobRef& ref : *refs) {
    auto named = resolve(ref);
    if (!named) {
      out.Failed(named.error().kind, store::FormatJobRef(ref), named.error().message);
      continue;
    }
    one = one && !named->array;
    for (auto id : named->ids) {
      auto job = resolve.Find(id);
      if (!job) continue;
      const store::JobVisibility visible = VisibilityFor(peer, *job);
      json j = JobForClient(*job, /*with_env=*/true);
      store::HideFields(j, visible);  // the environment and notification target too, when not hers
      // Every attempt (a retried job has several), each with its GPUs' indices as the job's.
      json attempts = store::AllAttemptsToJson(*job);
      for (json& a : attempts) {
        json indices = json::array();
        for (const auto& uuid : a["gpu_uuids"])
          if (auto it = gpu_index_.find(uuid.get<std::string>()); it != gpu_index_.end()) indices.push_back(it->second);
        a["gpu_indices"] = std::move(indices);
      }
      j["attempts"] = std::move(attempts);
      // What --retry has used (failed earlier attempts) and the requeues, which use none of it.
      j["retries_used"] = store::FailedAttempts(*job);
      j["requeues"] = static_cast<int>(job->attempts.size()) - store::FailedAttempts(*job);
      // What isolation this job was given, as its supervisor recorded it (null: not started yet, or
      // stored before it was recorded), and how this daemon's supervisors isolate jobs ([run]
      // isolate, their euid: docs/security.md).
      j["isolation"] = job->isolation.empty() ? json(nullptr) : json(job->isolation);
      j["isolation_setting"] = exec::IsolationWords(exec::IsolationOf(config_), geteuid() == 0);
      jobs.push_back(std::move(j));
    }
  }
  if (jobs.empty()) return out.ErrorReply();
  json body = Ok({{"jobs", jobs}});
  if (one && jobs.size() == 1) body["job"] = jobs[0];
  return out.WithFailures(body);
}

void Daemon::HandleCancel(Connection& c, const json& req) {
  const Peer& peer = c.peer;
  auto refs = RefsOfIds(req, "cancel");
  if (!refs) return Reply(c, Err(refs.error().kind, refs.error().message));
  const std::string user = req.value("user", ""), name = req.value("name", "");
  if (refs->empty() && user.empty() && name.empty())
    return Reply(c, Err(ErrorKind::kInvalidArgument, "cancel: give job ids, a user or a name"));
  Resolver resolve(*store_, jobs_->active());
  CancelInProgress k{c.fd, c.serial, peer.user, {}, 0, {}};
  std::set<std::int64_t> seen;
  auto cancel = [&](const Job& job) {
    if (!seen.insert(job.id).second) return;
    k.ids.push_back(job.id);
    // Not started while the parts before its own are stored (a 300,000-job cancel takes seconds).
    if (job.state == JobState::kPending) jobs_->RequestCancelPending(job.id);
  };
  for (const store::JobRef& ref : *refs) {
    auto named = resolve(ref);
    if (!named) {
      k.out.Failed(named.error().kind, store::FormatJobRef(ref), named.error().message);
      continue;
    }
    if (auto refused = Refuse(peer, *named, resolve, "cancel", k.out)) {
      Log(*refused);
      continue;
    }
    std::vector<Job*> live = Live(jobs_->active(), *named);
    if (live.empty()) {
      k.out.Failed(ErrorKind::kWrongState, named->text, Ended(*named, resolve));
      continue;
    }
    for (Job* job : live) cancel(*job);
  }
  // --name alone means the caller's own jobs of that name (all users' for an admin); --user names whose.
  if (!user.empty() || !name.empty()) {
    std::string filter = user.empty() ? "" : "--user " + user;
    if (!name.empty()) filter += (filter.empty() ? "--name " : " --name ") + name;
    if (!user.empty() && user != peer.user && !peer.admin) {
      Log(fmt::format("refused: {} (uid {}) may not cancel the jobs of {}", peer.user, peer.uid, user));
      k.out.Failed(ErrorKind::kPermission, filter, fmt::format("--user {}: only {} or an admin may cancel their jobs", user, user));
    } else {
      std::size_t matched = 0;
      // One user's own jobs through their index (IdsOfUid), not a walk of everyone's.
      auto match = [&](const Job& job) {
        if (store::IsFinished(job.state) || (!user.empty() && job.user != user) || (!name.empty() && job.spec.name != name))
          return;
        ++matched;
        cancel(job);
      };
      if (user.empty() && !peer.admin) {
        for (std::int64_t id : jobs_->IdsOfUid(peer.uid))
          if (auto it = jobs_->active().find(id); it != jobs_->active().end()) match(it->second);
      } else {
        for (const auto& [id, job] : jobs_->active()) match(job);
      }
      if (!matched) k.out.Failed(ErrorKind::kNotFound, filter, fmt::format("no queued or running job matches {}", filter));
    }
  }
  // The jobs are cancelled in parts, one transaction each (cancel_slices.cc): a few thousand now,
  // the rest on the next turns, other clients served in between; this client is answered once
  // the last part is stored.
  if (CancelParts(k, kCancelTurnBudgetS)) return Reply(c, k.out.Reply("cancelled"));
  c.storing = true;
  cancels_.push_back(std::move(k));
}

void Daemon::HandleHold(Connection& c, const json& req, bool hold) {
  const Peer& peer = c.peer;
  const std::string op = hold ? "hold" : "release";
  auto refs = RefsOfIds(req, op);
  if (!refs) return Reply(c, Err(refs.error().kind, refs.error().message));
  if (refs->empty()) return Reply(c, Err(ErrorKind::kInvalidArgument, op + ": give job ids"));
  Resolver resolve(*store_, jobs_->active());
  // Named now, changed and stored in parts (hold_slices.cc), answered once the last is stored.
  JobsInParts k{c.fd, c.serial, peer.user, {}, 0, {}, hold ? PartsOp::kHold : PartsOp::kRelease};
  Outcome& out = k.out;
  std::set<std::int64_t> seen;
  // Whether `job` is one `op` changes: hold takes pending jobs and those waiting for GPUs, release held ones.
  auto applies = [&](const Job& job) {
    if (!hold) return job.state == JobState::kHeld;
    return job.state == JobState::kPending || (job.state == JobState::kLaunching && !jobs_->HoldRequested(job.id));
  };
  auto change = [&](Job& job) {
    if (!seen.insert(job.id).second) return;
    k.ids.push_back(job.id);
    if (job.state == JobState::kPending) jobs_->KeepFromLaunch(job.id);  // not launched before its part
  };
  for (const store::JobRef& ref : *refs) {
    auto named = resolve(ref);
    if (!named) {
      out.Failed(named.error().kind, store::FormatJobRef(ref), named.error().message);
      continue;
    }
    if (auto refused = Refuse(peer, *named, resolve, op, out)) {
      Log(*refused);
      continue;
    }
    std::vector<Job*> live = Live(jobs_->active(), *named);
    if (live.empty()) {
      out.Failed(ErrorKind::kWrongState, named->text, Ended(*named, resolve));
      continue;
    }
    std::vector<Job*> changing;
    for (Job* job : live)
      if (applies(*job)) changing.push_back(job);
    if (changing.empty()) {
      out.Failed(ErrorKind::kWrongState, named->text,
                 named->array ? fmt::format("array {} has no {} tasks to {}", named->text, hold ? "pending" : "held", op)
                              : NotApplicable(*live.front(), hold, jobs_->HoldRequested(live.front()->id)));
      continue;
    }
    for (Job* job : changing) change(*job);
  }
  StartInParts(c, std::move(k));
}

json Daemon::HandleLogs(const Peer& peer, const json& req) {
  if (!req.contains("id")) return Err(ErrorKind::kInvalidArgument, "logs: give the job's id");
  auto refs = store::JobRefsFromJson(req["id"]);
  if (!refs) return Err(ErrorKind::kInvalidArgument, "logs: " + refs.error().message);
  const std::string given = req["id"].is_string() ? req["id"].get<std::string>() : req["id"].dump();
  if (refs->size() != 1)
    return Err(ErrorKind::kInvalidArgument,
               fmt::format("logs {}: names {} tasks, and logs prints one job's output: name one, e.g. gpulane logs {}",
                           given, refs->size(), refs->front()));
  Resolver resolve(*store_, jobs_->active());
  auto named = resolve(refs->front());
  if (!named) return Err(named.error().kind, named.error().message);
  if (named->array) {
    auto first = resolve.Find(named->ids.front()), last = resolve.Find(named->ids.back());
    const std::string a = first ? store::JobIdText(*first) : named->text, b = last ? store::JobIdText(*last) : named->text;
    return Err(ErrorKind::kInvalidArgument,
               fmt::format("logs {}: job {} is an array of {} tasks ({} to {}) and logs prints one job's output: name "
                           "a task, e.g. gpulane logs {}",
                           given, named->text, named->ids.size(), a, b, a));
  }
  const std::int64_t id = named->ids.front();
  auto job = resolve.Find(id);
  if (!job) return Err(ErrorKind::kNotFound, fmt::format("no job {}", named->text));
  if (!CanAct(peer, *job)) {
    Log(fmt::format("refused: {} (uid {}) may not read the logs of job {} of {}", peer.user, peer.uid, named->text, job->user));
    return Err(ErrorKind::kPermission,
               fmt::format("job {} belongs to {}: only they or an admin may read its logs", named->text, job->user));
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
  // Opened with the owner's rights (never root's: a path the owner names may lead anywhere), never
  // through a final symlink, never blocking (a FIFO), never becoming the daemon's terminal; and
  // read only when it is a regular file the job's owner owns (os/user_file.h).
  auto file = os::OpenAsUser(path, os::ActingFor(job->uid, job->gid),
                             {.access = os::UserFileAccess::kRead,
                              .owner = job->uid == 0 ? std::nullopt : std::optional<std::uint32_t>(job->uid),
                              .null_device_ok = true});
  if (!file) {
    if (file.error().kind == ErrorKind::kNotFound) return nothing();
    if (file.error().kind == ErrorKind::kPermission)  // the owner herself may not open it
      return Err(ErrorKind::kPermission, fmt::format("cannot read {} as {}: {}", path, job->user, std::strerror(EACCES)));
    return Err(file.error().kind, fmt::format("cannot read the log of job {} as {}: {}", named->text, job->user,
                                              file.error().message));
  }
  if (file->null_device()) return nothing();  // -o /dev/null: the output was thrown away
  const std::uint64_t size = std::min<std::uint64_t>(file->size_bytes(), end.value_or(UINT64_MAX));
  const std::uint64_t from = start + offset;
  auto read = os::ReadAt(*file, from, std::min<std::uint64_t>(4u << 20, size > from ? size - from : 0));
  if (!read) return Err(ErrorKind::kIo, fmt::format("cannot read {}: {}", path, read.error().message));
  std::string data = std::move(read).value();
  // The output is bytes, and a 4 MiB part may end inside a character: {"b64": ...} unless UTF-8.
  return Ok({{"data", BytesToJson(data)}, {"offset", offset + data.size()}, {"finished", finished}, {"path", BytesToJson(path)}});
}

bool Daemon::HandleWait(Connection& c, const json& req) {
  auto refs = RefsOfIds(req, "wait");
  if (!refs) {
    Reply(c, Err(refs.error().kind, refs.error().message));
    return true;
  }
  if (refs->empty()) return false;
  Resolver resolve(*store_, jobs_->active());
  Outcome out;
  std::vector<std::int64_t> ids;
  std::set<std::int64_t> seen;
  for (const store::JobRef& ref : *refs) {
    auto named = resolve(ref);
    if (!named) {
      out.Failed(named.error().kind, store::FormatJobRef(ref), named.error().message);
      continue;
    }
    for (auto id : named->ids)
      if (seen.insert(id).second) ids.push_back(id);
  }
  json checked = Ok();
  out.WithFailures(checked);
  if (ids.empty()) {
    Reply(c, out.ErrorReply());
  } else if (req.value("check", false)) {  // only which ids name no job, at once (the CLI warns before it waits)
    Reply(c, checked);
  } else {
    waiters_.push_back({c.fd, ids, checked["failed"]});
  }
  return true;
}

void Daemon::AnswerWaiters() {
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    bool done = std::all_of(it->ids.begin(), it->ids.end(), [&](std::int64_t id) { return !jobs_->active().count(id); });
    if (!done) {
      ++it;
      continue;
    }
    auto conn = connections_.find(it->fd);
    if (conn != connections_.end()) {
      // Any user may wait for any job: the jobs come as a listing shows them (no environment nor
      // notification target; another user's command line hidden unless daemon.show_commands).
      json jobs = json::array(), errors = json::array();
      for (auto id : it->ids) {
        auto job = FindJob(id);
        if (!job) continue;
        json j = store::JobToJson(*job, false);
        store::HideFields(j, {VisibilityFor(conn->second.peer, *job).commands, true});
        jobs.push_back(std::move(j));
      }
      for (const auto& failure : it->failed) errors.push_back(failure["error"]);
      Reply(conn->second, Ok({{"jobs", jobs}, {"failed", it->failed}, {"errors", errors}}));
    }
    it = waiters_.erase(it);
  }
}

}  // namespace gpulane::daemon
