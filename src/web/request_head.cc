#include "web/request_head.h"

#include <algorithm>
#include <cctype>
#include <optional>

#include <fmt/format.h>

#include "util/utf8.h"

namespace gpulane::web {
namespace {

constexpr std::string_view kTchars = "!#$%&'*+-.^_`|~";

bool IsTchar(unsigned char c) { return std::isalnum(c) || kTchars.find(static_cast<char>(c)) != std::string_view::npos; }

bool IsControl(unsigned char c) { return c < 0x20 || c == 0x7f; }

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

RequestHead Verdict(HeadState state) {
  RequestHead h;
  h.state = state;
  return h;
}

bool ParseRequestLine(std::string_view line, RequestHead& h) {
  const auto sp1 = line.find(' ');
  const auto sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) return false;
  h.method = line.substr(0, sp1);
  h.target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  h.version = line.substr(sp2 + 1);
  if (h.method.empty() || h.method.size() > 16 || !std::all_of(h.method.begin(), h.method.end(), [](unsigned char c) { return c >= 'A' && c <= 'Z'; }))
    return false;
  if (h.target.empty() || !std::all_of(h.target.begin(), h.target.end(), [](unsigned char c) { return c > 0x20 && c < 0x7f; }))
    return false;
  return h.version == "HTTP/1.1" || h.version == "HTTP/1.0";
}

// One header line (no line end) into `h`; false when it is no header (folding, bad name, control bytes).
bool ParseHeaderLine(std::string_view line, RequestHead& h) {
  const auto colon = line.find(':');
  if (colon == 0 || colon == std::string_view::npos) return false;
  const std::string_view name = line.substr(0, colon);
  if (!std::all_of(name.begin(), name.end(), [](unsigned char c) { return IsTchar(c); })) return false;
  const std::string_view value = Trim(line.substr(colon + 1));
  if (std::any_of(value.begin(), value.end(), [](unsigned char c) { return IsControl(c) && c != '\t'; })) return false;
  const std::string lower = Lower(name);
  if (lower == "host") h.hosts.emplace_back(value);
  if (lower == "transfer-encoding" || (lower == "content-length" && value != "0")) h.declares_body = true;
  return true;
}

// The complete head `head` (blank line included), judged whole.
RequestHead Parse(std::string_view head, const HeadLimits& limits) {
  RequestHead h;
  h.length = head.size();
  const auto first_end = head.find("\r\n");
  if (first_end > limits.max_line_bytes) return Verdict(HeadState::kTooLong);
  if (head.size() > limits.max_head_bytes) return Verdict(HeadState::kTooLarge);
  h.state = HeadState::kMalformed;
  if (!ParseRequestLine(head.substr(0, first_end), h)) return h;
  std::size_t headers = 0;
  for (std::size_t pos = first_end + 2;;) {
    const auto end = head.find("\r\n", pos);
    if (end == pos) break;  // the blank line
    if (++headers > limits.max_headers) return Verdict(HeadState::kTooLarge);
    if (!ParseHeaderLine(head.substr(pos, end - pos), h)) return h;
    pos = end + 2;
  }
  h.state = HeadState::kComplete;
  return h;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// `part` percent-decoded ('+' a space when `plus`); nullopt when a '%' does not begin two hex digits.
std::optional<std::string> Decode(std::string_view part, bool plus) {
  std::string out;
  for (std::size_t i = 0; i < part.size(); ++i) {
    if (part[i] == '%') {
      if (i + 2 >= part.size()) return std::nullopt;
      const int hi = HexValue(part[i + 1]), lo = HexValue(part[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else {
      out += plus && part[i] == '+' ? ' ' : part[i];
    }
  }
  return out;
}

Status CheckPart(std::string_view part, bool plus) {
  const std::string quoted(part.substr(0, 200));
  const auto decoded = Decode(part, plus);
  if (!decoded)
    return MakeError(ErrorKind::kInvalidArgument, fmt::format("'{}': a '%' must begin two hex digits (%XX)", quoted));
  if (!IsValidUtf8(*decoded) || std::any_of(decoded->begin(), decoded->end(), [](unsigned char c) { return IsControl(c); }))
    return MakeError(ErrorKind::kInvalidArgument,
                     fmt::format("'{}': percent-encoded bytes must decode to UTF-8 text without control characters", quoted));
  return Status::Ok();
}

}  // namespace

RequestHead HeadScanner::Scan(std::string_view bytes) {
  if (bytes.size() < scanned_) Reset();
  for (std::size_t i = scanned_; i < bytes.size(); ++i) {
    if (bytes[i] != '\n') continue;
    if (i == 0 || bytes[i - 1] != '\r') return Verdict(HeadState::kMalformed);  // a bare LF
    if (first_line_end_ == std::string_view::npos) first_line_end_ = i;
    ++line_ends_;
    if (i >= 3 && bytes.substr(i - 3, 4) == "\r\n\r\n") {
      scanned_ = i + 1;
      return Parse(bytes.substr(0, i + 1), limits_);
    }
  }
  scanned_ = bytes.size();
  const std::size_t line_bytes = first_line_end_ == std::string_view::npos ? bytes.size() : first_line_end_ - 1;
  if (line_bytes > limits_.max_line_bytes + (first_line_end_ == std::string_view::npos ? 1 : 0))
    return Verdict(HeadState::kTooLong);
  if (bytes.size() > limits_.max_head_bytes || line_ends_ > limits_.max_headers + 1)
    return Verdict(HeadState::kTooLarge);
  return RequestHead{};
}

std::string_view TargetPath(std::string_view target) { return target.substr(0, target.find('?')); }

Status CheckTarget(std::string_view target) {
  const auto q = target.find('?');
  if (Status s = CheckPart(target.substr(0, q), false); !s) return s;
  if (q == std::string_view::npos) return Status::Ok();
  std::string_view query = target.substr(q + 1);
  while (!query.empty()) {
    const auto amp = query.find('&');
    if (Status s = CheckPart(query.substr(0, amp), true); !s) return s;
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return Status::Ok();
}

}  // namespace gpulane::web
