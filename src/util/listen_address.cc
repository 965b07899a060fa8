#include "util/listen_address.h"

#include <charconv>

#include <fmt/format.h>

namespace gpulane {

Result<ListenAddress> ParseListen(const std::string& text) {
  const auto hint = fmt::format("give HOST:PORT, like \"{}\" or \"[::1]:9470\"", kDefaultWebListen);
  auto bad = [&](const char* what) {
    return MakeError(ErrorKind::kInvalidArgument, fmt::format("listen address '{}' {}: {}", text, what, hint));
  };
  ListenAddress out;
  std::string port_text;
  if (!text.empty() && text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':')
      return bad("needs its IPv6 address in brackets and a port");
    out.host = text.substr(1, close - 1);
    port_text = text.substr(close + 2);
  } else {
    const auto colon = text.rfind(':');
    if (colon == std::string::npos) return bad("has no port");
    if (text.find(':') != colon) return bad("needs its IPv6 address in brackets");
    out.host = text.substr(0, colon);
    port_text = text.substr(colon + 1);
  }
  if (out.host.empty()) return bad("has no host");
  for (unsigned char c : out.host)
    if (c <= ' ' || c == '/' || c == '@' || c == '[' || c == ']' || c == 0x7f) return bad("has a malformed host");
  const char* end = port_text.data() + port_text.size();
  auto [ptr, ec] = std::from_chars(port_text.data(), end, out.port);
  if (port_text.empty() || ec != std::errc() || ptr != end || out.port < 0 || out.port > 65535)
    return bad("needs a port from 0 to 65535");
  return out;
}

}  // namespace gpulane
