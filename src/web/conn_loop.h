#pragma once
// gpulane-web's connections under load (docs/web.md "Under load"): one thread accepts every
// connection and reads every request's head itself, non-blocking (web/request_head.h); only a
// complete head goes to a worker of a bounded pool, and a connection kept alive goes back to that
// thread between requests. So idle, kept-alive and slow connections hold a buffer, never a
// worker; each has a deadline from its request's first byte; the number of connections is capped,
// a new one beyond the cap shedding one no worker is answering (ShedOne: those that never asked
// and slow heads before kept-alive clients between requests);
// and GET /metrics has a worker of its own besides: a scrape is answered while others hold the rest.
// No HTTP beyond the head is parsed here: a worker answers through cpp-httplib (web/http_server.cc).
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "util/clock.h"
#include "web/request_head.h"

namespace gpulane::web {

struct LoopLimits {
  std::size_t workers = 8;            ///< worker threads for every request
  std::size_t metrics_workers = 1;    ///< and more for GET /metrics alone
  std::size_t max_connections = 256;  ///< open at once (the 257th sheds one no worker holds)
  double idle_s = 5;                  ///< a connection's wait for a request's first byte (a new one, or kept alive)
  double head_s = 5;                  ///< a request's first byte to the blank line ending its head (408 beyond)
  double answer_s = 10;               ///< a request's first byte to the last byte of its answer written
  int max_requests = 100;             ///< requests on one connection (keep-alive)
  double linger_s = 1;                ///< after the server closes: the client's unread bytes drained, so the answer is not reset
  HeadLimits head;
};

/// One request handed to a worker: its connection (non-blocking), its head's bytes and verdict.
struct Exchange {
  int fd = -1;
  std::string head_bytes;  ///< the head, blank line included (what cpp-httplib parses)
  RequestHead head;        ///< its verdict: kComplete, with the raw target and Host values
  bool last = false;       ///< answer with Connection: close (its connection's last request, one with a body, not GET or HEAD)
  double deadline_s = 0;   ///< the answer is written by then (the loop's clock, MonotonicS), or given up
};

/// Answers one exchange on a worker thread; returns whether the connection stays open for another.
using ExchangeHandler = std::function<bool(const Exchange&)>;

/// Serves the connections of `listen_fd` (bound, listening, non-blocking) with `handler`; every
/// deadline is on `clock` (gpulane-web's main() passes the system's).
class ConnLoop {
 public:
  ConnLoop(int listen_fd, const LoopLimits& limits, ExchangeHandler handler, const Clock& clock);
  ~ConnLoop();
  ConnLoop(const ConnLoop&) = delete;
  ConnLoop& operator=(const ConnLoop&) = delete;
  /// Runs on the calling thread until Stop(): starts the workers, and joins them before it returns.
  void Run();
  /// Ends Run() from any thread.
  void Stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpulane::web
