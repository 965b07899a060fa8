#pragma once
// Helpers for the scheduling tests, defined once (the test programs are compiled in batches:
// tests/CMakeLists.txt, GPULANE_UNITY_TESTS).
#include <string>

#include "sched/policy.h"

namespace gpulane::sched {

/// A decision's reasons as one line, "[reason] [reason] ", for a test's message.
inline std::string ReasonsOf(const Decision& d) {
  std::string all;
  for (const auto& r : d.reasons) all += "[" + r + "] ";
  return all;
}

/// Limits with no memory margin.
inline const Limits kNoMargin{0};

}  // namespace gpulane::sched
