// The daemon's event loop: the listening socket, client connections, supervisor status files
// (inotify), signals, and a tick (DaemonSettings::tick_s, one second) for liveness checks, request
// deadlines and idle connections. Connections are capped per uid and in all, and the request data
// they hold together is capped (DaemonSettings).
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>

#include <cerrno>
#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <fmt/format.h>

#include "daemon/daemon.h"
#include "lease/line_shares.h"
#include "store/job_id.h"

#include <signal.h>

#include <cstdlib>

namespace gpulane::daemon {
namespace {

// The user name of `uid`, looked up once per uid for the daemon's life (getpwuid_r reads
// /etc/passwd: once per connection, a flood of 1,100 connections held the loop for all of them).
const std::string& NameOf(std::uint32_t uid) {
  static std::map<std::uint32_t, std::string> names;
  if (auto it = names.find(uid); it != names.end()) return it->second;
  struct passwd pw;
  struct passwd* found = nullptr;
  char buf[4096];
  std::string name = getpwuid_r(uid, &pw, buf, sizeof buf, &found) == 0 && found ? found->pw_name : std::to_string(uid);
  if (names.size() > 4096) names.clear();
  return names.emplace(uid, std::move(name)).first->second;
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

// "12.0 MiB" (FormatBytes rounds MiB down: 12.9 would read as 12).
std::string Mib(std::size_t bytes) { return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1 << 20)); }

}  // namespace

void Daemon::RefuseConnection(int fd, const std::string& message) {
  std::string out;
  proto::AppendFrame(proto::ErrorResponse(ErrorKind::kUnavailable, message), out);
  ssize_t written = write(fd, out.data(), out.size());  // a fresh socket's buffer takes it; if not, the close says enough
  (void)written;
  char drain[4096];
  ssize_t drained = read(fd, drain, sizeof drain);  // unread data would turn the client's read of the reply into a reset
  (void)drained;
  close(fd);
}

void Daemon::NoteRefusal(const std::string& reason) {
  // A flood is logged in two lines a tick, not one per connection.
  if (++refused_[reason] == 1) Log("refused a connection: " + reason);
}

void Daemon::Accept() {
  // At most kAcceptPerTurn a turn: a flood is taken over several turns, others served between.
  for (std::size_t accepted = 0; accepted < kAcceptPerTurn; ++accepted) {
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0 && (errno == EMFILE || errno == ENFILE) && spare_fd_ >= 0) {
      // Out of descriptors: give up the spare one to take the connection off the queue and refuse
      // it; otherwise poll would wake the loop for it again and again.
      close(spare_fd_);
      fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd >= 0) RefuseConnection(fd, "the gpulane daemon is out of file descriptors: try again later");
      spare_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
      NoteRefusal("out of file descriptors");
      continue;
    }
    if (fd < 0) return;
    ucred cred{};
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
      close(fd);
      continue;
    }
    if (!AdmitConnection(fd, cred.uid)) continue;
    Peer peer;
    peer.uid = cred.uid;
    peer.gid = cred.gid;
    peer.pid = cred.pid;
    peer.user = NameOf(cred.uid);
    peer.admin = cred.uid == 0 || InGroup(peer.user, cred.gid, config_.admin_group);
    AddConnection(fd, peer);
  }
}

bool Daemon::AdmitConnection(int fd, std::uint32_t uid) {
  // The last connections under the cap are root's (an admin can always look at a flooded daemon).
  const std::size_t root_reserve = std::min(kRootReserve, settings_.max_connections / 8);
  const std::size_t cap = uid == 0 ? settings_.max_connections : settings_.max_connections - root_reserve;
  // Connections whose client has gone (closed at the end of this turn) do not count.
  auto open_ones = [this](std::optional<std::uint32_t> of) {
    return static_cast<std::size_t>(std::count_if(connections_.begin(), connections_.end(), [&](const auto& entry) {
      const Connection& c = entry.second;
      return !(c.close_after_write && c.out.empty() && !c.stream) && (!of || c.peer.uid == *of);
    }));
  };
  if (connections_.size() >= cap && open_ones(std::nullopt) >= cap) {
    RefuseConnection(fd, fmt::format("the gpulane daemon has {} connections, its limit: try again later (an admin can "
                                     "raise GPULANE_DAEMON_MAX_CONNECTIONS and LimitNOFILE)",
                                     connections_.size()));
    NoteRefusal(fmt::format("over the limit of {} connections", cap));
    return false;
  }
  std::size_t& of_uid = connections_of_uid_[uid];
  if (uid != 0 && of_uid >= settings_.max_connections_per_uid && open_ones(uid) >= settings_.max_connections_per_uid) {
    RefuseConnection(fd, fmt::format("uid {} already has {} connections to the gpulane daemon, the most one user may "
                                     "have: close some (other gpulane commands still running?) and try again",
                                     uid, of_uid));
    NoteRefusal(fmt::format("uid {} over its limit of {} connections", uid, settings_.max_connections_per_uid));
    return false;
  }
  return true;
}

void Daemon::AddConnection(int fd, const Peer& peer) {
  ++connections_of_uid_[peer.uid];
  Connection c;
  c.fd = fd;
  c.peer = peer;
  c.last_activity_s = clock_.MonotonicS();
  c.serial = next_serial_++;
  // A client sends its request right after connecting: read it now rather than a poll later.
  ReadFrom(connections_.emplace(fd, std::move(c)).first->second);
  EnforceBufferBudget();
}

void Daemon::ReadFrom(Connection& c) {
  // At most this much per call: one client sending without pause cannot keep the loop here (poll
  // brings it back for the rest).
  constexpr std::size_t kReadPerCallBytes = 1u << 20;
  char buf[65536];
  bool eof = false;
  const double now = clock_.MonotonicS();
  for (std::size_t total = 0; total < kReadPerCallBytes;) {
    ssize_t n = read(c.fd, buf, sizeof buf);
    if (n > 0) {
      // A refused connection (oversized, timed out, over the budget) is only drained until it closes.
      if (!c.close_after_write) c.reader.Feed(buf, static_cast<std::size_t>(n));
      c.last_activity_s = now;
      total += static_cast<std::size_t>(n);
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
  bool took = false;  // a request was taken: what is left is the next one's, started now
  // Behind a streamed reply, requests wait for its end (PumpStream); behind an array submission,
  // for its answer (StoreArrayParts). HandleRequest of an array's submission sets c.storing.
  while (!refused_before && !Paused(c)) {
    bool too_big = false;
    auto frame = c.reader.Next(&too_big);
    if (too_big) {
      Log(fmt::format("refused an oversized request from {} (pid {})", c.peer.user, c.peer.pid));
      Reply(c, proto::ErrorResponse(ErrorKind::kInvalidArgument,
                                    fmt::format("request larger than {} bytes", proto::kMaxRequestBytes)));
      c.close_after_write = true;
      c.reader.Clear();
      break;
    }
    if (!frame) break;
    took = true;
    // A large frame is parsed off the loop (ParseWorker); the requests behind it wait (Paused).
    if (frame->size() > kParseInLoopBytes && parse_worker_ && parse_worker_->available() &&
        parsing_bytes_ + frame->size() <= settings_.partial_budget_bytes / 2) {
      parsing_bytes_ += frame->size();
      c.parsing = true;
      parse_worker_->Parse(c.fd, c.serial, std::move(*frame));
      continue;
    }
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
  if (!c.reader.partial()) c.request_start_s = -1;
  else if (took || c.request_start_s < 0) c.request_start_s = now;
  CountBuffered(c);
}

void Daemon::TakeParsed() {
  auto log = [this](const std::string& line) { Log(line); };
  for (ParseWorker::Parsed& parsed : parse_worker_->Take()) {
    parsing_bytes_ -= std::min(parsing_bytes_, parsed.bytes);
    auto it = connections_.find(parsed.fd);
    if (it == connections_.end() || it->second.serial != parsed.serial) continue;  // closed meanwhile
    Connection& c = it->second;
    c.parsing = false;
    if (parsed.too_deep) {
      Reply(c, proto::ErrorResponse(ErrorKind::kInvalidArgument,
                                    fmt::format("malformed request: nested deeper than {} levels", proto::kMaxRequestDepth)));
    } else if (auto error = RunGuarded("handling a request", [&] { HandleParsedRequest(c, parsed.request); }, log)) {
      Reply(c, proto::ErrorResponse(ErrorKind::kInternal,
                                    fmt::format("the daemon failed on this request ({}); it goes on serving", *error)));
    }
    if (!Paused(c)) ReadFrom(c);  // the requests that came in behind it, in order
  }
}

void Daemon::ShareWithLeaseLine() {
  if (sampler_) {
    SamplerThread::LeaseUsage usage = sampler_->TakeLeaseUsage();
    jobs_->AddLeaseUsage(usage.ended, std::move(usage.live));
  }
  if (!line_dir_) return;
  sched::LineShares shares = jobs_->LineShares();
  const double now = clock_.MonotonicS();
  if (published_shares_ && now - published_mono_s_ < lease::kLineSharesRefreshS &&
      !lease::LineSharesDiffer(*published_shares_, shares))
    return;
  if (Status published = line_dir_->PublishLineShares(shares); !published.ok()) {
    // Not the directory's owner: never will be (logged once). Anything else (a full /run, a name
    // taken by something it could not clear): tried again next tick, logged when the reason
    // changes, and shown by `gpulane status` (WithStoreWarnings) until a publish succeeds.
    const std::string& why = published.error().message;
    if (why != std::exchange(share_error_, why)) Log(fmt::format("fair share: {}; `gpulane run` waits in submission order", why));
    if (published.error().kind == ErrorKind::kPermission) line_dir_.reset();
    return;
  }
  share_error_.clear();
  published_shares_ = std::move(shares);
  published_mono_s_ = now;
}

void Daemon::TakeTelemetry() {
  // Jobs idle past their warning and the grace (anomaly.idle_action = "cancel"): as `gpulane cancel`.
  // A lease's job id is the job's as people name it: "12", or "12_3" for an array's task (whose
  // own job id may be the array's: read as a number, "12_3" was job 12, task 0).
  for (const telemetry::IdleCancel& cancel : sampler_->TakeCancels()) {
    auto refs = store::ParseJobRefs(cancel.job_id);
    if (!refs || refs->size() != 1) continue;  // no job of this daemon ("r4121": `gpulane run`)
    const sched::JobRef& ref = refs->front();
    const std::optional<std::int64_t> id = ref.task ? jobs_->TaskJobId(ref) : std::optional<std::int64_t>(ref.id);
    if (id) jobs_->CancelIdle(*id, cancel.message);
  }
  for (SamplerThread::Answer& answer : sampler_->Take()) {
    auto it = connections_.find(answer.fd);
    if (it == connections_.end() || it->second.serial != answer.serial) continue;  // closed meanwhile
    Connection& c = it->second;
    c.asking = false;
    Reply(c, answer.reply);
    if (!Paused(c)) ReadFrom(c);  // the requests that came in behind it, in order
  }
}

void Daemon::CountBuffered(Connection& c) {
  buffered_bytes_ = buffered_bytes_ - c.buffered + c.reader.buffered();
  c.buffered = c.reader.buffered();
}

void Daemon::EnforceBufferBudget() {
  while (buffered_bytes_ > settings_.partial_budget_bytes) {
    auto largest = std::max_element(connections_.begin(), connections_.end(),
                                    [](const auto& a, const auto& b) { return a.second.buffered < b.second.buffered; });
    if (largest == connections_.end() || largest->second.buffered == 0) return;
    Connection& c = largest->second;
    Log(fmt::format("dropped a request of {} bytes from {} (pid {}): the connections hold {} bytes of unfinished "
                    "requests, over the daemon's budget of {}",
                    c.buffered, c.peer.user, c.peer.pid, buffered_bytes_, settings_.partial_budget_bytes));
    Reply(c, proto::ErrorResponse(
                 ErrorKind::kUnavailable,
                 fmt::format("the gpulane daemon is holding {} of unfinished requests, over its budget of {}, and this "
                             "connection's {} was the largest: send each request whole and at once, then try again",
                             Mib(buffered_bytes_), Mib(settings_.partial_budget_bytes), Mib(c.buffered))));
    c.reader.Clear();
    c.request_start_s = -1;
    c.close_after_write = true;
    CountBuffered(c);
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
    c.last_activity_s = clock_.MonotonicS();
  }
}

void Daemon::CloseConnection(int fd) {
  close(fd);
  if (auto it = connections_.find(fd); it != connections_.end()) {
    buffered_bytes_ -= it->second.buffered;
    if (auto of_uid = connections_of_uid_.find(it->second.peer.uid); of_uid != connections_of_uid_.end() && --of_uid->second == 0)
      connections_of_uid_.erase(of_uid);
    connections_.erase(it);
  }
  for (auto it = waiters_.begin(); it != waiters_.end();) it = it->fd == fd ? waiters_.erase(it) : it + 1;
}

void Daemon::ReadSignals() {
  signalfd_siginfo info{};
  while (read(signal_fd_, &info, sizeof info) == sizeof info) {
    if (info.ssi_signo == SIGTERM || info.ssi_signo == SIGINT) stop_ = true;
    if (info.ssi_signo == SIGCHLD) {
      int status = 0;
      for (pid_t pid; (pid = waitpid(-1, &status, WNOHANG)) > 0;)
        if (web_) web_->Reaped(pid, status, clock_.MonotonicS());
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
  // While the jobs load, FinishRecover reads every handed-over job's status once all are in.
  if (!jobs_->loading())
    for (std::int64_t id : changed) jobs_->ImportStatus(id);
  schedule_needed_ = true;
}

// Liveness of supervisors, clients' deadlines and idle connections.
void Daemon::Tick() {
  if (web_) web_->Tick(clock_.MonotonicS());
  if (!jobs_->loading()) jobs_->CheckSupervisors();
  if (limit_watch_) limit_watch_->Check(limit_dir_->Read().leases, clock_.WallS());
  UpdateStoreMarker();
  schedule_needed_ = true;
  CheckConnections(clock_.MonotonicS());
  for (const auto& [reason, count] : refused_)
    if (count > 1) Log(fmt::format("refused {} more connection(s): {}", count - 1, reason));
  refused_.clear();
}

void Daemon::CheckConnections(double now) {
  std::set<int> busy;  // a request under way: a wait, or a submission before its commit
  for (const auto& w : waiters_) busy.insert(w.fd);
  for (const auto& s : submits_) busy.insert(s.from.fd);
  std::vector<int> stalled;
  for (auto& [fd, c] : connections_) {
    // A client that takes none of its reply for the idle time-out is dropped with it.
    if ((c.stream || !c.out.empty()) && now - c.last_activity_s > settings_.idle_timeout_s) {
      stalled.push_back(fd);
      continue;
    }
    if (c.close_after_write || Paused(c)) continue;
    if (c.request_start_s >= 0 && now - c.request_start_s > settings_.read_timeout_s) {
      Reply(c, proto::ErrorResponse(ErrorKind::kTimeout,
                                    fmt::format("request not complete within the read time-out ({:g} s from its first byte)",
                                                settings_.read_timeout_s)));
      c.close_after_write = true;
      c.reader.Clear();
      CountBuffered(c);
    } else if (c.request_start_s < 0 && c.out.empty() && !busy.count(fd) &&
               now - c.last_activity_s > settings_.idle_timeout_s) {
      c.close_after_write = true;  // idle: closed without a word (a client reconnects when it needs to)
    }
  }
  for (int fd : stalled) {
    Log(fmt::format("closed a connection of {} that took none of its reply for {:g} s", connections_.at(fd).peer.user,
                    settings_.idle_timeout_s));
    CloseConnection(fd);
  }
}

void Daemon::WriteAndClose() {
  std::vector<int> to_close;
  for (auto& [fd, c] : connections_) {
    // A streamed listing goes on while its client takes it as fast as it is made, for a few
    // milliseconds a turn: one part a turn made `queue` take 1.2-3.1 s during a submission flood,
    // whose turns are each as long as a commit (issue 23, item 8).
    const double stream_start_s = c.stream ? clock_.MonotonicS() : 0;
    do {
      if (c.stream) PumpStream(c);
      WriteTo(c);
    } while (c.stream && c.out.empty() && clock_.MonotonicS() - stream_start_s < kStreamTurnBudgetS);
    if (c.close_after_write && c.out.empty() && !Paused(c)) to_close.push_back(fd);
  }
  for (int fd : to_close) CloseConnection(fd);
}

void Daemon::Loop() {
  last_tick_s_ = clock_.MonotonicS();
  while (!stop_) Step(std::numeric_limits<double>::infinity());
}

void Daemon::Step(double max_wait_s) {
  auto log = [this](const std::string& line) { Log(line); };
  // Each step of a turn is guarded on its own; this catches what happens between them.
  RunGuarded("a turn of the loop", [&] { LoopTurn(max_wait_s); }, log);
}

// One turn: wait for something to happen (250 ms at most, a tick if that is shorter; with no
// connection, until the next tick; never past max_wait_s), then each step in turn. A step that throws (it should not:
// errors are values) is logged and the next one runs; the daemon goes on serving.
void Daemon::LoopTurn(double max_wait_s) {
  auto log = [this](const std::string& line) { Log(line); };
  const int parsed_fd = parse_worker_ && parse_worker_->available() ? parse_worker_->event_fd() : -1;
  const int sampler_fd = sampler_ ? sampler_->event_fd() : -1;
  std::vector<pollfd> fds = {{listen_fd_, POLLIN, 0}, {signal_fd_, POLLIN, 0}, {watch_fd_, POLLIN, 0},
                             {parsed_fd, POLLIN, 0},  {sampler_fd, POLLIN, 0}};
  constexpr std::size_t kFirstConnection = 5;
  // A streamed reply: woken when the client can take more, and reading waits until it is sent;
  // behind an array being stored or a frame being parsed, reading waits for its answer.
  for (auto& [fd, c] : connections_) {
    const short out = c.out.empty() ? 0 : POLLOUT;
    fds.push_back({fd, static_cast<short>(c.stream ? POLLOUT : Paused(c) ? out : POLLIN | out), 0});
  }
  // Arrays being stored, cancels in parts, retention's slices and connections to resume do not
  // wait: poll only looks.
  const bool more_now = jobs_->storing_arrays() || !resume_.empty() || !cancels_.empty() || retention_.more ||
                        (jobs_->loading() && clock_.MonotonicS() >= load_retry_at_s_);
  // With no connection (whose timeouts a turn checks) and nothing loading, nothing is due between
  // events but the tick: wait for it, so an idle daemon wakes once a tick, not four times
  // (bench/results/sampler-floor-2026-12-06.md).
  const bool idle = connections_.empty() && !jobs_->loading();
  const double wait_s = std::min(max_wait_s, idle ? std::max(0.0, last_tick_s_ + settings_.tick_s - clock_.MonotonicS())
                                                  : std::min(0.25, settings_.tick_s));
  poll(fds.data(), fds.size(), more_now ? 0 : static_cast<int>(std::ceil(wait_s * 1000)));
  const double turn_start_s = clock_.MonotonicS();
  // Loading the jobs at the start: a part a turn, before this turn's requests (each answered,
  // those about jobs with "still loading" until the last part is in).
  if (jobs_->loading()) RunGuarded("loading jobs", [&] { LoadJobs(kLoadTurnBudgetS); }, log);
  if (fds[1].revents & POLLIN) RunGuarded("reading signals", [&] { ReadSignals(); }, log);
  if (fds[2].revents & POLLIN) RunGuarded("reading supervisors' status", [&] { ReadStatusEvents(); }, log);
  for (std::size_t i = kFirstConnection; i < fds.size(); ++i) {
    auto it = connections_.find(fds[i].fd);
    if (it == connections_.end()) continue;
    if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) RunGuarded("reading a request", [&] { ReadFrom(it->second); }, log);
  }
  if (fds[3].revents & POLLIN) RunGuarded("handling parsed requests", [&] { TakeParsed(); }, log);
  if (fds[4].revents & POLLIN) RunGuarded("answering telemetry requests", [&] { TakeTelemetry(); }, log);
  // After the reads: connections that clients closed meanwhile no longer count against the caps.
  if (fds[0].revents & POLLIN) RunGuarded("accepting connections", [&] { Accept(); }, log);
  RunGuarded("keeping to the request memory budget", [&] { EnforceBufferBudget(); }, log);
  // A few milliseconds of array parts a turn (JobTable::StoreArrayPart): requests read this turn were
  // handled already, the ones of the next turn come next.
  if (RunGuarded("storing arrays", [&] { StoreArrayParts(kArrayTurnBudgetS); }, log)) FailArrays();
  // Likewise a large cancel's parts (cancel_slices.cc).
  if (RunGuarded("cancelling in parts", [&] { CancelSlices(kCancelTurnBudgetS); }, log)) FailCancels();
  RunGuarded("resuming connections", [&] { ResumeConnections(); }, log);
  if (RunGuarded("storing submissions", [&] { CommitSubmissions(); }, log)) FailSubmissions();
  const double now = clock_.MonotonicS();
  bool ticked = false;
  if (now - last_tick_s_ >= settings_.tick_s) {
    last_tick_s_ = now;
    ticked = true;
    RunGuarded("checking supervisors", [&] { Tick(); }, log);
    if (!jobs_->loading()) RunGuarded("sharing with the lease line", [&] { ShareWithLeaseLine(); }, log);
  }
  const bool table_changed = jobs_->TakeScheduleNeeded();
  if (!jobs_->loading() && (std::exchange(schedule_needed_, false) || table_changed))
    RunGuarded("launching jobs", [&] { jobs_->LaunchEligible(); }, log);
  RunGuarded("storing job updates", [&] { jobs_->FlushDirty(); }, log);
  // retention.cc: one slice; not while loading (the jobs that unfinished ones wait for are spared)
  if (!jobs_->loading()) RunGuarded("removing old finished jobs", [&] { PruneFinished(); }, log);
  RunGuarded("answering waiters", [&] { AnswerWaiters(); }, log);
  RunGuarded("writing replies", [&] { WriteAndClose(); }, log);
  // How long this turn held the loop, past poll (`ping` with loop_stats tells), apart for the
  // turns with the tick (which walks every unfinished job, and launches).
  ++loop_turns_;
  double& worst = ticked ? loop_worst_tick_turn_s_ : loop_worst_turn_s_;
  worst = std::max(worst, clock_.MonotonicS() - turn_start_s);
}

// The submissions of a turn whose commit threw: their clients get an error and the next turn
// starts afresh. (The job table returns the outcomes only once it is done, so none of them was
// answered; it returns errors as values, so only something like std::bad_alloc gets here.)
void Daemon::FailSubmissions() {
  for (const auto& s : submits_) {
    auto it = connections_.find(s.from.fd);
    if (it != connections_.end() && it->second.serial == s.from.serial)
      Reply(it->second, proto::ErrorResponse(ErrorKind::kInternal, "the daemon could not store the submission: see its log"));
    if (s.array) ResumeAfterArray(s.from.fd, s.from.serial);
  }
  submits_.clear();
  unfinished_of_uid_.reset();
}

// The arrays being stored when storing one threw (std::bad_alloc, say): the first one's client
// gets an error and what was stored of it is removed (at the latest at the next start); the
// others go on.
void Daemon::FailArrays() {
  AnswerSubmissions(jobs_->AbandonArray(Error{ErrorKind::kInternal, "the daemon could not store the array: see its log"}));
}

}  // namespace gpulane::daemon
