#pragma once
// One line for people on stderr that never throws. fmt::print(stderr, ...) throws std::system_error
// when the write fails, and a supervisor's stderr is a file in the state folder, which may be full:
// the supervisor must go on (record its job's end) whatever becomes of its notes. The line is
// formatted first and written with one write(2); a failed or short write is ignored.
#include <unistd.h>

#include <string>
#include <utility>

#include <fmt/format.h>

namespace gpulane {

template <typename... Args>
void Say(fmt::format_string<Args...> format, Args&&... args) noexcept {
  try {
    const std::string line = fmt::format(format, std::forward<Args>(args)...);
    (void)!write(STDERR_FILENO, line.data(), line.size());
  } catch (...) {  // out of memory while formatting: the note is lost, not the caller
  }
}

}  // namespace gpulane
