#include "util/timing.h"

#include <chrono>
#include <cstdlib>
#include <fmt/format.h>

namespace gpulane {

void TimingMark(const char* label) {
  static const bool enabled = std::getenv("GPULANE_TIMING") != nullptr;
  if (!enabled) return;
  static auto last = std::chrono::steady_clock::now();
  auto now = std::chrono::steady_clock::now();
  fmt::print(stderr, "gpulane: timing: {} +{:.2f} ms\n", label, std::chrono::duration<double, std::milli>(now - last).count());
  last = now;
}

}  // namespace gpulane
