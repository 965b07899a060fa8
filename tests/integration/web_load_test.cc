// gpulane-web under load and hostile input (issue 23 item 6), through the real binaries on
// loopback: the daemon starts gpulane-web, the attack runs against it, and a /metrics scrape on a
// fresh connection (as Prometheus makes one) must still be answered within kScrapeBound_s while it
// does. Each test is bounded in connections and time. The latency figures against the 50 ms target
// are bench/web_load.py's (bench/results/web-load-*.md); the bound here is for a busy CI machine.
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "support/daemon_fixture.h"
#include "support/http_client.h"
#include "support/text.h"
#include "support/web_daemon.h"

namespace gpulane::test {
namespace {

namespace fs = std::filesystem;

constexpr double kScrapeBound_s = 2.0;
constexpr double kHeadDeadline_s = 5.0;  ///< docs/web.md: a request's head within 5 s of its first byte
constexpr double kIdle_s = 5.0;          ///< docs/web.md: a kept-alive connection idle 5 s is closed

double Now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// A daemon with gpulane-web whose /metrics already has the sampler's readings.
struct WebServerUp {
  TestDaemon d;
  int port = 0;
  WebServerUp() : d(DaemonOptions{.config = kWebConfig}) {
    port = WebPort(d);
    EXPECT_TRUE(Eventually([&] {
      HttpResponse r = HttpGet(port, "/metrics");
      return r.status == 200 && Contains(r.body, "DCGM_FI_DEV_GPU_UTIL{");
    }, 30)) << d.Log();
  }
};

struct Scrape {
  int status = 0;
  double seconds = 0;
  std::string error;
};

// GET /metrics on a new connection, timed.
Scrape ScrapeOnce(int port) {
  const double start = Now();
  HttpResponse r = HttpRequest(port, "GET", "/metrics", "127.0.0.1:" + std::to_string(port), "", 10);
  return {r.status, Now() - start, r.error};
}

// Scrapes every 0.25 s while `running`; each must answer 200 within kScrapeBound_s.
std::vector<Scrape> ScrapeWhile(int port, const std::atomic<bool>& running) {
  std::vector<Scrape> out;
  while (running) {
    out.push_back(ScrapeOnce(port));
    std::this_thread::sleep_for(std::chrono::milliseconds(250));  // a scrape interval, not a synchronisation
  }
  return out;
}

void ExpectAllAnsweredInTime(const std::vector<Scrape>& scrapes) {
  ASSERT_FALSE(scrapes.empty());
  for (const Scrape& s : scrapes) {
    EXPECT_EQ(s.status, 200) << s.error;
    EXPECT_LT(s.seconds, kScrapeBound_s);
  }
}

long StatusField_kB(pid_t pid, const std::string& field) {
  const std::string status = ReadFile(fmt::format("/proc/{}/status", pid));
  const auto at = status.find("\n" + field + ":");
  return at == std::string::npos ? -1 : std::strtol(status.c_str() + at + field.size() + 2, nullptr, 10);
}

std::size_t OpenDescriptors(pid_t pid) {
  std::error_code ec;
  std::size_t n = 0;
  for (auto it = fs::directory_iterator(fmt::format("/proc/{}/fd", pid), ec); !ec && it != fs::directory_iterator(); it.increment(ec)) ++n;
  return n;
}

// Issue 23: 8 keep-alive clients (or 8 dashboard tabs polling each second) held cpp-httplib's 8
// worker threads between their requests, and /metrics timed out.
TEST(WebUnderLoad, EightKeepAliveClientsAndEightPollingDashboardsLeaveMetricsAnswering) {
  WebServerUp web;
  ASSERT_GT(web.port, 0);
  std::vector<std::unique_ptr<HttpConnection>> idle;
  for (int i = 0; i < 8; ++i) {
    idle.push_back(std::make_unique<HttpConnection>(web.port));
    ASSERT_EQ(idle.back()->Get("/api/v1/server").status, 200);  // then kept open, idle
  }
  std::atomic<bool> running = true;
  std::atomic<int> polls = 0, failed = 0;
  std::vector<std::thread> dashboards;
  for (int i = 0; i < 8; ++i)
    dashboards.emplace_back([&] {
      HttpConnection tab(web.port);
      while (running) {
        (tab.Get("/api/v1/status").status == 200 ? polls : failed)++;
        std::this_thread::sleep_for(std::chrono::seconds(1));  // the dashboard's poll interval
      }
    });
  std::thread stop([&] {
    std::this_thread::sleep_for(std::chrono::seconds(3));  // how long the load runs
    running = false;
  });
  const std::vector<Scrape> scrapes = ScrapeWhile(web.port, running);
  stop.join();
  for (auto& t : dashboards) t.join();
  ExpectAllAnsweredInTime(scrapes);
  EXPECT_GE(polls, 16) << "each dashboard's polls were answered too";
  EXPECT_EQ(failed, 0);
}

// Keep-alive is bounded: 100 requests on a connection (the 100th answered with Connection: close),
// and 5 s idle.
TEST(WebUnderLoad, KeepAliveEndsAfterAHundredRequestsOrFiveIdleSeconds) {
  WebServerUp web;
  ASSERT_GT(web.port, 0);
  HttpConnection busy(web.port);
  for (int i = 1; i < 100; ++i) {
    HttpResponse r = busy.Get("/api/v1/server");
    ASSERT_EQ(r.status, 200) << i << " " << r.error;
    ASSERT_NE(r.headers["connection"], "close") << i;
  }
  HttpResponse last = busy.Get("/api/v1/server");
  EXPECT_EQ(last.status, 200);
  EXPECT_EQ(last.headers["connection"], "close");
  EXPECT_TRUE(busy.ClosedByServer(2));
  HttpConnection idle(web.port);
  ASSERT_EQ(idle.Get("/api/v1/server").status, 200);
  const double answered = Now();
  EXPECT_TRUE(idle.ClosedByServer(kIdle_s + 3));
  EXPECT_GE(Now() - answered, kIdle_s - 0.5);
  EXPECT_LT(Now() - answered, kIdle_s + 1.5);
}

// Issue 23: 10 connections trickling a byte every 3 s held workers (cpp-httplib's read time-out
// starts again with each byte: one stayed 30 s against the documented 5 s) and /metrics timed out.
// Here a byte every 0.5 s: each is answered 408 and closed 5 s after its first byte.
TEST(WebUnderLoad, SlowlorisHeadsAreCutFiveSecondsAfterTheirFirstByte) {
  WebServerUp web;
  ASSERT_GT(web.port, 0);
  struct Trickler {
    int fd = -1;
    double first_byte = 0, closed_at = -1;
    std::string got;
  };
  std::vector<Trickler> slow(10);
  for (auto& t : slow) {
    t.fd = ConnectLoopback(web.port);
    ASSERT_GE(t.fd, 0);
    t.first_byte = Now();
    const std::string start = "GET /metrics HTTP/1.1\r\nX-Slow: ";
    ASSERT_GT(send(t.fd, start.data(), start.size(), MSG_NOSIGNAL), 0);
  }
  std::atomic<bool> running = true;
  std::vector<Scrape> scrapes;
  std::thread scraper([&] { scrapes = ScrapeWhile(web.port, running); });
  const double start = Now();
  for (double next_byte = start + 0.5; Now() - start < kHeadDeadline_s + 3;) {
    std::vector<pollfd> fds;
    for (auto& t : slow)
      if (t.closed_at < 0) fds.push_back({t.fd, POLLIN, 0});
    if (fds.empty()) break;
    poll(fds.data(), fds.size(), static_cast<int>(std::max(0.0, next_byte - Now()) * 1000) + 1);
    for (auto& t : slow) {
      char buf[1024];
      const ssize_t n = t.closed_at < 0 ? recv(t.fd, buf, sizeof buf, MSG_DONTWAIT) : -1;
      if (n > 0) t.got.append(buf, static_cast<std::size_t>(n));
      if (n == 0 || (n < 0 && errno != EAGAIN && t.closed_at < 0)) t.closed_at = Now();
    }
    if (Now() >= next_byte) {
      for (auto& t : slow)
        if (t.closed_at < 0) send(t.fd, "a", 1, MSG_NOSIGNAL);
      next_byte += 0.5;
    }
  }
  running = false;
  scraper.join();
  for (auto& t : slow) {
    EXPECT_GE(t.closed_at, 0) << "a trickled head still open after " << Now() - t.first_byte << " s";
    if (t.closed_at >= 0) {
      EXPECT_LT(t.closed_at - t.first_byte, kHeadDeadline_s + 1.5);
    }
    EXPECT_TRUE(Contains(t.got, "HTTP/1.1 408 ")) << t.got;
    close(t.fd);
  }
  ExpectAllAnsweredInTime(scrapes);
}

// Issue 23: 3,000 idle sockets timed a scrape out. Connections are capped (256): a new one sheds
// one that never asked first (a kept-alive client last), and gpulane-web's descriptors stay bounded.
TEST(WebUnderLoad, ThreeThousandIdleSocketsDoNotStopAScrape) {
  WebServerUp web;
  ASSERT_GT(web.port, 0);
  const pid_t pid = WebPid(web.d);
  ASSERT_GT(pid, 0);
  rlimit files{};
  getrlimit(RLIMIT_NOFILE, &files);
  files.rlim_cur = std::max<rlim_t>(files.rlim_cur, std::min<rlim_t>(files.rlim_max, 3300));
  setrlimit(RLIMIT_NOFILE, &files);
  const std::size_t count = std::min<std::size_t>(3000, files.rlim_cur - 200);
  HttpConnection dashboard(web.port);  // a client kept alive between its polls is shed after the flood's sockets
  ASSERT_EQ(dashboard.Get("/api/v1/server").status, 200);
  const double polled = Now();
  std::vector<int> idle;
  for (std::size_t i = 0; i < count; ++i) {
    const int fd = ConnectLoopback(web.port, true);
    if (fd >= 0) idle.push_back(fd);
  }
  EXPECT_GE(idle.size(), count * 9 / 10);
  // Until every connect is through (or refused), then the scrapes, with them all open.
  const double until = Now() + 10;
  for (int fd : idle) {
    pollfd p{fd, POLLOUT, 0};
    poll(&p, 1, static_cast<int>(std::max(0.0, until - Now()) * 1000));
  }
  std::vector<Scrape> scrapes;
  for (int i = 0; i < 4; ++i) scrapes.push_back(ScrapeOnce(web.port));
  ExpectAllAnsweredInTime(scrapes);
  EXPECT_LE(OpenDescriptors(pid), 256u + 32u) << "connections are capped";
  if (Now() - polled < kIdle_s - 1) {  // (on a machine so slow that it idled 5 s meanwhile, closed by the idle limit)
    EXPECT_EQ(dashboard.Get("/api/v1/server").status, 200) << "the kept-alive client was shed before sockets that never asked";
  }
  for (int fd : idle) close(fd);
}

// Issue 23: the number of header lines was unbounded (1.5 GB of headers: 2.75 GB resident, kept
// after the connection closed). A head is at most 64 header lines and 16 KiB: 431 at once.
TEST(WebUnderLoad, HeaderFloodIsRefusedWith431AndTheServerStaysSmall) {
  WebServerUp web;
  ASSERT_GT(web.port, 0);
  const pid_t pid = WebPid(web.d);
  const int fd = ConnectLoopback(web.port);
  ASSERT_GE(fd, 0);
  timeval five{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &five, sizeof five);
  const std::string start = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  ASSERT_GT(send(fd, start.data(), start.size(), MSG_NOSIGNAL), 0);
  std::string lines;
  while (lines.size() < (64 << 10)) lines += "X-Flood: y\r\n";
  for (std::size_t sent = 0; sent < (8u << 20);) {  // 8 MiB of header lines, or until the server takes no more
    const ssize_t n = send(fd, lines.data(), lines.size(), MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<std::size_t>(n);
  }
  std::string got;
  char buf[4096];
  pollfd p{fd, POLLIN, 0};
  while (poll(&p, 1, 5000) > 0) {
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    got.append(buf, static_cast<std::size_t>(n));
  }
  close(fd);
  EXPECT_TRUE(got.rfind("HTTP/1.1 431 ", 0) == 0) << got.substr(0, 300);
  EXPECT_TRUE(Contains(got, "64 header lines")) << got.substr(0, 300);
  const long peak_kB = StatusField_kB(pid, "VmHWM");
  EXPECT_GT(peak_kB, 0);
  EXPECT_LT(peak_kB, 64 << 10) << "gpulane-web's peak resident memory";
  ExpectAllAnsweredInTime({ScrapeOnce(web.port)});
}

// Issue 23: ?gpu=GPU-%00%ff was a 500. Every query parameter must decode to text: 400, naming it.
TEST(WebUnderLoad, NulAndInvalidUtf8InTheQueryAre400NeverA500) {
  WebServerUp web;
  ASSERT_GT(web.port, 0);
  const std::string host = "127.0.0.1:" + std::to_string(web.port);
  for (const char* target : {"/api/v1/history?gpu=GPU-%00%ff", "/api/v1/history?gpu=%ff", "/api/v1/report?user=%00",
                             "/api/v1/history?gpu=0&since=%zz", "/api/v1/status?history=%c0%80", "/metrics?x=%0a",
                             "/metrics%00"}) {
    for (const char* method : {"GET", "HEAD"}) {
      HttpResponse r = HttpRequest(web.port, method, target, host);
      EXPECT_EQ(r.status, 400) << method << " " << target << ": " << r.body;
    }
    HttpResponse r = HttpGet(web.port, target);
    EXPECT_TRUE(Contains(r.body, "percent-encoded bytes must decode to UTF-8 text") || Contains(r.body, "must begin two hex digits"))
        << target << ": " << r.body;
  }
  EXPECT_EQ(HttpGet(web.port, "/api/v1/history?gpu=GPU-%41%42").status, 404) << "well-formed escapes are decoded: no such GPU";
  ExpectAllAnsweredInTime({ScrapeOnce(web.port)});
}

// Issue 23: "Host: localhost%00.evil" passed the Host check (cpp-httplib percent-decodes header
// values, and the check read them up to the NUL). The check reads the raw header.
TEST(WebUnderLoad, HostCheckReadsTheRawHeaderNotADecodedOne) {
  WebServerUp web;
  ASSERT_GT(web.port, 0);
  for (const std::string host : {"localhost%00.evil", "localhost%2eevil", "127.0.0.1%00:1", "localhost%3a80"}) {
    HttpResponse r = HttpRequest(web.port, "GET", "/metrics", host);
    EXPECT_EQ(r.status, 403) << host << ": " << r.body;
    EXPECT_FALSE(Contains(r.body, "DCGM_FI")) << host;
  }
  auto raw = [&](const std::string& headers) {
    return HttpRaw(web.port, "GET /metrics HTTP/1.1\r\n" + headers + "Connection: close\r\n\r\n");
  };
  EXPECT_EQ(raw(std::string("Host: localhost\0.evil\r\n", 24)).status, 400) << "a raw NUL is no header";
  EXPECT_EQ(raw("Host: localhost\r\nHost: evil.example\r\n").status, 400) << "two Host headers";
  EXPECT_EQ(raw("Host: localhost\r\n").status, 200);
}

}  // namespace
}  // namespace gpulane::test
