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

/// Sends `bytes` as they are (a request the test writes itself: raw NULs, several Host headers) on a
/// new connection and reads one response (up to `timeout_s`).
HttpResponse HttpRaw(int port, const std::string& bytes, double timeout_s = 10);

/// A connected TCP socket to 127.0.0.1:`port` (-1 on failure); non-blocking with `nonblocking`,
/// where the connection may still be in progress.
int ConnectLoopback(int port, bool nonblocking = false);

/// One keep-alive HTTP/1.1 connection to 127.0.0.1:`port`, as a dashboard tab or Prometheus keeps
/// one: requests one after another, each response read whole (by its Content-Length).
class HttpConnection {
 public:
  explicit HttpConnection(int port);
  ~HttpConnection();
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;
  /// GET `path` with Host 127.0.0.1:`port` on this connection; status 0 when it failed or was closed.
  HttpResponse Get(const std::string& path, double timeout_s = 10);
  /// Waits up to `timeout_s` for the server to close the connection; true when it did (end of file
  /// or reset, with no more bytes).
  bool ClosedByServer(double timeout_s);

 private:
  int port_;
  int fd_ = -1;
  std::string pending_;  ///< bytes read past the last response
};

/// GET with Host 127.0.0.1:`port`.
inline HttpResponse HttpGet(int port, const std::string& path) {
  return HttpRequest(port, "GET", path, "127.0.0.1:" + std::to_string(port));
}

}  // namespace gpulane::test
