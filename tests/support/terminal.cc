#include "support/terminal.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <stdexcept>

namespace gpulane::test {

namespace {

// Runs gpulane with `args` through `sh -c script`, where the script sends what it should to
// "$GPULANE_TEST_PTY"; `out` is what reached the terminal.
RunResult RunWithTerminal(const char* script, const std::vector<std::string>& args, const Env& env, double timeout_s) {
  int master = posix_openpt(O_RDWR | O_NOCTTY);
  if (master < 0 || grantpt(master) != 0 || unlockpt(master) != 0) throw std::runtime_error("no pseudo-terminal");
  const std::string slave_path = ptsname(master);
  // Held open here so that what the child wrote stays readable after it exits.
  int slave = open(slave_path.c_str(), O_RDWR | O_NOCTTY);
  if (slave < 0) throw std::runtime_error("cannot open " + slave_path);

  // The child: `sh -c 'exec "$@" >PTY'` keeps the harness's environment handling and stderr capture.
  std::vector<std::string> argv{"/bin/sh", "-c", script, "sh", GpulaneBinary()};
  argv.insert(argv.end(), args.begin(), args.end());
  Env with_pty = env;
  with_pty["GPULANE_TEST_PTY"] = slave_path;
  Child child(argv, with_pty);

  std::string out;
  bool child_done = false;
  std::optional<RunResult> result;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{master, POLLIN, 0};
    if (poll(&p, 1, 20) > 0 && (p.revents & POLLIN)) {
      char buf[4096];
      ssize_t n = read(master, buf, sizeof buf);
      if (n > 0) {
        out.append(buf, static_cast<std::size_t>(n));
        continue;
      }
    }
    if (child_done) break;  // exited and the terminal is drained
    result = child.Wait(0);
    child_done = result.has_value();
  }
  close(slave);
  close(master);
  if (!result) {
    child.Kill(SIGKILL);
    result = child.Wait(5);
    if (!result) return RunResult{};
    result->err += "\n[test harness: killed after time-out]";
  }
  result->out = out;
  return *result;
}

}  // namespace

RunResult RunGpulaneOnTerminal(const std::vector<std::string>& args, const Env& env, double timeout_s) {
  return RunWithTerminal("exec \"$@\" >\"$GPULANE_TEST_PTY\"", args, env, timeout_s);
}

RunResult RunGpulaneWithStderrOnTerminal(const std::vector<std::string>& args, const Env& env, double timeout_s) {
  return RunWithTerminal("exec \"$@\" 2>\"$GPULANE_TEST_PTY\"", args, env, timeout_s);
}

}  // namespace gpulane::test
