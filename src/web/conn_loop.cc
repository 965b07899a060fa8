#include "web/conn_loop.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <deque>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <fmt/format.h>

namespace gpulane::web {
namespace {

using TimePoint = double;  ///< seconds on the loop's monotonic clock (the Clock it was given)

constexpr std::size_t kAcceptsPerTurn = 64;  ///< so that heads already here are read between bursts of connections

double Seconds(double s) { return s; }

struct Conn {
  // kReading: this thread's, reading a head (or idle); kQueued: a worker's, queued or being answered;
  // kDraining: the server is done with it (Linger).
  enum class State { kReading, kQueued, kDraining };
  int fd = -1;
  State state = State::kReading;
  std::string in;  ///< bytes read and not yet handed to a worker: the next request's (part of a) head
  HeadScanner scanner;
  TimePoint last_active;                ///< accepted, or its last answer written
  std::optional<TimePoint> first_byte;  ///< of the request being read
  TimePoint drain_until;
  int requests = 0;
  bool peer_closed = false;  ///< the client shut its side after a request: answered, then closed
};

// A refusal written by the accepting thread itself: a short answer, then the connection closes.
std::string Refusal(int status, const LoopLimits& l) {
  std::string reason, body;
  switch (status) {
    case 408:
      reason = "Request Timeout";
      body = fmt::format("408: the request's head did not arrive within {} s of its first byte\n", l.head_s);
      break;
    case 414:
      reason = "URI Too Long";
      body = fmt::format("414: the request line is over {} bytes\n", l.head.max_line_bytes);
      break;
    case 431:
      reason = "Request Header Fields Too Large";
      body = fmt::format("431: a request's head is at most {} bytes and {} header lines\n", l.head.max_head_bytes, l.head.max_headers);
      break;
    default:
      reason = "Bad Request";
      body = "400: not an HTTP/1.1 request head (CRLF line ends, no control bytes, no folded headers)\n";
  }
  return fmt::format("HTTP/1.1 {} {}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n"
                     "X-Content-Type-Options: nosniff\r\n\r\n{}", status, reason, body.size(), body);
}

}  // namespace

struct ConnLoop::Impl {
  Impl(int fd, const LoopLimits& l, ExchangeHandler h, const Clock& c)
      : listen_fd(fd), lim(l), handler(std::move(h)), clock(c) {}
  int listen_fd;
  LoopLimits lim;
  ExchangeHandler handler;
  const Clock& clock;
  int wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  std::atomic<bool> stopping{false};
  std::map<int, std::unique_ptr<Conn>> conns;  ///< the accepting thread's alone; a worker touches only its exchange's fd

  std::mutex mu;  ///< guards the queues and `returned`
  std::condition_variable cv, metrics_cv;  ///< the general workers', the /metrics workers'
  std::deque<Exchange> metrics_queue, queue;
  std::vector<std::pair<int, bool>> returned;  ///< fd, keep open: connections whose answer is written

  void Worker(bool metrics_only);
  void Wake() {
    const std::uint64_t one = 1;
    [[maybe_unused]] auto n = write(wake_fd, &one, sizeof one);
  }
  void Close(int fd) {
    close(fd);
    conns.erase(fd);
  }
  void Linger(Conn& c, TimePoint now);
  void Refuse(Conn& c, int status, TimePoint now);
  void Judge(Conn& c, TimePoint now);
  void Dispatch(Conn& c, const RequestHead& head);
  void OnReadable(Conn& c, TimePoint now);
  void TakeReturned(TimePoint now);
  void Expire(TimePoint now);
  int TimeoutMs(TimePoint now) const;
  bool ShedOne();
  void AcceptSome(TimePoint now);
  void Loop();
};

void ConnLoop::Impl::Worker(bool metrics_only) {
  for (;;) {
    Exchange x;
    {
      std::unique_lock lock(mu);
      (metrics_only ? metrics_cv : cv).wait(lock, [&] { return stopping || !metrics_queue.empty() || (!metrics_only && !queue.empty()); });
      if (stopping) return;
      auto& from = metrics_queue.empty() ? queue : metrics_queue;  // a scrape first, whoever takes it
      x = std::move(from.front());
      from.pop_front();
    }
    bool keep = false;
    try {
      keep = handler(x);
    } catch (...) {
      keep = false;
    }
    {
      std::lock_guard lock(mu);
      returned.emplace_back(x.fd, keep);
    }
    Wake();
  }
}

// The server is done with `c`: its side is shut, the client's last bytes are read and dropped
// for a moment (closing with them unread would reset the connection and could lose the answer).
void ConnLoop::Impl::Linger(Conn& c, TimePoint now) {
  shutdown(c.fd, SHUT_WR);
  std::string().swap(c.in);
  c.state = Conn::State::kDraining;
  c.drain_until = now + Seconds(lim.linger_s);
}

void ConnLoop::Impl::Refuse(Conn& c, int status, TimePoint now) {
  const std::string answer = Refusal(status, lim);
  [[maybe_unused]] auto n = send(c.fd, answer.data(), answer.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  Linger(c, now);
}

void ConnLoop::Impl::Dispatch(Conn& c, const RequestHead& head) {
  Exchange x;
  x.fd = c.fd;
  x.head_bytes = c.in.substr(0, head.length);
  c.in.erase(0, head.length);
  x.head = head;
  // Only GET and HEAD are answered (others get 405 and Connection: close); a body is never read.
  x.last = ++c.requests >= lim.max_requests || head.declares_body || (head.method != "GET" && head.method != "HEAD");
  x.deadline_s = *c.first_byte + Seconds(lim.answer_s);
  c.state = Conn::State::kQueued;
  c.scanner.Reset();
  c.first_byte.reset();
  const bool scrape = TargetPath(head.target) == "/metrics";
  {
    std::lock_guard lock(mu);
    (scrape ? metrics_queue : queue).push_back(std::move(x));
  }
  cv.notify_one();  // one worker, not all of them, wakes for a request
  if (scrape) metrics_cv.notify_one();
}

// What `c`'s bytes so far make: a request for a worker, a refusal, or nothing yet.
void ConnLoop::Impl::Judge(Conn& c, TimePoint now) {
  const RequestHead head = c.scanner.Scan(c.in);
  switch (head.state) {
    case HeadState::kIncomplete: return;
    case HeadState::kComplete: return Dispatch(c, head);
    case HeadState::kTooLong: return Refuse(c, 414, now);
    case HeadState::kTooLarge: return Refuse(c, 431, now);
    case HeadState::kMalformed: return Refuse(c, 400, now);
  }
}

void ConnLoop::Impl::OnReadable(Conn& c, TimePoint now) {
  char buf[4096];
  for (;;) {
    // A reading connection holds at most one head's worth (and a byte, to know it is over).
    const std::size_t cap = lim.head.max_head_bytes + 1;
    const std::size_t room = c.state == Conn::State::kDraining ? sizeof buf : std::min(sizeof buf, cap - std::min(cap, c.in.size()));
    if (room == 0) break;
    const ssize_t n = recv(c.fd, buf, room, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n == 0 && c.state == Conn::State::kReading && !c.in.empty()) {  // a request, then the client's FIN
      c.peer_closed = true;
      break;
    }
    if (n <= 0) return Close(c.fd);  // the client closed (or reset) with no request: nothing to answer
    if (c.state == Conn::State::kDraining) continue;
    if (!c.first_byte) c.first_byte = now;
    c.in.append(buf, static_cast<std::size_t>(n));
  }
  if (c.state == Conn::State::kReading) Judge(c, now);
  if (c.state == Conn::State::kReading && c.peer_closed) Close(c.fd);  // half a head and no more to come
}

void ConnLoop::Impl::TakeReturned(TimePoint now) {
  std::uint64_t count = 0;
  [[maybe_unused]] auto n = read(wake_fd, &count, sizeof count);
  std::vector<std::pair<int, bool>> done;
  {
    std::lock_guard lock(mu);
    done.swap(returned);
  }
  for (auto [fd, keep] : done) {
    Conn& c = *conns.at(fd);
    if (!keep || c.peer_closed) {
      Linger(c, now);
      continue;
    }
    c.state = Conn::State::kReading;
    c.last_active = now;
    if (!c.in.empty()) {  // the client's next request came with the last (pipelined)
      c.first_byte = now;
      Judge(c, now);
    }
  }
}

void ConnLoop::Impl::Expire(TimePoint now) {
  std::vector<int> idle;
  for (auto& [fd, c] : conns) {
    if (c->state == Conn::State::kDraining && now >= c->drain_until) idle.push_back(fd);
    if (c->state != Conn::State::kReading) continue;
    if (!c->first_byte && now - c->last_active >= Seconds(lim.idle_s)) idle.push_back(fd);
    if (c->first_byte && now - *c->first_byte >= Seconds(lim.head_s)) Refuse(*c, 408, now);
  }
  for (int fd : idle) Close(fd);
}

int ConnLoop::Impl::TimeoutMs(TimePoint now) const {
  TimePoint next = now + 1;
  for (const auto& [fd, c] : conns) {
    if (c->state == Conn::State::kDraining) next = std::min(next, c->drain_until);
    if (c->state != Conn::State::kReading) continue;
    next = std::min(next, c->first_byte ? *c->first_byte + Seconds(lim.head_s) : c->last_active + Seconds(lim.idle_s));
  }
  const auto ms = static_cast<long long>((next - now) * 1000);  // truncated, as a cast to milliseconds does
  return static_cast<int>(std::clamp<long long>(ms + 1, 0, 1000));
}

// Room for a new connection: closes one that no worker holds, the first of: one already being
// closed; the one connected longest without a request; the one whose head began longest ago (the
// slowest); the one kept alive idle longest after its answers (a dashboard between two polls goes
// last: a flood of fresh sockets sheds its own kind first).
bool ConnLoop::Impl::ShedOne() {
  auto rank = [](const Conn& c) {
    if (c.state == Conn::State::kDraining) return std::pair(0, std::numeric_limits<TimePoint>::lowest());
    if (c.first_byte) return std::pair(2, *c.first_byte);
    return std::pair(c.requests == 0 ? 1 : 3, c.last_active);
  };
  Conn* victim = nullptr;
  for (auto& [fd, c] : conns) {
    if (c->state == Conn::State::kQueued) continue;
    if (!victim || rank(*c) < rank(*victim)) victim = c.get();
  }
  if (!victim) return false;
  Close(victim->fd);
  return true;
}

void ConnLoop::Impl::AcceptSome(TimePoint now) {
  for (std::size_t i = 0; i < kAcceptsPerTurn; ++i) {
    const int fd = accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0 && (errno == EMFILE || errno == ENFILE) && ShedOne()) continue;  // out of descriptors: make room
    if (fd < 0) return;
    if (conns.size() >= lim.max_connections && !ShedOne()) {
      close(fd);
      continue;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    auto c = std::make_unique<Conn>();
    c->fd = fd;
    c->last_active = now;
    c->scanner = HeadScanner(lim.head);
    conns[fd] = std::move(c);
  }
}

void ConnLoop::Impl::Loop() {
  std::vector<pollfd> fds;
  while (!stopping) {
    fds.assign({pollfd{wake_fd, POLLIN, 0}, pollfd{listen_fd, POLLIN, 0}});
    for (const auto& [fd, c] : conns)
      if (c->state == Conn::State::kReading || c->state == Conn::State::kDraining) fds.push_back(pollfd{fd, POLLIN, 0});
    if (poll(fds.data(), fds.size(), TimeoutMs(clock.MonotonicS())) < 0 && errno != EINTR) break;
    const TimePoint now = clock.MonotonicS();
    if (fds[0].revents) TakeReturned(now);
    for (std::size_t i = 2; i < fds.size(); ++i) {
      auto it = conns.find(fds[i].fd);
      if (fds[i].revents && it != conns.end() && it->second->state != Conn::State::kQueued) OnReadable(*it->second, now);
    }
    Expire(now);
    if (fds[1].revents & POLLIN) AcceptSome(now);
  }
}

ConnLoop::ConnLoop(int listen_fd, const LoopLimits& limits, ExchangeHandler handler, const Clock& clock)
    : impl_(std::make_unique<Impl>(listen_fd, limits, std::move(handler), clock)) {}

ConnLoop::~ConnLoop() {
  for (auto& [fd, c] : impl_->conns) close(fd);
  if (impl_->wake_fd >= 0) close(impl_->wake_fd);
}

void ConnLoop::Run() {
  Impl& m = *impl_;
  std::vector<std::thread> workers;
  for (std::size_t i = 0; i < m.lim.workers + m.lim.metrics_workers; ++i)
    workers.emplace_back([&m, metrics_only = i >= m.lim.workers] { m.Worker(metrics_only); });
  m.Loop();
  {
    std::lock_guard lock(m.mu);
    m.stopping = true;
  }
  m.cv.notify_all();
  m.metrics_cv.notify_all();
  for (auto& w : workers) w.join();
}

void ConnLoop::Stop() {
  impl_->stopping = true;
  impl_->Wake();
}

}  // namespace gpulane::web
