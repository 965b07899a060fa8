#include "proto/call.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

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

Result<nlohmann::json> CallExisting(const std::string& socket_path, nlohmann::json request, double timeout_s) {
  int fd = ConnectTo(socket_path);
  if (fd < 0) return MakeError(ErrorKind::kUnavailable, "no gpulane daemon listens on " + socket_path);
  return Exchange(fd, std::move(request), timeout_s);
}

}  // namespace gpulane::proto
