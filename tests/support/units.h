#pragma once
// The byte units tests write sizes in, defined once: the test programs are compiled in batches
// (tests/CMakeLists.txt, GPULANE_UNITY_TESTS), where a file-local copy in one file would collide
// with another file's.
#include <cstdint>

namespace gpulane {

inline constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;
inline constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;

}  // namespace gpulane
