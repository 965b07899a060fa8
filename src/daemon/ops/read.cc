// Requests that read jobs: show, logs, queue. Identity is the connection's peer (SO_PEERCRED);
// another user's command line, directory and log paths come hidden (docs/security.md "Privacy").
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <set>

#include <fmt/format.h>

#include "daemon/ops/ops.h"
#include "daemon/ops/resolve.h"
#include "exec/device_isolation.h"
#include "os/user_file.h"
#include "os/user_groups.h"
#include "render/queue_table.h"
#include "store/job_id.h"
#include "util/bytes_json.h"

namespace gpulane::daemon {

nlohmann::json QueueSelection::WithLeftOut(nlohmann::json reply) const {
  if (!older_left_out) return reply;
  reply["warnings"].push_back(fmt::format("the newest {} jobs are listed and {} older {} left out: `gpulane queue "
                                          "--all --limit N` lists the newest N",
                                          limit, older_left_out, older_left_out == 1 ? "one is" : "ones are"));
  return reply;
}

}  // namespace gpulane::daemon

namespace gpulane::daemon::ops {

using nlohmann::json;
using store::Job;

namespace {

// `job` as show gives it: with its environment (when the peer may see it), every attempt, what
// --retry has used and the isolation it was given.
json ShownJob(const Context& ctx, const Job& job) {
  json j = ctx.views.JobForClient(job, /*with_env=*/true);
  store::HideFields(j, ctx.views.VisibilityFor(ctx.peer, job));  // the environment and notification target too, when not hers
  // Every attempt (a retried job has several), each with its GPUs' indices as the job's.
  json attempts = store::AllAttemptsToJson(job);
  for (json& a : attempts) {
    json indices = json::array();
    for (const auto& uuid : a["gpu_uuids"])
      if (auto index = ctx.views.GpuIndex(uuid.get<std::string>())) indices.push_back(*index);
    a["gpu_indices"] = std::move(indices);
  }
  j["attempts"] = std::move(attempts);
  // What --retry has used (failed earlier attempts) and the requeues, which use none of it.
  j["retries_used"] = store::FailedAttempts(job);
  j["requeues"] = static_cast<int>(job.attempts.size()) - store::FailedAttempts(job);
  // What isolation this job was given, as its supervisor recorded it (null: not started yet, or
  // stored before it was recorded), and how this daemon's supervisors isolate jobs ([run]
  // isolate, their euid: docs/security.md).
  j["isolation"] = job.isolation.empty() ? json(nullptr) : json(job.isolation);
  j["isolation_setting"] = exec::IsolationWords(exec::IsolationOf(ctx.config), geteuid() == 0);
  return j;
}

Error TooManyForOneReply(std::size_t count) {
  return MakeError(ErrorKind::kInvalidArgument,
                   fmt::format("queue: {} jobs are more than the {} of one reply: ask for a streamed reply (\"stream\": "
                               "\"json\" or \"table\", as gpulane queue does), or for one user's jobs",
                               count, kMaxQueueLimit));
}

// How many of the jobs `filter` picks are older than job `first_listed` (a listing cut at it left them out).
Result<std::size_t> OlderThan(const Context& ctx, store::JobFilter filter, std::int64_t first_listed) {
  filter.max_id = first_listed - 1;
  auto count = ctx.store.Count(filter);
  if (!count) return MakeError(ErrorKind::kIo, count.error().message);
  return *count;
}

// With "all": the newest `limit` jobs of every state (of `uid`).
Result<QueueSelection> SelectAll(const Context& ctx, const proto::QueueRequest& req, std::optional<std::uint32_t> uid,
                                 bool streamed) {
  QueueSelection selection;
  store::JobFilter filter;
  filter.include_finished = true;
  filter.uid = uid;
  filter.limit = req.limit;
  if (filter.limit == 0) filter.limit = kDefaultQueueLimit;
  const std::size_t max = streamed ? kMaxStreamedQueueLimit : kMaxQueueLimit;
  if (filter.limit > max)
    return MakeError(ErrorKind::kInvalidArgument,
                     fmt::format("queue: a limit of {} jobs is more than the {} of one {}: give a smaller \"limit\"{}",
                                 filter.limit, max, streamed ? "listing" : "reply",
                                 streamed ? "" : ", or ask for a streamed reply (\"stream\") for more"));
  // One more than the limit is read, so that a listing cut short says so, and how many it left
  // out (never silently the newest 1000 as if they were all).
  selection.limit = filter.limit;
  ++filter.limit;
  if (streamed) {
    auto ids = ctx.store.ListIds(filter);
    if (!ids) return MakeError(ErrorKind::kIo, ids.error().message);
    selection.ids = std::move(ids).value();
    const bool cut = selection.ids.size() > selection.limit;
    if (cut) selection.ids.erase(selection.ids.begin());  // in id order: the oldest first
    filter.limit = 0;
    selection.filter = filter;
    if (cut) {
      auto older = OlderThan(ctx, filter, selection.ids.front());
      if (!older) return older.error();
      selection.older_left_out = *older;
    }
    return selection;
  }
  auto list = ctx.store.List(filter);
  if (!list) return MakeError(ErrorKind::kIo, list.error().message);
  const bool cut = list->size() > selection.limit;
  if (cut) {
    auto older = OlderThan(ctx, filter, (*list)[1].id);
    if (!older) return older.error();
    selection.older_left_out = *older;
  }
  for (std::size_t i = cut ? 1 : 0; i < list->size(); ++i) {
    selection.ids.push_back((*list)[i].id);
    selection.stored.emplace((*list)[i].id, std::move((*list)[i]));
  }
  return selection;
}

}  // namespace

json Show(const Context& ctx, const proto::ShowRequest& req) {
  auto refs = store::JobRefsFromJson(*req.id);
  if (!refs) return proto::ErrorResponse(ErrorKind::kInvalidArgument, "show: " + refs.error().message);
  Resolver resolve(ctx.store, ctx.jobs.active());
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
    for (auto id : named->ids)
      if (const Job* job = resolve.Find(id)) jobs.push_back(ShownJob(ctx, *job));
  }
  if (jobs.empty()) return out.ErrorReply();
  json body = Ok({{"jobs", jobs}});
  if (one && jobs.size() == 1) body["job"] = jobs[0];
  return out.WithFailures(body);
}

// The one job a logs request names (an array or several tasks are refused, naming a task).
static Result<const Job*> LogsJob(const Context& ctx, const json& id, Resolver& resolve) {
  auto refs = store::JobRefsFromJson(id);
  if (!refs) return MakeError(ErrorKind::kInvalidArgument, "logs: " + refs.error().message);
  const std::string given = id.is_string() ? id.get<std::string>() : id.dump();
  if (refs->size() != 1)
    return MakeError(ErrorKind::kInvalidArgument,
                     fmt::format("logs {}: names {} tasks, and logs prints one job's output: name one, e.g. gpulane logs {}",
                                 given, refs->size(), refs->front()));
  auto named = resolve(refs->front());
  if (!named) return named.error();
  if (named->array) {
    auto first = resolve.Find(named->ids.front()), last = resolve.Find(named->ids.back());
    const std::string a = first ? store::JobIdText(*first) : named->text, b = last ? store::JobIdText(*last) : named->text;
    return MakeError(ErrorKind::kInvalidArgument,
                     fmt::format("logs {}: job {} is an array of {} tasks ({} to {}) and logs prints one job's output: "
                                 "name a task, e.g. gpulane logs {}",
                                 given, named->text, named->ids.size(), a, b, a));
  }
  const Job* job = resolve.Find(named->ids.front());
  if (!job) return MakeError(ErrorKind::kNotFound, fmt::format("no job {}", named->text));
  if (!CanAct(ctx.peer, *job)) {
    ctx.views.Log(fmt::format("refused: {} (uid {}) may not read the logs of job {} of {}", ctx.peer.user, ctx.peer.uid,
                              named->text, job->user()));
    return MakeError(ErrorKind::kPermission,
                     fmt::format("job {} belongs to {}: only they or an admin may read its logs", named->text, job->user()));
  }
  return job;
}

// A job that ended with no log recorded (cancelled before it ran, or its log could not be created:
// its reason says where and why): no output, said so (exit 12) rather than printing nothing.
namespace {
Error NoLogError(const Job& job) {
  const std::string why = job.reason.empty() ? "" : ": " + job.reason;
  return MakeError(ErrorKind::kWrongState,
                   fmt::format("job {} has no output: {} ({}{})", store::JobIdText(job),
                               job.start_time ? "no log of it was recorded" : "it never ran", store::StateName(job.state), why));
}
}  // namespace

Result<proto::LogsReply> Logs(const Context& ctx, const proto::LogsRequest& req) {
  Resolver resolve(ctx.store, ctx.jobs.active());
  auto found = LogsJob(ctx, *req.id, resolve);
  if (!found) return found.error();
  const Job& job = **found;
  const std::string text = store::JobIdText(job);
  // Exactly the file the job's output went to, from where this job's part of it starts; nothing
  // before its command opened it (a default name may be taken by an older job's file).
  const store::JobLogs logs = store::LogsOf(job);
  const bool err_stream = req.stream == "err";
  const std::string& path = err_stream ? logs.stderr_path : logs.stdout_path;
  const std::uint64_t start = err_stream ? logs.stderr_offset : logs.stdout_offset;
  const std::optional<std::uint64_t> end = err_stream ? logs.stderr_end : logs.stdout_end;
  const bool finished = store::IsFinished(job.state);
  const proto::LogsReply nothing{"", req.offset, finished, BytesToJson(path)};
  if (path.empty() && finished && logs.stdout_path.empty() && logs.stderr_path.empty())  // it never opened one
    return NoLogError(job);
  if (path.empty()) return nothing;
  // Opened with the owner's rights (never root's: a path the owner names may lead anywhere), never
  // through a final symlink, never blocking (a FIFO), never becoming the daemon's terminal; and
  // read only when it is a regular file the job's owner owns (os/user_file.h).
  auto file = os::OpenAsUser(path, os::ActingFor(job.uid(), job.gid),
                             {.access = os::UserFileAccess::kRead,
                              .owner = job.uid() == 0 ? std::nullopt : std::optional<std::uint32_t>(job.uid()),
                              .null_device_ok = true});
  if (!file) {
    if (file.error().kind == ErrorKind::kNotFound) return nothing;
    if (file.error().kind == ErrorKind::kPermission)  // the owner herself may not open it
      return MakeError(ErrorKind::kPermission, fmt::format("cannot read {} as {}: {}", path, job.user(), std::strerror(EACCES)));
    return MakeError(file.error().kind,
                     fmt::format("cannot read the log of job {} as {}: {}", text, job.user(), file.error().message));
  }
  if (file->null_device()) return nothing;  // -o /dev/null: the output was thrown away
  const std::uint64_t size = std::min<std::uint64_t>(file->size_bytes(), end.value_or(UINT64_MAX));
  const std::uint64_t from = start + req.offset;
  auto read = os::ReadAt(*file, from, std::min<std::uint64_t>(4u << 20, size > from ? size - from : 0));
  if (!read) return MakeError(ErrorKind::kIo, fmt::format("cannot read {}: {}", path, read.error().message));
  std::string data = std::move(read).value();
  // The output is bytes, and a 4 MiB part may end inside a character: {"b64": ...} unless UTF-8.
  return proto::LogsReply{BytesToJson(data), req.offset + data.size(), finished, BytesToJson(path)};
}

Result<QueueSelection> SelectForQueue(const Context& ctx, const proto::QueueRequest& req, bool streamed) {
  const std::map<std::int64_t, Job>& active = ctx.jobs.active();
  std::optional<std::uint32_t> uid;
  if (req.user) {
    auto known = UidOfUserOption(*req.user);
    if (!known) return known.error();
    uid = *known;
  }
  if (req.all) return SelectAll(ctx, req, uid, streamed);
  // One frame is built whole while everyone else waits: more jobs than it may hold are refused by
  // their count alone (a listing of them is streamed).
  QueueSelection selection;
  if (uid) {
    // One user's: from the index by uid, never a walk over everyone's jobs.
    const std::set<std::int64_t>& ids = ctx.jobs.IdsOfUid(*uid);
    if (!streamed && ids.size() > kMaxQueueLimit) return TooManyForOneReply(ids.size());
    selection.ids.assign(ids.begin(), ids.end());
  } else {
    if (!streamed && active.size() > kMaxQueueLimit) return TooManyForOneReply(active.size());
    selection.ids.reserve(active.size());
    for (const auto& entry : active) selection.ids.push_back(entry.first);
  }
  return selection;
}

Result<json> Queue(const Context& ctx, const proto::QueueRequest& req) {
  auto selection = SelectForQueue(ctx, req, false);
  if (!selection) return selection.error();
  // One frame is built whole while everyone else waits: larger listings are streamed.
  if (selection->ids.size() > kMaxQueueLimit) return TooManyForOneReply(selection->ids.size());
  std::vector<const Job*> selected;
  selected.reserve(selection->ids.size());
  for (std::int64_t id : selection->ids)
    if (const Job* job = selection->Find(id, ctx.jobs.active())) selected.push_back(job);
  if (req.format == "table") {
    const double now = ctx.clock.WallS();
    std::string table = QueueTableHeader();
    table.reserve(table.size() + selected.size() * 96);
    for (const Job* job : selected) AppendQueueRow(*job, ctx.views.GpuIndices(*job), now, table);
    return selection->WithLeftOut(
        ctx.views.WithStoreWarnings(Ok({{"table", std::move(table)}, {"count", selected.size()}})));
  }
  json jobs = json::array();
  for (const Job* job : selected) {
    json j = ctx.views.JobForClient(*job, false);
    store::HideFields(j, {ctx.views.VisibilityFor(ctx.peer, *job).commands, true});  // a listing has no environment
    jobs.push_back(std::move(j));
  }
  return selection->WithLeftOut(ctx.views.WithStoreWarnings(Ok({{"jobs", std::move(jobs)}})));
}

}  // namespace gpulane::daemon::ops
