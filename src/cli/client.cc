#include "cli/client.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <thread>
#include <vector>

#include "cli/common.h"
#include "daemon/paths.h"
#include "gpu/nvml_backend.h"
#include "proto/call.h"
#include "proto/wire.h"
#include "store/job_counts.h"
#include "util/config.h"
#include "util/timing.h"
#include "util/units.h"

namespace gpulane::cli {
namespace {

using Clock = std::chrono::steady_clock;

using proto::ConnectTo;
using proto::ExchangeEncoded;

// Starts `gpulane daemon --user` detached from this process and its terminal; its pid, or -1.
pid_t StartUserDaemon(const daemon::DaemonPaths& paths) {
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return -1;
  exe[n] = '\0';
  std::string state = paths.state_dir;
  int told[2];
  if (pipe2(told, O_CLOEXEC) != 0) return -1;
  pid_t child = fork();
  if (child == 0) {
    setsid();
    if (const pid_t daemon = fork(); daemon != 0) {
      (void)!write(told[1], &daemon, sizeof daemon);
      _exit(0);
    }
    std::string mkdir_state = state;
    for (std::size_t i = 1; i <= mkdir_state.size(); ++i)
      if (i == mkdir_state.size() || mkdir_state[i] == '/') mkdir(mkdir_state.substr(0, i).c_str(), 0700);
    int null_fd = open("/dev/null", O_RDWR);
    int log_fd = open((state + "/daemon.log").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW, 0600);
    dup2(null_fd, 0);
    dup2(log_fd >= 0 ? log_fd : null_fd, 1);
    dup2(log_fd >= 0 ? log_fd : null_fd, 2);
    execl(exe, "gpulane", "daemon", "--user", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(told[1]);
  pid_t daemon = -1;
  if (child > 0) {
    waitpid(child, nullptr, 0);
    if (read(told[0], &daemon, sizeof daemon) != static_cast<ssize_t>(sizeof daemon)) daemon = -1;
  }
  close(told[0]);
  return daemon;
}

// Whether process `pid` has ended (gone, or a zombie nobody reaped yet).
bool Ended(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return true;
  char stat[512];
  const ssize_t n = read(fd, stat, sizeof stat - 1);
  close(fd);
  if (n <= 0) return true;
  stat[n] = '\0';
  const char* close_paren = std::strrchr(stat, ')');
  return !close_paren || close_paren[1] == '\0' || close_paren[2] == 'Z';
}

// Whether another process holds the daemon lock of `state_dir` (a daemon starting there).
bool StateLocked(const std::string& state_dir) {
  const int fd = open((state_dir + "/daemon.lock").c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return false;
  const bool locked = flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  close(fd);
  return locked;
}

// Where this client looks for its daemon.
struct Discovery {
  bool system_only = false;          ///< a system daemon is installed: ask only it, start none
  std::vector<std::string> sockets;  ///< where to ask, in order (system_only: one)
  double wait_s = 0;                 ///< system_only: how long to wait for it to answer
};

Result<Discovery> Discover() {
  auto config = LoadConfig();
  if (!config) return config.error();
  auto installed = daemon::SystemDaemonInstalled(config->daemon_mode);
  if (!installed) return installed.error();
  auto wait_s = SystemDaemonWaitS();
  if (!wait_s) return wait_s.error();
  const std::string system = daemon::SystemPaths().socket, user = daemon::UserPaths().socket;
  Discovery d;
  // GPULANE_SOCKET naming the system daemon's socket means that daemon, too: never a per-user one there.
  d.system_only = *installed || user == daemon::kSystemSocket;
  d.sockets = {system};
  if (!d.system_only && user != system) d.sockets.push_back(user);
  d.wait_s = *wait_s;
  return d;
}

std::string SystemDaemonDown(const std::string& socket, double waited_s) {
  // The fix named is one this machine has: systemctl only where a gpulane unit is installed.
  const bool root = geteuid() == 0;
  const std::string fix =
      daemon::SystemUnitInstalled()
          ? (root ? "start it with 'systemctl start gpulane'" : "ask an admin to run 'systemctl start gpulane'")
          : (root ? "start it with 'GPULANE_SYSTEM_DAEMON=1 gpulane daemon' (no gpulane systemd unit is installed "
                    "here: docs/install.md, \"Without systemd\")"
                  : "ask an admin to start it ('GPULANE_SYSTEM_DAEMON=1 gpulane daemon' as root; no gpulane systemd "
                    "unit is installed here)");
  return fmt::format("the gpulane system daemon is not running (no answer on {} for {:g} s): {}", socket, waited_s, fix);
}

// A connection to the daemon on `socket` that may be told the caller's requests, or -1 when nothing
// listens there. A socket in the shared /tmp is used only inside the caller's own private folder,
// and only a daemon of root's or the caller's own is trusted. Errors: kUnsafe (said which and why).
Result<int> ConnectTrusted(const std::string& socket) {
  if (Status safe = daemon::SecureUserPaths({socket, "", false}, /*create=*/false); !safe.ok()) return safe.error();
  int fd = ConnectTo(socket);
  if (fd < 0) return -1;
  if (Status peer = proto::CheckDaemonPeer(fd, socket); !peer.ok()) {
    close(fd);
    return peer.error();
  }
  return fd;
}

// A connection to a daemon that answers now or, when the system daemon is installed, within
// d.wait_s. nullopt: none answers and none is installed.
Result<std::optional<int>> ConnectRunning(const Discovery& d) {
  if (!d.system_only) {
    for (const auto& socket : d.sockets) {
      auto fd = ConnectTrusted(socket);
      if (!fd) return fd.error();
      if (*fd >= 0) return std::optional<int>(*fd);
    }
    return std::optional<int>();
  }
  const std::string& socket = d.sockets.front();
  const double wait_s = std::min(d.wait_s, 1e6);  // a day and more: no overflow in the clock's nanoseconds
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(wait_s));
  while (true) {
    auto fd = ConnectTrusted(socket);
    if (!fd) return fd.error();
    if (*fd >= 0) return std::optional<int>(*fd);
    const Clock::duration left = deadline - Clock::now();
    if (left <= Clock::duration::zero()) return MakeError(ErrorKind::kUnavailable, SystemDaemonDown(socket, d.wait_s));
    std::this_thread::sleep_for(std::min<Clock::duration>(left, std::chrono::milliseconds(20)));
  }
}

// The last line of the per-user daemon's log in `state_dir` ("" when there is none): why it did not start.
std::string LastLogLine(const std::string& state_dir) {
  const int fd = open((state_dir + "/daemon.log").c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return "";
  struct stat st {};
  std::string tail(4096, '\0');
  const off_t from = fstat(fd, &st) == 0 && st.st_size > 4096 ? st.st_size - 4096 : 0;
  const ssize_t n = pread(fd, tail.data(), tail.size(), from);
  close(fd);
  tail.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  while (!tail.empty() && tail.back() == '\n') tail.pop_back();
  return tail.substr(tail.rfind('\n') == std::string::npos ? 0 : tail.rfind('\n') + 1);
}

// Starts the per-user daemon and connects to it once it listens (10 s at most). Its folders in the
// shared /tmp, if it uses any, are made private first (or refused: kUnsafe).
Result<int> StartAndConnect() {
  daemon::DaemonPaths user = daemon::UserPaths();
  if (Status safe = daemon::SecureUserPaths(user, /*create=*/true); !safe.ok()) return safe.error();
  const pid_t started = StartUserDaemon(user);
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (Clock::now() < deadline) {
    auto fd = ConnectTrusted(user.socket);
    if (!fd) return fd.error();
    if (*fd >= 0) return *fd;
    // The one started has failed, and no other daemon (another command's) is starting in its place.
    if (started > 0 && Ended(started) && !StateLocked(user.state_dir)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  // The daemon reads the GPUs before it listens: when NVML cannot be loaded here either (it has this
  // environment), that is why it ended, with that error's own exit code (no driver: 3, NVML: 4).
  if (started > 0 && Ended(started)) {
    const SystemClock clock{};  // the backend's, unread: NVML is only loaded to see why it fails
    if (auto nvml = NvmlBackend::Open(clock); !nvml)
      return MakeError(nvml.error().kind, "the gpulane daemon cannot start: " + nvml.error().message);
  }
  const std::string last = LastLogLine(user.state_dir);
  return MakeError(ErrorKind::kUnavailable,
                   fmt::format("no gpulane daemon answers on {} and one could not be started ({}/daemon.log{}{})", user.socket,
                               user.state_dir, last.empty() ? "" : " says: ", last));
}

// With no daemon answering: the user's own daemon started again when its state holds jobs (or a
// job store it cannot read: the daemon's start says why), said once on stderr; nullopt when the
// state holds none.
Result<std::optional<int>> StartWhenStateHasJobs() {
  const daemon::DaemonPaths user = daemon::UserPaths();
  if (Status safe = daemon::SecureUserPaths(user, /*create=*/false); !safe.ok()) return safe.error();
  auto counts = store::CountJobs(user.state_dir + "/jobs.db");
  if (counts && counts->total == 0) return std::optional<int>();
  auto fd = StartAndConnect();
  if (!fd) return fd.error();
  Warn(counts ? fmt::format("your gpulane daemon was not running; started it again ({} of the {} job{} in {} unfinished)",
                            counts->unfinished, counts->total, counts->total == 1 ? "" : "s", user.state_dir)
              : fmt::format("your gpulane daemon was not running; started it again ({})", counts.error().message));
  return std::optional<int>(*fd);
}

// Reads exactly `n` bytes into `data`, waiting up to `timeout_s` (< 0: forever) for each part.
Status ReadExactly(int fd, char* data, std::size_t n, double timeout_s) {
  const int wait_ms = timeout_s < 0 ? -1 : static_cast<int>(std::min(timeout_s, 1e6) * 1000);
  for (std::size_t got = 0; got < n;) {
    pollfd p{fd, POLLIN, 0};
    int ready = poll(&p, 1, wait_ms);
    if (ready == 0) return MakeError(ErrorKind::kTimeout, "the gpulane daemon did not answer in time");
    if (ready < 0) {
      if (errno == EINTR) continue;
      return MakeError(ErrorKind::kIo, fmt::format("cannot wait for the gpulane daemon: {}", std::strerror(errno)));
    }
    ssize_t r = read(fd, data + got, n - got);
    if (r == 0) return MakeError(ErrorKind::kIo, "the gpulane daemon closed the connection");
    if (r < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return MakeError(ErrorKind::kIo, fmt::format("cannot read from the gpulane daemon: {}", std::strerror(errno)));
    }
    got += static_cast<std::size_t>(r);
  }
  return Status::Ok();
}

// The payload of the next frame on `fd` (framing: docs/protocol.md), read without reading past it.
Result<std::string> ReadPayload(int fd, double timeout_s) {
  unsigned char header[4];
  if (Status s = ReadExactly(fd, reinterpret_cast<char*>(header), 4, timeout_s); !s.ok()) return s.error();
  const std::size_t n = (std::size_t{header[0]} << 24) | (std::size_t{header[1]} << 16) | (std::size_t{header[2]} << 8) | header[3];
  if (n > proto::kMaxResponseBytes) return MakeError(ErrorKind::kIo, "the gpulane daemon's reply is larger than allowed");
  std::string payload(n, '\0');
  if (Status s = ReadExactly(fd, payload.data(), n, timeout_s); !s.ok()) return s.error();
  return payload;
}

// Sends `request` on `fd` and reads a streamed reply (StreamIfRunning).
Result<nlohmann::json> ExchangeStreamed(int fd, const std::string& frame, const TextSink& sink, double timeout_s) {
  Status sent = proto::WriteBytes(fd, frame, 10);
  // A daemon that refuses the connection (too many) answers and closes before reading: read why.
  auto first = ReadPayload(fd, sent.ok() ? timeout_s : 0.5);
  if (!sent.ok() && (!first || first->empty())) return sent.error();
  if (!first) return first.error();
  auto header = nlohmann::json::parse(*first, nullptr, false);
  if (header.is_discarded() || !header.is_object()) return MakeError(ErrorKind::kIo, "the gpulane daemon sent a malformed reply");
  if (!header.value("ok", false))
    return MakeError(proto::KindFromName(header.value("code", "internal")), header.value("error", "the daemon refused"));
  if (!header.contains("stream")) return header;  // an older daemon: the whole answer in this one frame
  while (true) {
    auto part = ReadPayload(fd, timeout_s);
    if (!part) return part.error();
    if (part->empty()) return header;
    if (Status s = sink(*part); !s.ok()) return s.error();
  }
}

}  // namespace

Result<double> SystemDaemonWaitS() {
  const char* text = std::getenv("GPULANE_SYSTEM_DAEMON_WAIT");
  if (!text || !*text) return kSystemDaemonWaitS;
  auto seconds = ParseDurationOrSecondsS(text);
  if (!seconds) return MakeError(ErrorKind::kInvalidArgument, "GPULANE_SYSTEM_DAEMON_WAIT: " + seconds.error().message);
  return *seconds;
}

Result<nlohmann::json> CallOrStart(nlohmann::json request, double timeout_s) {
  const std::string frame = proto::EncodeRequest(std::move(request));
  auto d = Discover();
  if (!d) return d.error();
  TimingMark("daemon looked up");
  auto fd = ConnectRunning(*d);
  if (!fd) return fd.error();
  TimingMark("connected");
  if (*fd) {
    auto reply = ExchangeEncoded(**fd, frame, timeout_s);
    TimingMark("reply read");
    return reply;
  }
  auto started = StartAndConnect();
  if (!started) return started.error();
  return ExchangeEncoded(*started, frame, timeout_s);
}

Result<std::optional<nlohmann::json>> CallIfRunning(nlohmann::json request, double timeout_s, bool error_replies,
                                                    IfDown if_down) {
  const std::string frame = proto::EncodeRequest(std::move(request));
  auto d = Discover();
  if (!d) return d.error();
  auto fd = ConnectRunning(*d);
  if (!fd) return fd.error();
  if (!*fd && if_down == IfDown::kStartWithJobs) fd = StartWhenStateHasJobs();
  if (!fd) return fd.error();
  if (!*fd) return std::optional<nlohmann::json>();
  auto reply = ExchangeEncoded(**fd, frame, timeout_s, error_replies);
  if (!reply) return reply.error();
  return std::optional<nlohmann::json>(std::move(reply).value());
}

Result<std::optional<nlohmann::json>> StreamIfRunning(nlohmann::json request, const TextSink& sink, double timeout_s) {
  const std::string frame = proto::EncodeRequest(std::move(request));
  auto d = Discover();
  if (!d) return d.error();
  auto fd = ConnectRunning(*d);
  if (!fd) return fd.error();
  if (!*fd) fd = StartWhenStateHasJobs();
  if (!fd) return fd.error();
  if (!*fd) return std::optional<nlohmann::json>();
  auto reply = ExchangeStreamed(**fd, frame, sink, timeout_s);
  close(**fd);
  if (!reply) return reply.error();
  return std::optional<nlohmann::json>(std::move(reply).value());
}

Error NothingWithoutDaemon(const std::string& what) {
  return MakeError(ErrorKind::kNotFound,
                   fmt::format("{}: no gpulane daemon is running, so nothing is queued ('gpulane submit' starts one)", what));
}

Error NoJobWithoutDaemon(const std::string& id) { return NothingWithoutDaemon("no job " + id); }

}  // namespace gpulane::cli
