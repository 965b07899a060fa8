#include "cli/watch_frames.h"

#include <signal.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <ctime>

#include "util/exit_codes.h"

namespace gpulane::cli {
namespace {

volatile sig_atomic_t g_watch_stop = 0;
void OnWatchStopSignal(int) { g_watch_stop = 1; }

// Sleeps up to `seconds`, returning early when a stop signal arrives.
void SleepUnlessWatchStopped(double seconds) {
  timespec ts{static_cast<time_t>(seconds), static_cast<long>(std::fmod(seconds, 1.0) * 1e9)};
  while (!g_watch_stop && nanosleep(&ts, &ts) == -1 && errno == EINTR) {
  }
}

// `frame` drawn over the last one: home (the first: the screen cleared), each line cleared to its
// end, then everything below.
std::string RedrawnInPlace(const std::string& frame, bool first) {
  std::string out = first ? "\x1b[2J\x1b[H" : "\x1b[H";
  for (std::size_t start = 0; start < frame.size();) {
    std::size_t end = frame.find('\n', start);
    if (end == std::string::npos) end = frame.size();
    out += frame.substr(start, end - start) + "\x1b[K\n";
    start = end + 1;
  }
  return out + "\x1b[J";
}

}  // namespace

int WatchFrames(double interval_s, long frames, bool redraw, const std::function<Frame(bool first)>& render) {
  struct sigaction sa {};
  sa.sa_handler = OnWatchStopSignal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  for (bool first = true; !g_watch_stop; first = false) {
    const Frame frame = render(first);
    if (const int* failed = std::get_if<int>(&frame)) return *failed;
    const std::string& text = std::get<std::string>(frame);
    const std::string out = redraw ? RedrawnInPlace(text, first) : text;
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::fflush(stdout);
    if (frames > 0 && --frames == 0) break;
    SleepUnlessWatchStopped(interval_s);
  }
  return kExitOk;
}

}  // namespace gpulane::cli
