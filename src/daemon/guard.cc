#include "daemon/guard.h"

#include <unistd.h>

#include <cstring>

namespace gpulane::daemon {

std::string NoteUnexpected(std::string_view what, const char* error, const LogSink& log) noexcept {
  try {
    std::string text = error;
    try {
      log("unexpected error while " + std::string(what) + ": " + text + "; going on");
    } catch (...) {
      constexpr const char kLost[] = "gpulane-daemon: unexpected error (and could not log it); going on\n";
      (void)!write(2, kLost, sizeof kLost - 1);
    }
    return text;
  } catch (...) {
    return std::string();
  }
}

}  // namespace gpulane::daemon
