// The lease directory's decision lock (lease_dir.h, DirLock): flock(2) on the directory, with the
// terminal's stop signals held back while it is held.
#include <pthread.h>
#include <signal.h>
#include <sys/file.h>

#include <cerrno>

#include "lease/lease_dir.h"

namespace gpulane::lease {

DirLock::DirLock(int fd) : fd_(fd) {
  sigset_t stops, before;
  sigemptyset(&stops);
  sigemptyset(&blocked_here_);
  for (int sig : {SIGTSTP, SIGTTIN, SIGTTOU}) sigaddset(&stops, sig);
  pthread_sigmask(SIG_BLOCK, &stops, &before);
  for (int sig : {SIGTSTP, SIGTTIN, SIGTTOU})
    if (sigismember(&before, sig) == 0) sigaddset(&blocked_here_, sig);
  while (flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
  }
}

DirLock::~DirLock() {
  if (fd_ < 0) return;
  flock(fd_, LOCK_UN);
  pthread_sigmask(SIG_UNBLOCK, &blocked_here_, nullptr);  // a Ctrl-Z that came meanwhile stops it now
}

}  // namespace gpulane::lease
