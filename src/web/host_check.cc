#include "web/host_check.h"

#include <algorithm>
#include <cctype>

namespace gpulane::web {
namespace {

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// A bare IPv6 address (the listen host "::1") as a Host header writes it: "[::1]".
std::string Bracketed(const std::string& host) {
  return host.find(':') != std::string::npos && host.front() != '[' ? "[" + host + "]" : host;
}

bool AllDigits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

}  // namespace

std::vector<std::string> AllowedHosts(const std::string& listen_host, const std::vector<std::string>& extra) {
  std::vector<std::string> out = {"localhost", "127.0.0.1", "[::1]"};
  const std::string listen = Lower(Bracketed(listen_host));
  if (listen != "0.0.0.0" && listen != "[::]" && !listen.empty()) out.push_back(listen);
  for (const auto& name : extra) out.push_back(Lower(Bracketed(name)));
  return out;
}

std::string HostName(const std::string& host_header) {
  const std::string h = Lower(host_header);
  if (h.empty()) return "";
  std::string name = h, port;
  if (h.front() == '[') {
    const auto close = h.find(']');
    if (close == std::string::npos) return "";
    name = h.substr(0, close + 1);
    if (close + 1 < h.size()) {
      if (h[close + 1] != ':') return "";
      port = h.substr(close + 2);
      if (!AllDigits(port)) return "";
    }
  } else if (const auto colon = h.find(':'); colon != std::string::npos) {
    name = h.substr(0, colon);
    port = h.substr(colon + 1);
    if (!AllDigits(port)) return "";
  }
  for (unsigned char c : name)
    if (c <= ' ' || c >= 0x7f || c == '/' || c == '@' || c == '%' || c == '\\') return "";  // a raw header: no escapes
  return name;
}

bool HostAllowed(const std::string& host_header, const std::vector<std::string>& allowed) {
  const std::string name = HostName(host_header);
  return !name.empty() && std::find(allowed.begin(), allowed.end(), name) != allowed.end();
}

}  // namespace gpulane::web
