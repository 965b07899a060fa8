#include "proto/wire.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fmt/format.h>

namespace gpulane::proto {
namespace {

using PollClock = std::chrono::steady_clock;  // not "Clock": gpulane::Clock is the seam (util/clock.h), and files share a batch

int MillisLeft(PollClock::time_point deadline) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - PollClock::now()).count();
  return ms < 0 ? 0 : static_cast<int>(ms);
}

}  // namespace

void AppendFrame(const nlohmann::json& message, std::string& out) {
  AppendRawFrame(message.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), out);
}

void AppendRawFrame(std::string_view payload, std::string& out) {
  std::uint32_t n = static_cast<std::uint32_t>(payload.size());
  char header[4] = {static_cast<char>(n >> 24), static_cast<char>(n >> 16), static_cast<char>(n >> 8), static_cast<char>(n)};
  out.append(header, 4);
  out += payload;
}

std::optional<std::string> FrameReader::Next(bool* too_big) {
  *too_big = false;
  if (buffer_.size() < 4) return std::nullopt;
  const auto* b = reinterpret_cast<const unsigned char*>(buffer_.data());
  std::size_t n = (std::size_t{b[0]} << 24) | (std::size_t{b[1]} << 16) | (std::size_t{b[2]} << 8) | b[3];
  if (n > max_bytes_) {
    *too_big = true;
    return std::nullopt;
  }
  if (buffer_.size() < 4 + n) return std::nullopt;
  std::string payload = buffer_.substr(4, n);
  buffer_.erase(0, 4 + n);
  return payload;
}

Status WriteFrame(int fd, const nlohmann::json& message, double timeout_s) {
  std::string out;
  AppendFrame(message, out);
  return WriteBytes(fd, out, timeout_s);
}

Status WriteBytes(int fd, std::string_view out, double timeout_s) {
  auto deadline = PollClock::now() + std::chrono::duration_cast<PollClock::duration>(std::chrono::duration<double>(timeout_s));
  std::size_t sent = 0;
  while (sent < out.size()) {
    // Not SIGPIPE when the daemon has closed its end (a refused connection): EPIPE, and the caller
    // reads the reason it left.
    ssize_t n = send(fd, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == ENOTSOCK) n = write(fd, out.data() + sent, out.size() - sent);
    if (n > 0) {
      sent += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EINTR)
      return MakeError(ErrorKind::kIo, fmt::format("cannot send to the gpulane daemon: {}", std::strerror(errno)));
    pollfd p{fd, POLLOUT, 0};
    if (poll(&p, 1, MillisLeft(deadline)) == 0)
      return MakeError(ErrorKind::kTimeout, "the gpulane daemon did not take the request in time");
  }
  return Status::Ok();
}

Result<nlohmann::json> ReadFrame(int fd, std::size_t max_bytes, double timeout_s) {
  FrameReader reader(max_bytes);
  auto deadline = PollClock::now() + std::chrono::duration_cast<PollClock::duration>(std::chrono::duration<double>(timeout_s));
  char buf[65536];
  while (true) {
    bool too_big = false;
    if (auto frame = reader.Next(&too_big)) {
      auto j = nlohmann::json::parse(*frame, nullptr, false);
      if (j.is_discarded()) return MakeError(ErrorKind::kIo, "the gpulane daemon sent a malformed reply");
      return j;
    }
    if (too_big) return MakeError(ErrorKind::kIo, "the gpulane daemon's reply is larger than allowed");
    pollfd p{fd, POLLIN, 0};
    int ready = poll(&p, 1, timeout_s < 0 ? -1 : MillisLeft(deadline));
    if (ready == 0) return MakeError(ErrorKind::kTimeout, "the gpulane daemon did not answer in time");
    ssize_t n = read(fd, buf, sizeof buf);
    if (n == 0) return MakeError(ErrorKind::kIo, "the gpulane daemon closed the connection");
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return MakeError(ErrorKind::kIo, fmt::format("cannot read from the gpulane daemon: {}", std::strerror(errno)));
    }
    reader.Feed(buf, static_cast<std::size_t>(n));
  }
}

const char* KindName(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInvalidArgument: return "invalid_argument";
    case ErrorKind::kNoDriver: return "no_driver";
    case ErrorKind::kNvml: return "nvml";
    case ErrorKind::kNotEnoughGpus: return "not_enough_gpus";
    case ErrorKind::kTimeout: return "timeout";
    case ErrorKind::kUnsafe: return "unsafe";
    case ErrorKind::kIo: return "io";
    case ErrorKind::kNotFound: return "not_found";
    case ErrorKind::kPermission: return "permission";
    case ErrorKind::kWrongState: return "wrong_state";
    case ErrorKind::kUnavailable: return "unavailable";
    case ErrorKind::kStore: return "store";
    case ErrorKind::kOverLimit: return "over_limit";
    case ErrorKind::kInternal: return "internal";
  }
  return "internal";
}

ErrorKind KindFromName(const std::string& name) {
  for (ErrorKind k : {ErrorKind::kInvalidArgument, ErrorKind::kNoDriver, ErrorKind::kNvml, ErrorKind::kNotEnoughGpus,
                      ErrorKind::kTimeout, ErrorKind::kUnsafe, ErrorKind::kIo, ErrorKind::kNotFound, ErrorKind::kPermission,
                      ErrorKind::kWrongState, ErrorKind::kUnavailable, ErrorKind::kStore, ErrorKind::kOverLimit, ErrorKind::kInternal})
    if (name == KindName(k)) return k;
  return ErrorKind::kInternal;
}

std::size_t NestingDepth(std::string_view payload) {
  std::size_t depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char ch : payload) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (ch == '\\') escaped = true;
      else if (ch == '"') in_string = false;
      continue;
    }
    if (ch == '"') in_string = true;
    else if (ch == '[' || ch == '{') deepest = std::max(deepest, ++depth);
    else if ((ch == ']' || ch == '}') && depth > 0) --depth;
  }
  return deepest;
}

nlohmann::json ErrorResponse(ErrorKind kind, const std::string& message) {
  return {{"v", kVersion}, {"ok", false}, {"error", message}, {"code", KindName(kind)}};
}

}  // namespace gpulane::proto
