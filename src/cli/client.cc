#include "cli/client.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <thread>
#include <vector>

#include "daemon/paths.h"
#include "proto/call.h"
#include "proto/wire.h"
#include "util/config.h"
#include "util/timing.h"
#include "util/units.h"

namespace gpulane::cli {
namespace {

using Clock = std::chrono::steady_clock;

using proto::ConnectTo;
using proto::ExchangeEncoded;

// Starts `gpulane daemon --user` detached from this process and its terminal.
void StartUserDaemon(const daemon::DaemonPaths& paths) {
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return;
  exe[n] = '\0';
  std::string state = paths.state_dir;
  pid_t child = fork();
  if (child == 0) {
    setsid();
    if (fork() != 0) _exit(0);
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
  if (child > 0) waitpid(child, nullptr, 0);
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
  return fmt::format("the gpulane system daemon is not running (no answer on {} for {:g} s): {}", socket, waited_s,
                     geteuid() == 0 ? "start it with 'systemctl start gpulane'"
                                    : "ask an admin to run 'systemctl start gpulane'");
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

// Starts the per-user daemon and connects to it once it listens (10 s at most). Its folders in the
// shared /tmp, if it uses any, are made private first (or refused: kUnsafe).
Result<int> StartAndConnect() {
  daemon::DaemonPaths user = daemon::UserPaths();
  if (Status safe = daemon::SecureUserPaths(user, /*create=*/true); !safe.ok()) return safe.error();
  StartUserDaemon(user);
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (Clock::now() < deadline) {
    auto fd = ConnectTrusted(user.socket);
    if (!fd) return fd.error();
    if (*fd >= 0) return *fd;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return MakeError(ErrorKind::kUnavailable,
                   fmt::format("no gpulane daemon answers on {} and one could not be started (see {}/daemon.log)",
                               user.socket, user.state_dir));
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

Result<std::optional<nlohmann::json>> CallIfRunning(nlohmann::json request, double timeout_s, bool error_replies) {
  const std::string frame = proto::EncodeRequest(std::move(request));
  auto d = Discover();
  if (!d) return d.error();
  auto fd = ConnectRunning(*d);
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
