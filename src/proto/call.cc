#include "proto/call.h"

#include <pwd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fmt/format.h>

#include "proto/wire.h"

namespace gpulane::proto {

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

Result<nlohmann::json> Exchange(int fd, nlohmann::json request, double timeout_s, bool error_replies) {
  return ExchangeEncoded(fd, EncodeRequest(std::move(request)), timeout_s, error_replies);
}

std::string EncodeRequest(nlohmann::json request) {
  request["v"] = kVersion;
  std::string frame;
  AppendFrame(request, frame);
  return frame;
}

Result<nlohmann::json> ExchangeEncoded(int fd, const std::string& frame, double timeout_s, bool error_replies) {
  Status sent = WriteBytes(fd, frame, 10);
  if (!sent.ok()) {
    // A daemon that refuses the connection (too many) answers and closes before reading: its
    // reason is there to be read.
    auto refusal = ReadFrame(fd, kMaxResponseBytes, 0.5);
    close(fd);
    if (refusal && !refusal->value("ok", true))
      return MakeError(KindFromName(refusal->value("code", "internal")), refusal->value("error", "the daemon refused"));
    return sent.error();
  }
  auto reply = ReadFrame(fd, kMaxResponseBytes, timeout_s);
  close(fd);
  if (!reply) return reply.error();
  if (!reply->value("ok", false) && !error_replies)
    return MakeError(KindFromName(reply->value("code", "internal")), reply->value("error", "the daemon refused"));
  return reply;
}

Status CheckDaemonPeer(int fd, const std::string& socket_path) {
  ucred peer{};
  socklen_t size = sizeof peer;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &size) != 0)
    return MakeError(ErrorKind::kUnsafe, fmt::format("cannot tell who listens on {} ({}), so nothing was sent to it",
                                                     socket_path, std::strerror(errno)));
  if (peer.uid == 0 || peer.uid == geteuid() || peer.uid == getuid()) return Status::Ok();
  struct passwd pw;
  struct passwd* found = nullptr;
  char buf[4096];
  const std::string who = getpwuid_r(peer.uid, &pw, buf, sizeof buf, &found) == 0 && found
                              ? fmt::format("{} (uid {})", found->pw_name, peer.uid)
                              : fmt::format("uid {}", peer.uid);
  return MakeError(ErrorKind::kUnsafe,
                   fmt::format("the process listening on {} runs as {}, not as root or you: it is no gpulane daemon of "
                               "yours (another user may be posing as one to read your jobs), so nothing was sent to it; "
                               "remove that socket's folder if it is yours, else set XDG_RUNTIME_DIR or GPULANE_SOCKET "
                               "to a place of your own, and tell an admin",
                               socket_path, who));
}

Result<nlohmann::json> CallExisting(const std::string& socket_path, nlohmann::json request, double timeout_s) {
  int fd = ConnectTo(socket_path);
  if (fd < 0) return MakeError(ErrorKind::kUnavailable, "no gpulane daemon listens on " + socket_path);
  if (Status trusted = CheckDaemonPeer(fd, socket_path); !trusted.ok()) {
    close(fd);
    return trusted.error();
  }
  return Exchange(fd, std::move(request), timeout_s);
}

}  // namespace gpulane::proto
