#include "daemon/job_notify.h"

#include <unistd.h>

#include <algorithm>

#include <fmt/format.h>

#include "daemon/paths.h"
#include "exec/notify.h"
#include "os/user_file.h"
#include "proto/call.h"
#include "util/say.h"

namespace gpulane::daemon {
namespace {

exec::NotifyEvent EventOf(const NotifiedJob& job, const std::string& event, const std::string& state, const std::string& message) {
  exec::NotifyEvent e;
  e.event = event;
  e.job_id = job.id;
  e.name = job.name;
  e.user = job.user;
  e.state = state;
  e.message = message;
  // Read with the job's user's rights, never root's: the job may have swapped its log for anything.
  const std::optional<os::FileUser> as = job.uid && job.gid ? os::ActingFor(*job.uid, *job.gid) : std::nullopt;
  e.log_tail = exec::LogTail(job.log_path, as, job.uid ? std::optional<std::uint32_t>(*job.uid) : std::nullopt);
  return e;
}

void Send(os::Spawner& spawner, const NotifiedJob& job, const exec::NotifyEvent& e) {
  if (Status sent = exec::SendDetached(spawner, job.target, e, job.uid, job.gid, job.env); !sent.ok())
    Say("gpulane: notification of job {}: {}\n", job.id, sent.error().message);
}

bool Failed(const exec::JobOutcome& ran, bool stopped_by_gpulane) {
  return ran.timed_out || (ran.exit_code != 0 && !stopped_by_gpulane);
}

std::string StateOf(const exec::JobOutcome& ran, bool stopped_by_gpulane) {
  if (ran.timed_out) return "timeout";
  if (Failed(ran, stopped_by_gpulane)) return "failed";
  return ran.exit_code != 0 ? "cancelled" : "completed";
}

}  // namespace

std::string EndMessage(const NotifiedJob& job, const exec::JobOutcome& ran, bool stopped_by_gpulane, const std::string& reason) {
  std::string message = fmt::format("gpulane: job {}{} of {} {}", job.id, job.name.empty() ? "" : " (" + job.name + ")", job.user,
                                    StateOf(ran, stopped_by_gpulane));
  if (!ran.timed_out) message += fmt::format(" with exit code {}", ran.exit_code);
  if (!reason.empty()) message += ": " + reason;
  return message;
}

void NotifyJobEnd(os::Spawner& spawner, const NotifiedJob& job, const exec::JobOutcome& ran, bool stopped_by_gpulane, const std::string& reason) {
  const std::string event = Failed(ran, stopped_by_gpulane) ? "fail" : "end";
  if (!Wants(job.target, event)) return;
  exec::NotifyEvent e = EventOf(job, event, StateOf(ran, stopped_by_gpulane), EndMessage(job, ran, stopped_by_gpulane, reason));
  e.exit_code = ran.exit_code;
  Send(spawner, job, e);
}

void AnomalyNotifier::Poll() {
  for (const auto& socket : SnapshotSockets()) {
    auto reply = proto::CallExisting(socket, {{"op", "events"}, {"after_id", last_id_}, {"since_s", since_s_}}, 2.0);
    if (!reply) continue;
    if (!reply->contains("events") || !(*reply)["events"].is_array()) return;
    for (const auto& e : (*reply)["events"]) {
      last_id_ = std::max(last_id_, e.value("id", std::int64_t{0}));
      if (e.value("job_id", "") != job_.id || sent_ >= kMaxAnomalyNotifications) continue;
      ++sent_;
      Send(spawner_, job_, EventOf(job_, "anomaly", "running", "gpulane: " + e.value("message", "")));
    }
    return;
  }
}

}  // namespace gpulane::daemon
