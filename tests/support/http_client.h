#pragma once
// A small HTTP/1.1 client for tests of gpulane-web: one request per connection on loopback, with
// exactly the Host header (or none) and method the test gives, so the server's checks are seen
// as a browser or an attacker would meet them.
#include <map>
#include <string>

namespace gpulane::test {

struct HttpResponse {
  int status = 0;                              ///< 0: no valid response (connection refused, time-out)
  std::map<std::string, std::string> headers;  ///< names in lower case
  std::string body;
  std::string error;                           ///< why status is 0
};

/// Sends `method path` to 127.0.0.1:`port` with Host `host` ("" sends none) and `body` (with its
/// Content-Length when not empty), and reads the whole response (the connection is closed).
HttpResponse HttpRequest(int port, const std::string& method, const std::string& path, const std::string& host,
                         const std::string& body = "", double timeout_s = 10);

/// GET with Host 127.0.0.1:`port`.
inline HttpResponse HttpGet(int port, const std::string& path) {
  return HttpRequest(port, "GET", path, "127.0.0.1:" + std::to_string(port));
}

}  // namespace gpulane::test
