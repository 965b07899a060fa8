#include "exec/gpu_cleanup.h"

#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>

namespace gpulane::exec {
namespace {

int PidfdOpen(pid_t pid) { return static_cast<int>(syscall(SYS_pidfd_open, pid, 0)); }
int PidfdSignal(int fd, int sig) { return static_cast<int>(syscall(SYS_pidfd_send_signal, fd, sig, nullptr, 0)); }

struct Held {
  pid_t pid;
  int fd;
};

// Waits until every pidfd in `held` is readable (its process ended) or `seconds` passed; moves the
// ended ones to `ended` and closes their descriptors.
void WaitEnded(std::vector<Held>& held, double seconds, std::vector<pid_t>& ended, const Clock& clock) {
  const double deadline_s = clock.MonotonicS() + seconds;
  while (!held.empty()) {
    std::vector<pollfd> fds;
    for (const Held& h : held) fds.push_back({h.fd, POLLIN, 0});
    const auto left_ms = static_cast<long long>((deadline_s - clock.MonotonicS()) * 1000);  // truncated, as before
    const int n = poll(fds.data(), fds.size(), static_cast<int>(std::max<long long>(0, left_ms)));
    if (n < 0 && errno == EINTR) continue;
    std::vector<Held> still;
    for (std::size_t i = 0; i < held.size(); ++i) {
      if (n > 0 && (fds[i].revents & (POLLIN | POLLHUP))) {
        ended.push_back(held[i].pid);
        close(held[i].fd);
      } else {
        still.push_back(held[i]);
      }
    }
    held = std::move(still);
    if (n <= 0) return;  // the deadline passed (or poll failed)
  }
}

}  // namespace

EndedProcesses EndProcesses(const std::vector<pid_t>& pids, double grace_s, const Clock& clock) {
  EndedProcesses result;
  std::vector<Held> held;
  for (pid_t pid : pids) {
    if (pid <= 1 || pid == getpid()) continue;
    const int fd = PidfdOpen(pid);
    if (fd < 0) {
      (errno == ESRCH ? result.gone : result.survived).push_back(pid);
      continue;
    }
    if (PidfdSignal(fd, SIGTERM) != 0) {
      (errno == ESRCH ? result.gone : result.survived).push_back(pid);
      close(fd);
      continue;
    }
    held.push_back({pid, fd});
  }
  WaitEnded(held, grace_s, result.on_term, clock);
  for (const Held& h : held) PidfdSignal(h.fd, SIGKILL);
  WaitEnded(held, 1.0, result.on_kill, clock);
  for (const Held& h : held) {
    result.survived.push_back(h.pid);
    close(h.fd);
  }
  return result;
}

}  // namespace gpulane::exec
