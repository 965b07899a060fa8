#include "web/http_server.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <thread>

#include <fmt/format.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "util/exit_codes.h"
#include "web/api.h"
#include "web/conn_loop.h"
#include "web/daemon_client.h"
#include "web/host_check.h"
#include "web/static_dir.h"

namespace gpulane::web {
namespace {

using nlohmann::json;

constexpr const char* kMetricsType = "text/plain; version=0.0.4; charset=utf-8";
constexpr std::size_t kChartPoints = 600;  ///< points a GPU's chart gets with /api/v1/status?history=
constexpr std::size_t kMaxBodyBytes = 64 << 10;  ///< cpp-httplib reads no body of a GET or HEAD and the guard refuses the rest: a bound all the same

// The head of the request this worker thread answers (HttpSide::Answer sets it around cpp-httplib's
// parse): the Host check and the query's strict decoding judge its raw bytes, not cpp-httplib's
// percent-decoded copies (which turned "localhost%00.evil" into "localhost").
thread_local const RequestHead* current_head = nullptr;

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void SendJson(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_header("Cache-Control", "no-store");
  res.set_content(Dump(body) + "\n", "application/json");
}

void SendError(httplib::Response& res, const Error& e) { SendJson(res, HttpStatusOf(e.kind), ErrorBody(e)); }

Query QueryOf(const httplib::Request& req) {
  Query q;
  for (const auto& [k, v] : req.params) q.emplace(k, v);  // emplace keeps the first of a name
  return q;
}

// The daemon's reply without the protocol's own fields.
json Body(json reply) {
  reply.erase("v");
  reply.erase("ok");
  return reply;
}

std::string Hostname() {
  char host[256] = {};
  return gethostname(host, sizeof host - 1) == 0 ? host : "";
}

// Why binding `host`:`port` fails, for the error line (cpp-httplib says only that it did).
std::string BindProblem(const ListenAddress& a) {
  addrinfo hints{}, *found = nullptr;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  if (int rc = getaddrinfo(a.host.c_str(), std::to_string(a.port).c_str(), &hints, &found); rc != 0)
    return fmt::format("{} is no address of this machine ({})", a.host, gai_strerror(rc));
  std::string why = "unknown reason";
  int fd = socket(found->ai_family, found->ai_socktype | SOCK_CLOEXEC, found->ai_protocol);
  int one = 1;
  if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (fd < 0 || bind(fd, found->ai_addr, found->ai_addrlen) != 0) why = std::strerror(errno);
  if (fd >= 0) close(fd);
  freeaddrinfo(found);
  return why;
}

// cpp-httplib compresses a response with Brotli at its highest quality whenever the client accepts
// it (browsers do): 400 ms for the dashboard's 60 KB script on a busy 2-core machine. gzip (cheap)
// stays; a request's "br" is dropped before any route sees it.
void NoBrotli(httplib::Request& req) {
  auto it = req.headers.find("Accept-Encoding");
  if (it == req.headers.end() || it->second.find("br") == std::string::npos) return;
  it->second = it->second.find("gzip") != std::string::npos ? "gzip" : "identity";
}

// Someone else's bytes for a line of text: printable ASCII kept, the rest as \xNN, at most 100.
std::string Printable(const std::string& raw) {
  std::string out;
  for (unsigned char c : raw.substr(0, 100)) out += c >= 0x20 && c < 0x7f ? std::string(1, static_cast<char>(c)) : fmt::format("\\x{:02x}", c);
  return out;
}

class Routes {
 public:
  Routes(const WebOptions& o, bool dashboard, const Clock& clock)
      : o_(o), clock_(clock), client_(o.socket_path, clock), allowed_(AllowedHosts(o.listen.host, o.allowed_hosts)),
        hostname_(Hostname()), dashboard_(dashboard) {}

  // Before any route or file: read-only, and only for the names this server is known by.
  httplib::Server::HandlerResponse Guard(const httplib::Request& req, httplib::Response& res) {
    NoBrotli(const_cast<httplib::Request&>(req));
    if (req.method != "GET" && req.method != "HEAD") {
      res.set_header("Allow", "GET, HEAD");
      res.set_header("Connection", "close");
      SendJson(res, 405, {{"error", fmt::format("{} is not allowed: this server is read-only (GET and HEAD)", req.method)},
                          {"code", "method_not_allowed"}});
      return httplib::Server::HandlerResponse::Handled;
    }
    static const RequestHead kNoHead;  // (none outside HttpSide::Answer: no Host, so refused)
    const RequestHead& head = current_head ? *current_head : kNoHead;
    if (head.hosts.size() > 1) {
      SendJson(res, 400, {{"error", "a request has one Host header, not several"}, {"code", "invalid_argument"}});
      return httplib::Server::HandlerResponse::Handled;
    }
    const std::string host = head.hosts.empty() ? "" : head.hosts.front();
    if (!HostAllowed(host, allowed_)) {
      res.status = 403;
      res.set_content(fmt::format("403: this gpulane server answers only to the host names it is known by, not '{}' "
                                  "(add the name to web.allowed_hosts in /etc/gpulane/config.toml, docs/config.md)\n",
                                  Printable(host)),
                      "text/plain; charset=utf-8");
      return httplib::Server::HandlerResponse::Handled;
    }
    if (gpulane::Status target = CheckTarget(head.target); !target) {
      SendError(res, target.error());
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  }

  void Metrics(const httplib::Request&, httplib::Response& res) {
    auto reply = client_.Ask({{"op", "metrics"}});
    if (!reply) {
      res.status = HttpStatusOf(reply.error().kind);
      res.set_content("# gpulane: " + reply.error().message + "\n", "text/plain; charset=utf-8");
      return;
    }
    res.set_header("Cache-Control", "no-store");
    res.set_content(reply->value("text", ""), kMetricsType);
  }

  void Status(const httplib::Request& req, httplib::Response& res) {
    auto snapshot = client_.Ask({{"op", "snapshot"}, {"sensors", true}, {"utilization", true}, {"topology", false}});
    if (!snapshot) return SendError(res, snapshot.error());
    auto queue = client_.Ask({{"op", "queue"}});
    if (!queue && queue.error().kind != ErrorKind::kInvalidArgument) return SendError(res, queue.error());
    // Too many jobs for one reply (over 10,000 unfinished): the GPUs still, and why the queue is not.
    if (!queue) queue = json{{"jobs", json::array()}, {"warnings", {"the queue is not shown: " + queue.error().message}}};
    auto telemetry = client_.Ask({{"op", "telemetry"}});  // unavailable with the sampler off: readings from the snapshot
    json view = StatusView((*snapshot)["snapshot"], telemetry ? *telemetry : json(), *queue, o_.show_commands, hostname_);
    // ?history=1h: each GPU's points since then too, so that a page draws its charts after one round trip;
    // with &columns=1 as one array a field (the dashboard's: no object a point to build and parse).
    const bool columns = req.has_param("columns") && req.get_param_value("columns") != "0";
    if (req.has_param("history") && telemetry)
      for (auto& g : view["gpus"]) {
        auto request = ChartHistoryRequest({{"gpu", std::to_string(g.value("index", 0))}, {"since", req.get_param_value("history")}},
                                           NowS(), kChartPoints);
        if (!request) return SendError(res, request.error());
        auto history = client_.Ask(*request);
        if (history) g["history"] = ChartHistory(*history, kChartPoints, columns);
      }
    SendJson(res, 200, view);
  }

  void Queue(const httplib::Request&, httplib::Response& res) {
    auto queue = client_.Ask({{"op", "queue"}});
    if (!queue) return SendError(res, queue.error());
    json out = QueueView(*queue, o_.show_commands);
    out["warnings"] = queue->value("warnings", json::array());
    SendJson(res, 200, out);
  }

  // history and report: the query becomes one daemon request, its reply the answer.
  void Pass(Result<json> (*make)(const Query&, double), const httplib::Request& req, httplib::Response& res) {
    auto request = make(QueryOf(req), NowS());
    if (!request) return SendError(res, request.error());
    auto reply = client_.Ask(*request);
    if (!reply) return SendError(res, reply.error());
    SendJson(res, 200, Body(std::move(reply).value()));
  }

  void Server(const httplib::Request&, httplib::Response& res) {
    SendJson(res, 200, {{"hostname", hostname_}, {"show_commands", o_.show_commands}, {"peers", o_.peers},
                        {"dashboard", dashboard_}, {"api", 1}});
  }

  // The daemon's current anomalies and the last day's events; a daemon whose sampler is off (or
  // one older than events) answers with an error: then nothing is detected here.
  void Anomalies(const httplib::Request&, httplib::Response& res) {
    const double since_s = NowS() - 86400;
    auto reply = client_.Ask({{"op", "events"}, {"since_s", since_s}, {"limit", 1000}});
    if (!reply) {
      if (reply.error().message.find("telemetry is off") == std::string::npos) return SendError(res, reply.error());
      return SendJson(res, 200, {{"supported", false}, {"anomalies", json::array()}, {"recent", json::array()}});
    }
    SendJson(res, 200, AnomaliesView(*reply));
  }

 private:
  // The wall clock in whole seconds, as time(2) gives it.
  double NowS() const { return std::floor(clock_.WallS()); }

  const WebOptions& o_;
  const Clock& clock_;
  DaemonClient client_;
  std::vector<std::string> allowed_;
  std::string hostname_;
  bool dashboard_;
};

void Install(httplib::Server& svr, Routes& r, const std::string& static_dir, const WebOptions& o) {
  using Req = const httplib::Request&;
  using Res = httplib::Response&;
  svr.set_pre_routing_handler([&r](Req req, Res res) { return r.Guard(req, res); });
  svr.Get("/metrics", [&r](Req q, Res s) { r.Metrics(q, s); });
  svr.Get("/api/v1/status", [&r](Req q, Res s) { r.Status(q, s); });
  svr.Get("/api/v1/queue", [&r](Req q, Res s) { r.Queue(q, s); });
  svr.Get("/api/v1/history", [&r](Req q, Res s) { r.Pass(HistoryRequest, q, s); });
  svr.Get("/api/v1/report", [&r](Req q, Res s) { r.Pass(ReportRequest, q, s); });
  svr.Get("/api/v1/server", [&r](Req q, Res s) { r.Server(q, s); });
  svr.Get("/api/v1/anomalies", [&r](Req q, Res s) { r.Anomalies(q, s); });
  std::string frames = "'none'";
  for (const auto& peer : o.peers) frames = frames == "'none'" ? peer : frames + " " + peer;
  const std::string csp = "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; object-src 'none'; "
                          "base-uri 'none'; frame-src " + frames;
  if (!static_dir.empty()) {
    svr.set_mount_point("/", static_dir, {{"Cache-Control", "no-cache"}, {"Content-Security-Policy", csp}});
  } else {
    svr.Get("/", [](Req, Res s) { s.set_content(NotBuiltPage(), "text/html; charset=utf-8"); });
  }
  svr.set_error_handler([](Req, Res res) {
    if (res.body.empty()) res.set_content(fmt::format("{}\n", res.status), "text/plain; charset=utf-8");
  });
  svr.set_default_headers({{"X-Content-Type-Options", "nosniff"}, {"Referrer-Policy", "no-referrer"}});
  // SO_REUSEADDR alone: cpp-httplib's default adds SO_REUSEPORT, which would let another process of
  // the same user bind the same port beside this one and take some of its connections.
  svr.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  // A response goes out in two writes (head, body): with Nagle's algorithm the second waits for the
  // client's delayed ACK of the first, 40 ms on Linux, eight times the /metrics target.
  svr.set_tcp_nodelay(true);
  svr.set_payload_max_length(kMaxBodyBytes);
  const LoopLimits limits;  // the connections' limits are web/conn_loop's; these only word its Keep-Alive header
  svr.set_keep_alive_max_count(static_cast<std::size_t>(limits.max_requests));
  svr.set_keep_alive_timeout(static_cast<time_t>(limits.idle_s));
}

// cpp-httplib answers one request a call here, from the head web/conn_loop read; the connection
// is the loop's (its accept loop, thread pool and keep-alive loop are not used).
class HttpSide final : public httplib::Server {
 public:
  explicit HttpSide(const Clock& clock) : clock_(clock) {}
  // The listening socket bind_to_port made, non-blocking, with a backlog for bursts of connections.
  int PrepareListenFd() const {
    const int fd = svr_sock_;
    ::listen(fd, 1024);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    return fd;
  }
  bool Answer(const Exchange& x) {
    HeadStream stream(x, clock_);
    bool closed = false;
    current_head = &x.head;
    const bool written = process_request(stream, x.last, closed, nullptr);
    current_head = nullptr;
    return written && !closed && !x.last;
  }

 private:
  // The exchange's head to read, its connection to write to until its deadline.
  class HeadStream final : public httplib::Stream {
   public:
    HeadStream(const Exchange& x, const Clock& clock) : x_(x), clock_(clock) {}
    bool is_readable() const override { return read_ < x_.head_bytes.size(); }
    bool is_writable() const override { return WaitWritable(); }
    ssize_t read(char* ptr, size_t size) override {
      const std::size_t n = std::min(size, x_.head_bytes.size() - read_);
      std::memcpy(ptr, x_.head_bytes.data() + read_, n);
      read_ += n;
      return static_cast<ssize_t>(n);
    }
    ssize_t write(const char* ptr, size_t size) override {
      for (std::size_t done = 0; done < size;) {
        if (!WaitWritable()) return -1;  // past the deadline: a client that does not read holds no worker longer
        const ssize_t n = send(x_.fd, ptr + done, size - done, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && errno != EAGAIN && errno != EINTR) return -1;
        done += n > 0 ? static_cast<std::size_t>(n) : 0;
      }
      return static_cast<ssize_t>(size);
    }
    void get_remote_ip_and_port(std::string& ip, int& port) const override { Name(getpeername, ip, port); }
    void get_local_ip_and_port(std::string& ip, int& port) const override { Name(getsockname, ip, port); }
    socket_t socket() const override { return x_.fd; }

   private:
    bool WaitWritable() const {
      const auto left = static_cast<long long>((x_.deadline_s - clock_.MonotonicS()) * 1000);  // truncated, as before
      pollfd p{x_.fd, POLLOUT, 0};
      return left > 0 && poll(&p, 1, static_cast<int>(left)) > 0 && (p.revents & POLLOUT);
    }
    void Name(int (*get)(int, sockaddr*, socklen_t*), std::string& ip, int& port) const {
      sockaddr_storage a{};
      socklen_t len = sizeof a;
      char host[NI_MAXHOST] = {}, serv[NI_MAXSERV] = {};
      if (get(x_.fd, reinterpret_cast<sockaddr*>(&a), &len) != 0 ||
          getnameinfo(reinterpret_cast<sockaddr*>(&a), len, host, sizeof host, serv, sizeof serv, NI_NUMERICHOST | NI_NUMERICSERV) != 0)
        return;
      ip = host;
      port = std::atoi(serv);
    }
    const Exchange& x_;
    const Clock& clock_;
    std::size_t read_ = 0;
  };
  const Clock& clock_;
};

}  // namespace

int Serve(const WebOptions& options, const std::string& static_dir, const Clock& clock) {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&stop_signals, sig);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);  // before any thread: only the waiter below takes them
  signal(SIGPIPE, SIG_IGN);

  HttpSide svr(clock);
  Routes routes(options, !static_dir.empty(), clock);
  Install(svr, routes, static_dir, options);
  const ListenAddress& a = options.listen;
  int port = a.port;
  const bool bound = a.port == 0 ? (port = svr.bind_to_any_port(a.host)) > 0 : svr.bind_to_port(a.host, a.port);
  if (!bound) {
    fmt::print(stderr, "gpulane-web: error: cannot listen on {}:{}: {} (choose another [web] listen in docs/config.md, or "
                       "\"off\")\n", a.host, a.port, BindProblem(a));
    return kExitFailure;
  }
  ConnLoop loop(svr.PrepareListenFd(), LoopLimits{}, [&svr](const Exchange& x) { return svr.Answer(x); }, clock);
  std::thread waiter([&loop, stop_signals] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    loop.Stop();
  });
  const std::string shown = a.host.find(':') != std::string::npos ? "[" + a.host + "]" : a.host;
  fmt::print(stderr, "gpulane-web: listening on http://{}:{}/ (daemon {}, dashboard {})\n", shown, port, options.socket_path,
             static_dir.empty() ? "not built" : static_dir);
  std::fflush(stderr);
  if (options.ready_fd >= 0) {
    // A wildcard address: a name the Host check lets through (web.allowed_hosts), else loopback.
    const bool wildcard = a.host == "0.0.0.0" || a.host == "::";
    const std::string host = !wildcard ? shown : !options.allowed_hosts.empty() ? options.allowed_hosts.front()
                                               : a.host == "::" ? "[::1]" : "127.0.0.1";
    const std::string url = fmt::format("http://{}:{}/\n", host, port);
    if (write(options.ready_fd, url.data(), url.size()) < 0)
      fmt::print(stderr, "gpulane-web: cannot tell the daemon its URL: {}\n", std::strerror(errno));
    close(options.ready_fd);
  }
  loop.Run();
  pthread_kill(waiter.native_handle(), SIGTERM);  // stopped otherwise: end the waiter too
  waiter.join();
  return kExitOk;
}

}  // namespace gpulane::web
