#pragma once
// A SupervisorLauncher for unit tests of the daemon's job table: it starts and signals nothing and
// records which jobs it was asked to start and which supervisors to signal (header-only: unit tests
// link the core library, which has the interface).
#include <cstdint>
#include <functional>
#include <vector>

#include "daemon/launcher.h"

namespace gpulane::test {

class RecordingLauncher final : public daemon::SupervisorLauncher {
 public:
  /// Records `id`, calls on_start (a test's check of what holds at that moment) and returns result.
  Status Start(std::int64_t id) override {
    started.push_back(id);
    if (on_start) on_start(id);
    return result;
  }
  /// Records the signal instead of sending it, and calls on_signal (a test's check of what holds
  /// at that moment).
  void Signal(std::int64_t id, pid_t pid, int signal) override {
    signals.push_back({id, pid, signal});
    if (on_signal) on_signal(id, signal);
  }
  struct Sent {
    std::int64_t id;
    pid_t pid;
    int signal;
    bool operator==(const Sent&) const = default;
  };
  /// The signals sent to job `id`'s supervisor, in order.
  std::vector<int> SignalsTo(std::int64_t id) const {
    std::vector<int> out;
    for (const Sent& s : signals)
      if (s.id == id) out.push_back(s.signal);
    return out;
  }
  std::vector<std::int64_t> started;            ///< every Start, in order
  std::vector<Sent> signals;                    ///< every Signal, in order
  std::function<void(std::int64_t id)> on_start;
  std::function<void(std::int64_t id, int signal)> on_signal;
  Status result = Status::Ok();                 ///< what Start returns
};

}  // namespace gpulane::test
