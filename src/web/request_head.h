#pragma once
// An HTTP/1.x request's head judged as its bytes arrive, before any worker thread sees it
// (docs/web.md "Under load"): gpulane-web's connection loop (web/conn_loop.h) reads heads itself,
// so a slow or endless head costs a buffer of bounded size, never a thread. Pure: bytes in, a
// verdict out; the raw Host header and request target it keeps are what the Host check and the
// strict query decoding (CheckTarget) judge, never cpp-httplib's percent-decoded copies.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace gpulane::web {

struct HeadLimits {
  std::size_t max_line_bytes = 8192;   ///< the request line (method, target, version): 414 beyond
  std::size_t max_head_bytes = 16384;  ///< request line and headers with their line ends: 431 beyond
  std::size_t max_headers = 64;        ///< header lines: 431 beyond
};

enum class HeadState {
  kIncomplete,  ///< no blank line yet, and within the limits: read on
  kComplete,    ///< `length` bytes are the head (its blank line included)
  kTooLong,     ///< 414: the request line is over max_line_bytes
  kTooLarge,    ///< 431: the head is over max_head_bytes, or has more than max_headers lines
  kMalformed,   ///< 400: not an HTTP/1.0 or 1.1 request head (bare LF, control bytes, folding...)
};

struct RequestHead {
  HeadState state = HeadState::kIncomplete;
  std::size_t length = 0;          ///< kComplete: bytes of the head, blank line included
  std::string method;              ///< kComplete: "GET", ...
  std::string target;              ///< kComplete: the raw request target ("/api/v1/history?gpu=0")
  std::string version;             ///< kComplete: "HTTP/1.1" or "HTTP/1.0"
  std::vector<std::string> hosts;  ///< kComplete: each Host header's raw value, spaces trimmed
  bool declares_body = false;      ///< kComplete: a Content-Length other than 0, or a Transfer-Encoding
};

/// Reads one request's head incrementally: give it all of the request's bytes so far after each
/// read (the same buffer, grown); it looks only at what is new, so a head trickled a byte at a time
/// costs linear time. Reset() before the next request of a connection.
class HeadScanner {
 public:
  explicit HeadScanner(HeadLimits limits = {}) : limits_(limits) {}
  RequestHead Scan(std::string_view bytes);
  void Reset() { scanned_ = 0, line_ends_ = 0, first_line_end_ = std::string_view::npos; }

 private:
  HeadLimits limits_;
  std::size_t scanned_ = 0, line_ends_ = 0;
  std::size_t first_line_end_ = std::string_view::npos;
};

/// The path of a raw request target (what precedes '?').
std::string_view TargetPath(std::string_view target);

/// Strict decoding of a raw request target: every '%' starts two hex digits, and the path and each
/// query parameter's name and value (with '+' as a space) decode to UTF-8 text without control
/// characters (U+0000–U+001F, U+007F). Errors: kInvalidArgument, one line quoting the raw part
/// (printable ASCII: a complete head's target holds nothing else).
Status CheckTarget(std::string_view target);

}  // namespace gpulane::web
