// The daemon's event loop: the listening socket, client connections, supervisor status files
// (inotify), signals, and a tick (DaemonSettings::tick_s, one second) for liveness checks and read
// time-outs.
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <utility>
#include <fmt/format.h>

#include "daemon/daemon.h"

namespace gpulane::daemon {
namespace {

std::string NameOf(std::uint32_t uid) {
  struct passwd pw;
  struct passwd* found = nullptr;
  char buf[4096];
  if (getpwuid_r(uid, &pw, buf, sizeof buf, &found) == 0 && found) return found->pw_name;
  return std::to_string(uid);
}

bool InGroup(const std::string& user, std::uint32_t gid, const std::string& group) {
  if (group.empty()) return false;
  struct group* g = getgrnam(group.c_str());
  if (!g) return false;
  gid_t groups[256];
  int n = 256;
  if (getgrouplist(user.c_str(), gid, groups, &n) < 0) return false;
  for (int i = 0; i < n; ++i)
    if (groups[i] == g->gr_gid) return true;
  return false;
}

}  // namespace

void Daemon::Accept() {
  while (true) {
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    ucred cred{};
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
      close(fd);
      continue;
    }
    Connection c;
    c.fd = fd;
    c.peer.uid = cred.uid;
    c.peer.gid = cred.gid;
    c.peer.pid = cred.pid;
    c.peer.user = NameOf(cred.uid);
    c.peer.admin = cred.uid == 0 || InGroup(c.peer.user, cred.gid, config_.admin_group);
    c.last_read_s = clock_.MonotonicS();
    // A client sends its request right after connecting: read it now rather than a poll later.
    ReadFrom(connections_.emplace(fd, std::move(c)).first->second);
  }
}

void Daemon::ReadFrom(Connection& c) {
  char buf[65536];
  bool eof = false;
  while (true) {
    ssize_t n = read(c.fd, buf, sizeof buf);
    if (n > 0) {
      c.reader.Feed(buf, static_cast<std::size_t>(n));
      c.last_read_s = clock_.MonotonicS();
      if (static_cast<std::size_t>(n) < sizeof buf) break;  // all there was: poll says when more comes
      continue;
    }
    eof = n == 0;
    break;
  }
  // The client has sent all it will send: complete requests read before the end are still answered
  // (a half-closed socket can take the reply), a truncated one is simply dropped.
  const bool refused_before = c.close_after_write;  // oversized or timed out: read no more requests
  if (eof) c.close_after_write = true;
  while (!refused_before && !c.stream) {  // behind a streamed reply, requests wait for its end (PumpStream)
    bool too_big = false;
    auto frame = c.reader.Next(&too_big);
    if (too_big) {
      Log(fmt::format("refused an oversized request from {} (pid {})", c.peer.user, c.peer.pid));
      Reply(c, proto::ErrorResponse(ErrorKind::kInvalidArgument,
                                    fmt::format("request larger than {} bytes", proto::kMaxRequestBytes)));
      c.close_after_write = true;
      break;
    }
    if (!frame) break;
    if (proto::NestingDepth(*frame) > proto::kMaxRequestDepth) {  // would overflow the stack of code that walks it
      Reply(c, proto::ErrorResponse(ErrorKind::kInvalidArgument,
                                    fmt::format("malformed request: nested deeper than {} levels", proto::kMaxRequestDepth)));
      continue;
    }
    auto log = [this](const std::string& line) { Log(line); };
    if (auto error = RunGuarded("handling a request", [&] { HandleRequest(c, *frame); }, log))
      Reply(c, proto::ErrorResponse(ErrorKind::kInternal,
                                    fmt::format("the daemon failed on this request ({}); it goes on serving", *error)));
  }
}

void Daemon::Reply(Connection& c, const nlohmann::json& response) { proto::AppendFrame(response, c.out); }

void Daemon::WriteTo(Connection& c) {
  while (!c.out.empty()) {
    ssize_t n = write(c.fd, c.out.data(), c.out.size());
    if (n <= 0) {
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
      c.out.clear();
      c.stream.reset();
      c.close_after_write = true;
      return;
    }
    c.out.erase(0, static_cast<std::size_t>(n));
  }
}

void Daemon::CloseConnection(int fd) {
  close(fd);
  connections_.erase(fd);
  for (auto it = waiters_.begin(); it != waiters_.end();) it = it->fd == fd ? waiters_.erase(it) : it + 1;
}

void Daemon::ReadSignals() {
  signalfd_siginfo info{};
  while (read(signal_fd_, &info, sizeof info) == sizeof info) {
    if (info.ssi_signo == SIGTERM || info.ssi_signo == SIGINT) stop_ = true;
    if (info.ssi_signo == SIGCHLD)
      while (waitpid(-1, nullptr, WNOHANG) > 0) {
      }
  }
}

void Daemon::ReadStatusEvents() {
  alignas(inotify_event) char buf[65536];
  std::set<std::int64_t> changed;
  ssize_t n;
  while ((n = read(watch_fd_, buf, sizeof buf)) > 0) {
    for (char* p = buf; p < buf + n;) {
      auto* e = reinterpret_cast<inotify_event*>(p);
      if (e->len)
        if (auto id = JobIdOfFile(e->name)) changed.insert(*id);
      p += sizeof(inotify_event) + e->len;
    }
  }
  for (std::int64_t id : changed) jobs_->ImportStatus(id);
  schedule_needed_ = true;
}

// Liveness of supervisors and clients' read time-outs.
void Daemon::Tick() {
  jobs_->CheckSupervisors();
  schedule_needed_ = true;
  const double now = clock_.MonotonicS();
  for (auto& [fd, c] : connections_) {
    if (c.reader.partial() && now - c.last_read_s > settings_.read_timeout_s && !c.close_after_write && !c.stream) {
      Reply(c, proto::ErrorResponse(ErrorKind::kTimeout, "request not complete within the read time-out"));
      c.close_after_write = true;
    }
  }
}

void Daemon::WriteAndClose() {
  std::vector<int> to_close;
  for (auto& [fd, c] : connections_) {
    if (c.stream) PumpStream(c);
    WriteTo(c);
    if (c.close_after_write && c.out.empty() && !c.stream) to_close.push_back(fd);
  }
  for (int fd : to_close) CloseConnection(fd);
}

void Daemon::Loop() {
  double last_tick_s = clock_.MonotonicS();
  auto log = [this](const std::string& line) { Log(line); };
  // Each step of a turn is guarded on its own; this catches what happens between them.
  while (!stop_) RunGuarded("a turn of the loop", [&] { LoopTurn(last_tick_s); }, log);
}

// One turn: wait for something to happen (250 ms at most, a tick if that is shorter), then each
// step in turn. A step that throws (it should not: errors are values) is logged and the next one
// runs; the daemon goes on serving.
void Daemon::LoopTurn(double& last_tick_s) {
  auto log = [this](const std::string& line) { Log(line); };
  std::vector<pollfd> fds = {{listen_fd_, POLLIN, 0}, {signal_fd_, POLLIN, 0}, {watch_fd_, POLLIN, 0}};
  // A streamed reply: woken when the client can take more, and reading waits until it is sent.
  for (auto& [fd, c] : connections_)
    fds.push_back({fd, static_cast<short>(c.stream ? POLLOUT : POLLIN | (c.out.empty() ? 0 : POLLOUT)), 0});
  poll(fds.data(), fds.size(), static_cast<int>(std::min(250.0, settings_.tick_s * 1000)));
  if (fds[1].revents & POLLIN) RunGuarded("reading signals", [&] { ReadSignals(); }, log);
  if (fds[2].revents & POLLIN) RunGuarded("reading supervisors' status", [&] { ReadStatusEvents(); }, log);
  if (fds[0].revents & POLLIN) RunGuarded("accepting connections", [&] { Accept(); }, log);
  for (std::size_t i = 3; i < fds.size(); ++i) {
    auto it = connections_.find(fds[i].fd);
    if (it == connections_.end()) continue;
    if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) RunGuarded("reading a request", [&] { ReadFrom(it->second); }, log);
  }
  if (RunGuarded("storing submissions", [&] { CommitSubmissions(); }, log)) FailSubmissions();
  const double now = clock_.MonotonicS();
  if (now - last_tick_s >= settings_.tick_s) {
    last_tick_s = now;
    RunGuarded("checking supervisors", [&] { Tick(); }, log);
  }
  const bool table_changed = jobs_->TakeScheduleNeeded();
  if (std::exchange(schedule_needed_, false) || table_changed)
    RunGuarded("launching jobs", [&] { jobs_->LaunchEligible(); }, log);
  RunGuarded("storing job updates", [&] { jobs_->FlushDirty(); }, log);
  RunGuarded("answering waiters", [&] { AnswerWaiters(); }, log);
  RunGuarded("writing replies", [&] { WriteAndClose(); }, log);
}

// The submissions of a turn whose commit threw: their clients get an error and the next turn
// starts afresh. (A submission the commit had already answered before it threw gets this error as
// a second reply; commits return errors as values, so only something like std::bad_alloc gets here.)
void Daemon::FailSubmissions() {
  for (const auto& s : submits_) {
    auto it = connections_.find(s.fd);
    if (it != connections_.end())
      Reply(it->second, proto::ErrorResponse(ErrorKind::kInternal, "the daemon could not store the submission: see its log"));
  }
  submits_.clear();
}

}  // namespace gpulane::daemon
