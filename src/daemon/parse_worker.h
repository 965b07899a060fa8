// One thread that parses large request frames off the daemon's event loop: JSON parsing runs at
// tens of milliseconds for a submission of a few MiB (bench/daemon_latency.py: a refused 4 MiB one
// took 35 ms of the loop, bench/results/daemon_latency-2026-12-01-idle.md), and a frame may be 8 MiB
// (proto::kMaxRequestBytes): parsed in the loop, every other client waited (issue 9, item 5). The loop hands a frame over, stops reading that
// connection (Connection::parsing) and goes on serving; event_fd() becomes readable when parsed
// requests wait, which Take() returns in the order they were handed over. Parsing is pure: the
// thread touches nothing but its queue.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

namespace gpulane::daemon {

class ParseWorker {
 public:
  /// A parsed frame of connection (fd, serial).
  struct Parsed {
    int fd = -1;
    std::uint64_t serial = 0;    ///< Connection::serial
    std::size_t bytes = 0;       ///< the frame's size
    bool too_deep = false;       ///< nested deeper than proto::kMaxRequestDepth: not parsed
    nlohmann::json request;      ///< discarded (is_discarded()) when the frame is not JSON
  };
  /// Starts the thread. Errors are not possible but eventfd's failure, after which available()
  /// is false and frames are parsed in the loop as before.
  ParseWorker();
  /// Stops the thread (after the frame it is parsing) and joins it.
  ~ParseWorker();
  ParseWorker(const ParseWorker&) = delete;
  ParseWorker& operator=(const ParseWorker&) = delete;
  bool available() const { return event_fd_ >= 0; }
  /// Readable (POLLIN) when Take has something.
  int event_fd() const { return event_fd_; }
  /// Queues `payload` of connection (fd, serial) to be parsed.
  void Parse(int fd, std::uint64_t serial, std::string payload);
  /// The frames parsed since the last call, in the order they were queued.
  std::vector<Parsed> Take();

 private:
  struct Frame {
    int fd;
    std::uint64_t serial;
    std::string payload;
  };
  void Run();
  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<Frame> todo_;
  std::vector<Parsed> done_;
  bool stop_ = false;
  int event_fd_ = -1;
  std::thread thread_;
};

}  // namespace gpulane::daemon
