#include "support/http_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

namespace gpulane::test {
namespace {

double Now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

bool WaitFor(int fd, short events, double deadline) {
  const double left = deadline - Now();
  if (left <= 0) return false;
  pollfd p{fd, events, 0};
  return poll(&p, 1, static_cast<int>(left * 1000) + 1) > 0;
}

// Whether `raw` holds a whole response: its head and Content-Length bytes of body (none for HEAD).
// A server may keep the connection open after answering (cpp-httplib does after a 414).
bool Complete(const std::string& raw, const std::string& method) {
  const auto head_end = raw.find("\r\n\r\n");
  if (head_end == std::string::npos) return false;
  std::string head = raw.substr(0, head_end);
  for (char& c : head) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const auto length = head.find("\r\ncontent-length:");
  if (length == std::string::npos) return false;  // read to the end
  if (method == "HEAD") return true;
  return raw.size() - head_end - 4 >= std::strtoull(head.c_str() + length + 17, nullptr, 10);
}

void Parse(const std::string& raw, HttpResponse& r) {
  const auto head_end = raw.find("\r\n\r\n");
  if (raw.rfind("HTTP/1.", 0) != 0 || head_end == std::string::npos || raw.size() < 12) {
    r.error = "not an HTTP response: '" + raw.substr(0, 200) + "'";
    return;
  }
  r.status = std::atoi(raw.c_str() + 9);
  std::size_t pos = raw.find("\r\n") + 2;
  while (pos < head_end) {
    const auto eol = raw.find("\r\n", pos);
    const std::string line = raw.substr(pos, eol - pos);
    const auto colon = line.find(':');
    if (colon != std::string::npos) {
      std::string name = line.substr(0, colon);
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      std::string value = line.substr(colon + 1);
      value.erase(0, value.find_first_not_of(' '));
      r.headers[name] = value;
    }
    pos = eol + 2;
  }
  r.body = raw.substr(head_end + 4);
}

}  // namespace

int ConnectLoopback(int port, bool nonblocking) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | (nonblocking ? SOCK_NONBLOCK : 0), 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd >= 0 && (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 || (nonblocking && errno == EINPROGRESS)))
    return fd;
  if (fd >= 0) close(fd);
  return -1;
}

namespace {

bool SendAll(int fd, const std::string& bytes) {
  for (std::size_t sent = 0; sent < bytes.size();) {
    const ssize_t n = send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;  // the server may answer and close before reading a body
    sent += static_cast<std::size_t>(n);
  }
  return true;
}

// Reads into `raw` until it holds a whole response (or the deadline, or the connection's end).
void ReadResponse(int fd, std::string& raw, const std::string& method, double deadline) {
  char buf[65536];
  while (!Complete(raw, method) && WaitFor(fd, POLLIN, deadline)) {
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    raw.append(buf, static_cast<std::size_t>(n));
  }
}

// One request on a new connection, the response read whole, the connection closed.
HttpResponse Exchange(int port, const std::string& request, const std::string& method, double timeout_s) {
  HttpResponse r;
  const double deadline = Now() + timeout_s;
  const int fd = ConnectLoopback(port);
  if (fd < 0) {
    r.error = std::string("connect: ") + std::strerror(errno);
    return r;
  }
  SendAll(fd, request);
  std::string raw;
  ReadResponse(fd, raw, method, deadline);
  close(fd);
  Parse(raw, r);
  return r;
}

}  // namespace

HttpResponse HttpRequest(int port, const std::string& method, const std::string& path, const std::string& host,
                         const std::string& body, double timeout_s) {
  std::string request = method + " " + path + " HTTP/1.1\r\n";
  if (!host.empty()) request += "Host: " + host + "\r\n";
  if (!body.empty()) request += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  request += "Connection: close\r\n\r\n" + body;
  return Exchange(port, request, method, timeout_s);
}

HttpResponse HttpRaw(int port, const std::string& bytes, double timeout_s) { return Exchange(port, bytes, "GET", timeout_s); }

HttpConnection::HttpConnection(int port) : port_(port), fd_(ConnectLoopback(port)) {}

HttpConnection::~HttpConnection() {
  if (fd_ >= 0) close(fd_);
}

HttpResponse HttpConnection::Get(const std::string& path, double timeout_s) {
  HttpResponse r;
  if (fd_ < 0 || !SendAll(fd_, "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port_) + "\r\n\r\n")) {
    r.error = "not connected";
    return r;
  }
  std::string raw;
  raw.swap(pending_);
  ReadResponse(fd_, raw, "GET", Now() + timeout_s);
  if (!Complete(raw, "GET")) {
    r.error = "no whole response: '" + raw.substr(0, 200) + "'";
    return r;
  }
  // The response ends after its Content-Length bytes; anything more is the next one's.
  Parse(raw, r);
  const std::size_t length = std::strtoull(r.headers["content-length"].c_str(), nullptr, 10);
  pending_ = r.body.substr(std::min(length, r.body.size()));
  r.body.resize(std::min(length, r.body.size()));
  return r;
}

bool HttpConnection::ClosedByServer(double timeout_s) {
  const double deadline = Now() + timeout_s;
  char buf[4096];
  while (fd_ >= 0 && WaitFor(fd_, POLLIN, deadline)) {
    const ssize_t n = recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) return true;
  }
  return false;
}

}  // namespace gpulane::test
