// The daemon's side of its requests: the one dispatch (a request read into its type by
// proto::ParseRequest, handed to its handler with std::visit), and what belongs to connections
// and the loop: the round of submissions (stored by the job table, answered in
// submit_replies.cc), streamed listings, parked waits, the sampler's questions. The handlers
// themselves are free functions in daemon/ops/. Identity is the connection's peer (SO_PEERCRED),
// never a field of the request; users act on their own jobs, root and daemon.admin_group on all.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <set>
#include <type_traits>
#include <variant>

#include <fmt/format.h>

#include "daemon/daemon.h"
#include "daemon/ops/ops.h"
#include "daemon/ops/resolve.h"
#include "daemon/outcome.h"
#include "daemon/queue_stream.h"
#include "gpu/snapshot_json.h"
#include "os/process_table.h"
#include "os/user_groups.h"
#include "proto/replies.h"
#include "proto/requests.h"
#include "render/queue_json.h"
#include "render/queue_table.h"
#include "render/share_table.h"
#include "sched/user_limits.h"
#include "store/job_id.h"
#include "store/job_view.h"

namespace gpulane::daemon {
namespace {

using nlohmann::json;
using ops::Ok;
using store::Job;
using store::JobState;

json Err(ErrorKind kind, const std::string& message) { return proto::ErrorResponse(kind, message); }

}  // namespace

const Job* QueueSelection::Find(std::int64_t id, const std::map<std::int64_t, Job>& active) const {
  if (auto it = active.find(id); it != active.end()) return &it->second;
  if (auto it = stored.find(id); it != stored.end()) return &it->second;
  return nullptr;
}

void Daemon::HandleRequest(Connection& c, const std::string& payload) {
  HandleParsedRequest(c, json::parse(payload, nullptr, false));
}

// The one dispatch: the request read into its type (proto::ParseRequest: one error for anything
// malformed), then handed to its handler with std::visit.
void Daemon::HandleParsedRequest(Connection& c, const json& req) {
  auto parsed = proto::ParseRequest(req);
  // Replies go out in the order of the requests: a submission of this connection still waiting
  // for its group commit is committed (and answered) before anything else is answered.
  const bool submit = parsed && std::holds_alternative<proto::SubmitRequest>(*parsed);
  if (!submit && std::any_of(submits_.begin(), submits_.end(), [&](const Submission& s) { return s.from.fd == c.fd; }))
    CommitSubmissions();
  if (!parsed) return Reply(c, Err(parsed.error().kind, parsed.error().message));
  // While the jobs load at the start, only ping is answered (with how far it is): the other
  // requests would see or decide on an incomplete table.
  if (jobs_->loading() && !std::holds_alternative<proto::PingRequest>(*parsed))
    return Reply(c, Err(ErrorKind::kUnavailable, LoadingLine()));
  std::visit(
      [&](const auto& r) {
        using R = std::decay_t<decltype(r)>;
        if constexpr (std::is_constructible_v<proto::SamplerRequest, R>)
          AskSampler(c, r);  // answered on the sampler's thread
        else
          Handle(c, r);
      },
      *parsed);
}

ops::Context Daemon::ContextFor(const Peer& peer) { return {peer, *store_, *jobs_, config_, clock_, env_.processes, *this}; }

void Daemon::Handle(Connection& c, const proto::PingRequest& req) {
  proto::PingReply pong{getpid(), paths_.system ? "system" : "user", gpu_count_, paths_.socket, WebInfo(web_.get())};
  // Just started on a large store: how far the loading of its jobs is.
  if (const auto& loading = jobs_->loading()) pong.loading = proto::PingReply::Loading{loading->loaded, loading->total};
  // The loop's turns since the last such ping, and the longest (bench/daemon_latency.py).
  if (req.loop_stats) {
    pong.loop_turns = loop_turns_;
    pong.loop_worst_turn_ms = loop_worst_turn_s_ * 1e3;
    pong.loop_worst_tick_turn_ms = loop_worst_tick_turn_s_ * 1e3;
    loop_turns_ = 0;
    loop_worst_turn_s_ = loop_worst_tick_turn_s_ = 0;
  }
  Reply(c, proto::ReplyToJson(pong));
}

void Daemon::Handle(Connection& c, const proto::SnapshotRequest& req) { Reply(c, HandleSnapshot(req)); }

void Daemon::Handle(Connection& c, const proto::SubmitRequest& req) {
  auto sub = ops::CheckSubmission(ContextFor(c.peer), *this, gpu_identity_, req);
  if (!sub) return Reply(c, Err(sub.error().kind, sub.error().message));
  // An array is answered once all its parts are stored: the requests behind it wait (ReadFrom).
  if (sub->array) c.storing = true;
  sub->from = {c.fd, c.serial};
  submits_.push_back(std::move(sub).value());
}

void Daemon::Handle(Connection& c, const proto::QueueRequest& req) {
  if (req.stream) return StartQueueStream(c, req);
  auto reply = ops::Queue(ContextFor(c.peer), req);
  Reply(c, reply ? *reply : Err(reply.error().kind, reply.error().message));
}

void Daemon::Handle(Connection& c, const proto::ShowRequest& req) { Reply(c, ops::Show(ContextFor(c.peer), req)); }

// Every user's share, decayed use and fair-share factor (`gpulane share`): not secret, as `queue`
// shows every user's jobs.
void Daemon::Handle(Connection& c, const proto::ShareRequest&) {
  Reply(c, WithStoreWarnings(Ok({{"users", ShareRowsToJson(jobs_->ShareTable())}, {"half_life_s", jobs_->half_life_s()}})));
}

void Daemon::Handle(Connection& c, const proto::LogsRequest& req) {
  auto reply = ops::Logs(ContextFor(c.peer), req);
  Reply(c, reply ? proto::ReplyToJson(*reply) : Err(reply.error().kind, reply.error().message));
}

void Daemon::Handle(Connection& c, const proto::WaitRequest& req) {
  ops::WaitPlan plan = ops::Wait(ContextFor(c.peer), req);
  if (plan.answer) return Reply(c, *plan.answer);
  waiters_.push_back({c.fd, std::move(plan.ids), std::move(plan.failed)});
}

void Daemon::AnswerWaiters() {
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    bool done = std::all_of(it->ids.begin(), it->ids.end(), [&](std::int64_t id) { return !jobs_->active().count(id); });
    if (!done) {
      ++it;
      continue;
    }
    if (auto conn = connections_.find(it->fd); conn != connections_.end())
      Reply(conn->second, ops::WaitAnswer(ContextFor(conn->second.peer), it->ids, it->failed));
    it = waiters_.erase(it);
  }
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
    for (const auto& [id, job] : jobs_->active()) ++(*unfinished_of_uid_)[job.uid()];
    jobs_->CountStoringTasks(*unfinished_of_uid_);
  }
  return (*unfinished_of_uid_)[uid];
}

void Daemon::AskSampler(Connection& c, const proto::SamplerRequest& req) {
  if (!sampler_) {
    Reply(c, Err(ErrorKind::kUnavailable,
                 "telemetry is off on this daemon (telemetry.enabled = false in /etc/gpulane/config.toml, or NVML could not be "
                 "opened for it: see the daemon's log)"));
    return;
  }
  json extra;
  if (std::holds_alternative<proto::MetricsRequest>(req)) extra["jobs_by_state"] = jobs_->CountByState();
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

std::optional<unsigned> Daemon::GpuIndex(const std::string& uuid) const {
  auto it = gpu_index_.find(uuid);
  if (it == gpu_index_.end()) return std::nullopt;
  return it->second;
}

bool Daemon::ShowsCommandsTo(const Peer& peer) const {
  if (config_.daemon_show_commands) return true;
  // The daemon's own gpulane-web (its child: the pid cannot be another process's while it is not
  // reaped) with web.show_commands: the admin chose to show command lines over HTTP.
  return config_.web_show_commands && web_ && web_->pid() > 0 && peer.pid == web_->pid();
}

store::JobVisibility Daemon::VisibilityFor(const Peer& peer, const Job& job) const {
  if (ops::CanAct(peer, job)) return store::kSeesAll;
  return {ShowsCommandsTo(peer), false};
}

json Daemon::HandleSnapshot(const proto::SnapshotRequest& req) {
  auto snapshot = MarkedSnapshot(ReadOptions{req.sensors, req.utilization, req.topology});
  if (!snapshot) return Err(snapshot.error().kind, snapshot.error().message);
  return WithStoreWarnings(Ok({{"snapshot", SnapshotToJson(*snapshot)}}));
}

void Daemon::StartQueueStream(Connection& c, const proto::QueueRequest& req) {
  auto selection = ops::SelectForQueue(ContextFor(c.peer), req, true);
  if (!selection) return Reply(c, Err(selection.error().kind, selection.error().message));
  auto stream = std::make_shared<QueueStream>();
  stream->json = *req.stream == "json";
  stream->jobs = std::move(selection).value();
  stream->now = clock_.WallS();
  Reply(c, stream->jobs.WithLeftOut(WithStoreWarnings(Ok({{"stream", *req.stream}, {"count", stream->jobs.ids.size()}}))));
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
      AppendQueueJobJson(*job, ops::JobViews::GpuIndices(*job), text, VisibilityFor(c.peer, *job).commands);
    } else {
      AppendQueueRow(*job, ops::JobViews::GpuIndices(*job), s.now, text);
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

void Daemon::Handle(Connection& c, const proto::CancelRequest& req) {
  StartChosen(c, ops::Cancel(ContextFor(c.peer), req), PartsOp::kCancel);
}

void Daemon::Handle(Connection& c, const proto::HoldRequest& req) {
  StartChosen(c, ops::Hold(ContextFor(c.peer), req.ids, true), PartsOp::kHold);
}

void Daemon::Handle(Connection& c, const proto::ReleaseRequest& req) {
  StartChosen(c, ops::Hold(ContextFor(c.peer), req.ids, false), PartsOp::kRelease);
}

// The jobs are changed in parts, one transaction each (cancel_slices.cc, hold_slices.cc): a few
// thousand now, the rest on the next turns, other clients served in between; this client is
// answered once the last part is stored.
void Daemon::StartChosen(Connection& c, Result<ops::Chosen> chosen, PartsOp op) {
  if (!chosen) return Reply(c, Err(chosen.error().kind, chosen.error().message));
  jobs_->BeginParts(op, chosen->ids);  // its pending jobs are not launched before their parts
  StartInParts(c, JobsInParts{c.fd, c.serial, c.peer.user, std::move(chosen->ids), 0, std::move(chosen->out), op});
}

}  // namespace gpulane::daemon
