#pragma once
// The request/response protocol between gpulane clients and the daemon over a Unix socket
// (documented for other clients in docs/protocol.md).
//
// Framing: each message is a 4-byte big-endian length followed by that many bytes of UTF-8 JSON.
// Requests are objects {"v": 1, "op": "...", ...}; responses {"v": 1, "ok": true, ...} or
// {"v": 1, "ok": false, "error": "<one line>", "code": "<kind>"}. Requests are capped at
// kMaxRequestBytes and must arrive whole within kReadTimeoutS of their first byte; a bad, oversized, truncated or
// wrong-version request gets an error response and the daemon keeps serving.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "util/result.h"

namespace gpulane::proto {

inline constexpr int kVersion = 2;  ///< 2: a submission's spec carries "request" (proto/request_json.h)
inline constexpr std::size_t kMaxRequestBytes = 8u << 20;    ///< 8 MiB: a submission with its environment
inline constexpr std::size_t kMaxResponseBytes = 512u << 20; ///< a queue listing of 100,000 jobs fits
inline constexpr double kReadTimeoutS = 5;           ///< seconds from a request's first byte to its last: the daemon's default (daemon/settings.h changes it)
inline constexpr std::size_t kMaxRequestDepth = 64;  ///< arrays and objects within each other; deeper is refused
/// The longest idempotency key a submit may carry, in bytes (gpulane submit sends 32 hex digits).
inline constexpr std::size_t kMaxIdempotencyKeyBytes = 128;

/// Appends the frame of `message` to `out`.
void AppendFrame(const nlohmann::json& message, std::string& out);
/// Appends a frame whose payload is `payload` as it is: a part of a streamed reply's text
/// (docs/protocol.md "Streamed replies"); an empty one ends the stream.
void AppendRawFrame(std::string_view payload, std::string& out);

/// Incremental frame decoder for a non-blocking reader.
class FrameReader {
 public:
  explicit FrameReader(std::size_t max_bytes) : max_bytes_(max_bytes) {}
  /// Adds bytes just read.
  void Feed(const char* data, std::size_t n) { buffer_.append(data, n); }
  /// A complete frame's payload if one is buffered; sets *too_big when the announced length
  /// exceeds the limit (the connection should then be answered and closed).
  std::optional<std::string> Next(bool* too_big);
  /// True while part of a frame is buffered.
  bool partial() const { return !buffer_.empty(); }
  /// Bytes buffered: a partial frame, and whole frames not yet taken by Next.
  std::size_t buffered() const { return buffer_.size(); }
  /// Drops everything buffered (and frees its memory).
  void Clear() { std::string().swap(buffer_); }

 private:
  std::size_t max_bytes_;
  std::string buffer_;
};

/// Blocking helpers for clients: write a whole frame / read one, each within `timeout_s`.
Status WriteFrame(int fd, const nlohmann::json& message, double timeout_s);
/// Writes `bytes` (frames already encoded) within `timeout_s`.
Status WriteBytes(int fd, std::string_view bytes, double timeout_s);
Result<nlohmann::json> ReadFrame(int fd, std::size_t max_bytes, double timeout_s);

/// How deeply arrays and objects nest in the JSON text `payload` (0 for a scalar), counted
/// without parsing it (brackets inside strings do not count), so that a request nested deeper than
/// kMaxRequestDepth is refused before code that walks values recursively sees it.
std::size_t NestingDepth(std::string_view payload);

/// An error response.
nlohmann::json ErrorResponse(ErrorKind kind, const std::string& message);
/// "invalid_argument", "not_found" ... for the "code" field, and back.
const char* KindName(ErrorKind kind);
ErrorKind KindFromName(const std::string& name);

}  // namespace gpulane::proto
