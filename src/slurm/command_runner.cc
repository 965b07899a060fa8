#include "slurm/command_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fmt/format.h>

extern char** environ;

namespace gpulane::slurm {
namespace {

// Reads both pipes until both are closed (poll, so neither fills up while the other is read).
Status Drain(int out_fd, int err_fd, CommandOutput& output) {
  struct pollfd fds[2] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};
  std::string* sinks[2] = {&output.stdout_text, &output.stderr_text};
  int open_fds = 2;
  char buffer[65536];
  while (open_fds > 0) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return MakeError(ErrorKind::kIo, fmt::format("poll: {}", std::strerror(errno)));
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t n = read(fds[i].fd, buffer, sizeof buffer);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      } else {
        sinks[i]->append(buffer, static_cast<std::size_t>(n));
      }
    }
  }
  return Status::Ok();
}

}  // namespace

Result<CommandOutput> RealCommandRunner::Run(const std::vector<std::string>& argv) {
  if (argv.empty()) return MakeError(ErrorKind::kInternal, "no command to run");
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) return MakeError(ErrorKind::kIo, fmt::format("pipe: {}", std::strerror(errno)));
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    close(out_pipe[0]);
    close(out_pipe[1]);
    return MakeError(ErrorKind::kIo, fmt::format("pipe: {}", std::strerror(errno)));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int spawned = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (spawned != 0) {
    close(out_pipe[0]);
    close(err_pipe[0]);
    return MakeError(ErrorKind::kUnavailable,
                     fmt::format("cannot run {}: {}; install Slurm's client commands (Debian: slurm-client) or "
                                 "put them on PATH",
                                 argv[0], std::strerror(spawned)));
  }
  CommandOutput output;
  Status drained = Drain(out_pipe[0], err_pipe[0], output);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!drained.ok()) return drained.error();
  output.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (output.exit_code == 127 && output.stdout_text.empty())
    return MakeError(ErrorKind::kUnavailable, fmt::format("cannot run {}: not found; install Slurm's client commands "
                                                          "(Debian: slurm-client) or put them on PATH", argv[0]));
  return output;
}

std::string DescribeFailure(const std::vector<std::string>& argv, const CommandOutput& output) {
  std::string first = output.stderr_text.substr(0, output.stderr_text.find('\n'));
  if (first.empty()) first = output.stdout_text.substr(0, output.stdout_text.find('\n'));
  return fmt::format("{} failed (exit {}){}{}", argv.empty() ? "?" : argv[0], output.exit_code, first.empty() ? "" : ": ",
                     first);
}

}  // namespace gpulane::slurm
