#include "daemon/launcher.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "exec/job_runner.h"
#include "util/strings.h"

namespace gpulane::daemon {

void ForkExecLauncher::Signal(std::int64_t, pid_t pid, int signal) {
  if (pid <= 1) return;
  // A cancel's SIGTERM carries the mark that lets the supervisor say in the job's log that it was
  // cancelled (exec::JobOutcome::stop_signal_cancel); SIGTERM is sent for nothing else.
  sigval mark{};
  mark.sival_int = exec::kCancelSignalValue;
  if (signal == SIGTERM) sigqueue(pid, signal, mark);
  else kill(pid, signal);
}

Status ForkExecLauncher::Start(std::int64_t id) {
  // Everything the child needs is made before the fork: between fork and exec it only calls
  // async-signal-safe functions.
  const std::string id_text = std::to_string(id);
  const auto first = [&] {
    for (int fd : close_in_child_) close(fd);
    rlimit files{};
    if (child_file_limit_ && getrlimit(RLIMIT_NOFILE, &files) == 0) {
      files.rlim_cur = static_cast<rlim_t>(child_file_limit_);
      setrlimit(RLIMIT_NOFILE, &files);
    }
  };
  const auto supervisor = [&] {
    int null_fd = open("/dev/null", O_RDONLY);
    int log_fd = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    dup2(null_fd, 0);
    dup2(log_fd, 1);
    dup2(log_fd, 2);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    signal(SIGPIPE, SIG_DFL);
    execl(self_exe_.c_str(), "gpulane", "_supervise", jobs_dir_.c_str(), id_text.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  };
  // Detached so the supervisor outlives this daemon and is nobody's child but init's.
  if (Status started = spawner_.StartDetached(first, supervisor); !started.ok())
    return MakeError(ErrorKind::kIo, StrCat("cannot start the supervisor of job ", id, ": ", started.error().message));
  return Status::Ok();
}

}  // namespace gpulane::daemon
