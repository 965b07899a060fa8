#include "support/web_daemon.h"

#include <cstdlib>
#include <vector>

#include <gtest/gtest.h>

namespace gpulane::test {
namespace {

// The numbers following `marker` in `text`, in order.
std::vector<long> NumbersAfter(const std::string& text, const std::string& marker) {
  std::vector<long> out;
  for (auto pos = text.find(marker); pos != std::string::npos; pos = text.find(marker, pos + 1))
    out.push_back(std::strtol(text.c_str() + pos + marker.size(), nullptr, 10));
  return out;
}

}  // namespace

int WebPort(const TestDaemon& d, int nth, double timeout_s) {
  const std::string marker = "gpulane-web: listening on http://127.0.0.1:";
  if (!Eventually([&] { return NumbersAfter(d.Log(), marker).size() >= static_cast<std::size_t>(nth); }, timeout_s)) {
    ADD_FAILURE() << "gpulane-web #" << nth << " did not say where it listens; the daemon's log:\n" << d.Log();
    return 0;
  }
  return static_cast<int>(NumbersAfter(d.Log(), marker)[nth - 1]);
}

pid_t WebPid(const TestDaemon& d, int nth) {
  auto pids = NumbersAfter(d.Log(), "started gpulane-web (pid ");
  return pids.size() >= static_cast<std::size_t>(nth) ? static_cast<pid_t>(pids[nth - 1]) : -1;
}

}  // namespace gpulane::test
