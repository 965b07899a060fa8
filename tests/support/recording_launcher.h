#pragma once
// A SupervisorLauncher for unit tests of the daemon's job table: it starts nothing and records
// which jobs it was asked to start (header-only: unit tests link the core library, which has the
// interface).
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
  std::vector<std::int64_t> started;            ///< every Start, in order
  std::function<void(std::int64_t id)> on_start;
  Status result = Status::Ok();                 ///< what Start returns
};

}  // namespace gpulane::test
