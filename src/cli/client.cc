#include "cli/client.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <thread>

#include "daemon/paths.h"
#include "proto/wire.h"

namespace gpulane::cli {
namespace {

int ConnectTo(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) return -1;
  std::strcpy(addr.sun_path, path.c_str());
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

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
    int log_fd = open((state + "/daemon.log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    dup2(null_fd, 0);
    dup2(log_fd >= 0 ? log_fd : null_fd, 1);
    dup2(log_fd >= 0 ? log_fd : null_fd, 2);
    execl(exe, "gpulane", "daemon", "--user", static_cast<char*>(nullptr));
    _exit(127);
  }
  if (child > 0) waitpid(child, nullptr, 0);
}

Result<int> Connect() {
  const bool explicit_socket = std::getenv("GPULANE_SOCKET") != nullptr;
  if (!explicit_socket) {
    int fd = ConnectTo(daemon::SystemPaths().socket);
    if (fd >= 0) return fd;
  }
  daemon::DaemonPaths user = daemon::UserPaths();
  int fd = ConnectTo(user.socket);
  if (fd >= 0) return fd;
  StartUserDaemon(user);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    fd = ConnectTo(user.socket);
    if (fd >= 0) return fd;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return MakeError(ErrorKind::kUnavailable,
                   fmt::format("no gpulane daemon answers on {} and one could not be started (see {}/daemon.log)",
                               user.socket, user.state_dir));
}

}  // namespace

namespace {

Result<nlohmann::json> Exchange(int fd, nlohmann::json request, double timeout_s);

}  // namespace

Result<nlohmann::json> CallExisting(const std::string& socket_path, nlohmann::json request, double timeout_s) {
  int fd = ConnectTo(socket_path);
  if (fd < 0) return MakeError(ErrorKind::kUnavailable, "no gpulane daemon listens on " + socket_path);
  return Exchange(fd, std::move(request), timeout_s);
}

Result<nlohmann::json> Call(nlohmann::json request, double timeout_s) {
  auto fd = Connect();
  if (!fd) return fd.error();
  return Exchange(*fd, std::move(request), timeout_s);
}

namespace {

// Sends one request on a connected socket, reads the reply, closes the socket.
Result<nlohmann::json> Exchange(int fd, nlohmann::json request, double timeout_s) {
  request["v"] = proto::kVersion;
  Status sent = proto::WriteFrame(fd, request, 10);
  if (!sent.ok()) {
    close(fd);
    return sent.error();
  }
  auto reply = proto::ReadFrame(fd, proto::kMaxResponseBytes, timeout_s);
  close(fd);
  if (!reply) return reply.error();
  if (!reply->value("ok", false))
    return MakeError(proto::KindFromName(reply->value("code", "internal")), reply->value("error", "the daemon refused"));
  return reply;
}

}  // namespace

}  // namespace gpulane::cli
