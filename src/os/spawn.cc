#include "os/spawn.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "util/strings.h"

namespace gpulane::os {

Result<pid_t> SystemSpawner::Start(InChild in_child) {
  const pid_t child = fork();
  if (child < 0) return MakeError(ErrorKind::kIo, StrCat("fork: ", std::strerror(errno)));
  if (child == 0) {
    in_child();
    _exit(127);
  }
  return child;
}

Status SystemSpawner::StartDetached(InChild first, InChild in_child) {
  const pid_t child = fork();
  if (child < 0) return MakeError(ErrorKind::kIo, StrCat("fork: ", std::strerror(errno)));
  if (child == 0) {
    first();
    setsid();
    if (fork() != 0) _exit(0);  // the grandchild goes on, nobody's child but init's
    in_child();
    _exit(127);
  }
  while (waitpid(child, nullptr, 0) < 0 && errno == EINTR) {
  }
  return Status::Ok();
}

}  // namespace gpulane::os
