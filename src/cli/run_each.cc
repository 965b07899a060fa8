#include "cli/run_each.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fmt/format.h>
#include <map>
#include <thread>

#include "cli/common.h"
#include "gpu/visible_devices.h"
#include "render/each_progress.h"
#include "util/exit_codes.h"
#include "util/shell_words.h"
#include "util/strings.h"
#include "util/terminal_text.h"
#include "util/units.h"

namespace gpulane::cli {
namespace {

double NowS() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// The exit code of a wait(2) status: the code, or 128 + the signal.
int ExitCodeOf(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

// One line that was started: its child, and where it stands.
struct Started {
  std::size_t index = 0;  ///< into the commands
  int report_fd = -1;     ///< the read end of its report pipe (-1 once closed)
  std::string report;     ///< what it has reported so far
  bool granted = false;
  double granted_s = 0;
};

class EachRun {
 public:
  EachRun(const std::vector<CommandLine>& commands, unsigned parallel, const LineRunner& run_line)
      : commands_(commands), parallel_(std::max(1u, parallel)), run_line_(run_line), tty_(isatty(STDERR_FILENO) == 1) {
    counts_.total = commands.size();
  }

  int Run() {
    sigset_t mine;
    sigemptyset(&mine);
    for (int sig : {SIGCHLD, SIGINT, SIGTERM, SIGHUP}) sigaddset(&mine, sig);
    sigprocmask(SIG_BLOCK, &mine, &old_mask_);
    signal_fd_ = signalfd(-1, &mine, SFD_CLOEXEC | SFD_NONBLOCK);
    if (signal_fd_ < 0) return Fail(MakeError(ErrorKind::kIo, fmt::format("signalfd: {}", std::strerror(errno))));
    while (next_ < commands_.size() || !started_.empty()) {
      while (!stopping() && next_ < commands_.size() && started_.size() < parallel_)
        if (!StartNext()) break;
      if (started_.empty()) break;
      WaitForEvents();
    }
    if (tty_) fmt::print(stderr, "\r\x1b[K");
    fmt::print(stderr, "gpulane: {}\n", EachSummaryLine(counts_, failed_lines_));
    if (interrupted_) return 128 + interrupted_;
    if (abort_code_) return abort_code_;
    return counts_.failed > 0 ? kExitLinesFailed : kExitOk;
  }

 private:
  bool stopping() const { return interrupted_ != 0 || abort_code_ != 0; }

  // Forks the next line's child; false (the line counted failed) when that is not possible.
  bool StartNext() {
    const std::size_t index = next_++;
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return LineNotStarted(index, std::strerror(errno));
    std::fflush(stdout);
    std::fflush(stderr);
    const pid_t pid = fork();
    if (pid < 0) {
      close(fds[0]);
      close(fds[1]);
      return LineNotStarted(index, std::strerror(errno));
    }
    if (pid == 0) RunChild(index, fds[1]);
    close(fds[1]);
    started_[pid] = Started{index, fds[0]};
    ++counts_.waiting;
    Progress("");
    return true;
  }

  [[noreturn]] void RunChild(std::size_t index, int report_fd) {
    close(signal_fd_);
    for (const auto& [pid, line] : started_)
      if (line.report_fd >= 0) close(line.report_fd);
    sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
    const int code = run_line_(commands_[index].argv, report_fd);
    std::fflush(stdout);
    std::fflush(stderr);
    _exit(code);
  }

  bool LineNotStarted(std::size_t index, const std::string& why) {
    ++counts_.failed;
    failed_lines_.push_back(commands_[index].line);
    Progress(fmt::format("line {} not started: {}", commands_[index].line, why));
    return false;
  }

  void WaitForEvents() {
    std::vector<pollfd> fds{{signal_fd_, POLLIN, 0}};
    std::vector<pid_t> pids;
    for (const auto& [pid, line] : started_)
      if (line.report_fd >= 0) {
        fds.push_back({line.report_fd, POLLIN, 0});
        pids.push_back(pid);
      }
    // On a terminal the ETA is redrawn every second; otherwise only events wake us.
    const int n = poll(fds.data(), fds.size(), tty_ ? 1000 : -1);
    if (n < 0 && errno != EINTR) return;
    for (std::size_t i = 1; i < fds.size(); ++i)
      if (fds[i].revents) ReadReport(pids[i - 1]);
    if (fds[0].revents) TakeSignals();
    if (n == 0) Progress("");
  }

  void ReadReport(pid_t pid) {
    Started& line = started_.at(pid);
    char buffer[512];
    const ssize_t got = read(line.report_fd, buffer, sizeof buffer);
    if (got <= 0) {
      if (got < 0 && errno == EINTR) return;
      close(line.report_fd);  // the child ended (or closed it): its exit comes as SIGCHLD
      line.report_fd = -1;
      return;
    }
    line.report.append(buffer, static_cast<std::size_t>(got));
    const std::size_t end = line.report.find('\n');
    if (line.granted || end == std::string::npos || line.report.rfind("granted ", 0) != 0) return;
    line.granted = true;
    line.granted_s = NowS();
    --counts_.waiting;
    ++counts_.running;
    const std::string gpus = line.report.substr(8, end - 8);
    const CommandLine& command = commands_[line.index];
    Progress(fmt::format("line {} started {}: {}", command.line,
                         gpus.empty() ? std::string("without GPUs") : "on GPU" + Join(Split(gpus, ','), ",GPU"),
                         EscapeForTerminal(CommandLineText(command.argv))));
  }

  void TakeSignals() {
    signalfd_siginfo info;
    while (read(signal_fd_, &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
      const int sig = static_cast<int>(info.ssi_signo);
      if (sig == SIGCHLD) continue;  // reaped below, whichever child it was
      if (!interrupted_) interrupted_ = sig;
      // The terminal signals the whole foreground group, the lines included; a signal sent to this
      // process alone (kill, a supervisor) is passed on, so that the lines stop too.
      if (info.ssi_code == SI_USER || info.ssi_code == SI_QUEUE)
        for (const auto& [pid, line] : started_) kill(pid, sig);
    }
    int status = 0;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) Reaped(pid, status);
  }

  void Reaped(pid_t pid, int status) {
    auto it = started_.find(pid);
    if (it == started_.end()) return;
    while (it->second.report_fd >= 0 && !it->second.granted) ReadReport(pid);  // a report written just before it ended
    if (it->second.report_fd >= 0) close(it->second.report_fd);
    Ended(it->second, ExitCodeOf(status));
    started_.erase(it);
  }

  void Ended(const Started& line, int code) {
    const CommandLine& command = commands_[line.index];
    --(line.granted ? counts_.running : counts_.waiting);
    const double ran_s = NowS() - line.granted_s;
    if (line.granted) finished_s_.push_back(ran_s);
    if (code == 0) {
      ++counts_.done;
      Progress(fmt::format("line {} done in {}", command.line, FormatSeconds(ran_s)));
      return;
    }
    ++counts_.failed;
    failed_lines_.push_back(command.line);
    std::sort(failed_lines_.begin(), failed_lines_.end());
    if (line.granted) {
      Progress(fmt::format("line {} failed: exit code {} after {}", command.line, code, FormatSeconds(ran_s)));
      return;
    }
    Progress(fmt::format("line {} failed before it started: exit code {}", command.line, code));
    // gpulane itself refused (a bad option, no driver, an unsafe lease directory): every line would.
    if (code == kExitUsage || code == kExitNoDriver || code == kExitNvml || code == kExitUnsafe) {
      if (!abort_code_) Warn("no more lines are started: gpulane failed before the command ran (above)");
      abort_code_ = abort_code_ ? abort_code_ : code;
    }
  }

  // Prints `event` (if any) as a line of its own and, on a terminal, redraws the status line below it.
  void Progress(const std::string& event) {
    if (tty_) fmt::print(stderr, "\r\x1b[K");
    if (!event.empty()) fmt::print(stderr, "gpulane: {}\n", event);
    if (!tty_ || counts_.done + counts_.failed == counts_.total) return;
    std::vector<double> running_s;
    const double now = NowS();
    for (const auto& [pid, line] : started_)
      if (line.granted) running_s.push_back(now - line.granted_s);
    const auto eta = EstimateEtaS(finished_s_, running_s, counts_.total - counts_.done - counts_.failed - running_s.size(),
                                  parallel_);
    fmt::print(stderr, "gpulane: {}", EachProgressLine(counts_, eta));
  }

  const std::vector<CommandLine>& commands_;
  const unsigned parallel_;
  const LineRunner& run_line_;
  const bool tty_;
  sigset_t old_mask_{};
  int signal_fd_ = -1;
  std::size_t next_ = 0;
  std::map<pid_t, Started> started_;
  EachCounts counts_;
  std::vector<double> finished_s_;
  std::vector<int> failed_lines_;
  int interrupted_ = 0;
  int abort_code_ = 0;
};

}  // namespace

unsigned DefaultParallel(const sched::Request& request, const os::Env& env, int* exit_code) {
  if (request.count == 0) return std::max(1u, std::thread::hardware_concurrency());
  // The GPUs are read in a child: NVML, once initialised here, would be shared with every line forked later.
  int fds[2];
  std::fflush(stderr);
  const pid_t pid = pipe2(fds, O_CLOEXEC) == 0 ? fork() : -1;
  if (pid < 0) {
    *exit_code = Fail(MakeError(ErrorKind::kIo, fmt::format("cannot count the GPUs for -j: {}; give -j N", std::strerror(errno))));
    return 0;
  }
  if (pid == 0) {
    close(fds[0]);
    auto backend = OpenBackend(env);
    auto snapshot = backend ? ReadAnnotated(**backend) : Result<GpuSnapshot>(backend.error());
    if (!snapshot) _exit(Fail(snapshot.error()));
    auto allowed = ResolveAllowedGpus(request.gpu_list, InheritedAllocation(), *snapshot);
    if (!allowed) _exit(Fail(allowed.error()));
    const std::string count = std::to_string(allowed->size());
    _exit(write(fds[1], count.data(), count.size()) == static_cast<ssize_t>(count.size()) ? 0 : kExitFailure);
  }
  close(fds[1]);
  char buffer[32] = {};
  const ssize_t got = read(fds[0], buffer, sizeof buffer - 1);
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  unsigned long long gpus = 0;
  if (ExitCodeOf(status) != 0 || got <= 0 || !ParseUint(std::string_view(buffer, static_cast<std::size_t>(got)), &gpus)) {
    *exit_code = ExitCodeOf(status) != 0 ? ExitCodeOf(status) : kExitFailure;
    return 0;
  }
  return static_cast<unsigned>(std::max<unsigned long long>(1, gpus / std::max(1u, request.count)));
}

int RunEach(const std::vector<CommandLine>& commands, unsigned parallel, const LineRunner& run_line) {
  return EachRun(commands, parallel, run_line).Run();
}

}  // namespace gpulane::cli
