#include "exec/job_runner.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <linux/close_range.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <grp.h>
#include <pwd.h>

#include <algorithm>
#include <cerrno>
#include <optional>
#include <chrono>
#include <cstring>
#include <fmt/format.h>
#include <fstream>
#include <sstream>

namespace gpulane::exec {
namespace {

constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

// What a child that could not start reports through the pipe.
struct ChildFailure {
  int err;
  char what[48];
};

int DecodeStatus(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

// Looks argv[0] up in the PATH of the job's environment, as execvp would in that environment.
std::string Resolve(const std::string& name, const std::vector<std::string>& env) {
  if (name.find('/') != std::string::npos) return name;
  std::string path = "/usr/local/bin:/usr/bin:/bin";
  for (const auto& kv : env)
    if (kv.rfind("PATH=", 0) == 0) path = kv.substr(5);
  std::stringstream dirs(path);
  std::string dir;
  std::string fallback;
  while (std::getline(dirs, dir, ':')) {
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
    if (fallback.empty() && access(candidate.c_str(), F_OK) == 0) fallback = candidate;
  }
  return fallback.empty() ? name : fallback;
}

// The direct children of `pid` (/proc/<pid>/task/*/children), or by scanning /proc when the
// kernel lacks that file.
std::vector<pid_t> ChildrenOf(pid_t pid) {
  std::vector<pid_t> out;
  std::string task_dir = fmt::format("/proc/{}/task", pid);
  bool have_children_files = false;
  if (DIR* d = opendir(task_dir.c_str())) {
    while (struct dirent* e = readdir(d)) {
      if (e->d_name[0] == '.') continue;
      std::ifstream in(task_dir + "/" + e->d_name + "/children");
      if (!in) continue;
      have_children_files = true;
      pid_t child;
      while (in >> child) out.push_back(child);
    }
    closedir(d);
  }
  if (have_children_files) return out;
  if (DIR* d = opendir("/proc")) {
    while (struct dirent* e = readdir(d)) {
      if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
      std::ifstream in(fmt::format("/proc/{}/stat", e->d_name));
      std::string stat((std::istreambuf_iterator<char>(in)), {});
      auto close = stat.rfind(')');
      if (close == std::string::npos) continue;
      char state;
      int ppid;
      if (std::sscanf(stat.c_str() + close + 1, " %c %d", &state, &ppid) == 2 && ppid == pid)
        out.push_back(static_cast<pid_t>(std::atoi(e->d_name)));
    }
    closedir(d);
  }
  return out;
}

// Every descendant of this process, depth first.
std::vector<pid_t> Descendants() {
  std::vector<pid_t> out;
  std::vector<pid_t> todo = ChildrenOf(getpid());
  while (!todo.empty()) {
    pid_t p = todo.back();
    todo.pop_back();
    out.push_back(p);
    for (pid_t c : ChildrenOf(p)) todo.push_back(c);
  }
  return out;
}

// Reaps every child that has ended; returns the main job's status if it was among them.
void ReapAll(pid_t main_pid, bool* main_done, int* main_status) {
  while (true) {
    int status = 0;
    pid_t r = waitpid(-1, &status, WNOHANG);
    if (r <= 0) return;
    if (r == main_pid && (WIFEXITED(status) || WIFSIGNALED(status))) {
      *main_done = true;
      *main_status = status;
    }
  }
}

// Waits up to `seconds` for signals in `set`; returns the signal or 0 on time-out.
int WaitSignal(const sigset_t& set, double seconds, siginfo_t* info) {
  timespec ts{static_cast<time_t>(seconds), static_cast<long>((seconds - static_cast<time_t>(seconds)) * 1e9)};
  int sig = sigtimedwait(&set, info, &ts);
  return sig < 0 ? 0 : sig;
}

// Hands the terminal's foreground to the job's process group while gpulane has it, so Ctrl-C and
// Ctrl-Z reach the job as if it had been started directly, and takes it back at the end.
class TerminalHandoff {
 public:
  void Give(pid_t pgid) {
    if (!isatty(STDIN_FILENO) || tcgetpgrp(STDIN_FILENO) != getpgrp()) return;
    if (tcsetpgrp(STDIN_FILENO, pgid) == 0) active_ = true;
  }
  void Restore() {
    if (active_) tcsetpgrp(STDIN_FILENO, getpgrp());
    active_ = false;
  }
  ~TerminalHandoff() { Restore(); }

 private:
  bool active_ = false;
};

// Ends everything the job left: SIGTERM to each, up to `grace_s`, then SIGKILL; reaps all.
void EndLeftovers(pid_t pgid, double grace_s, const sigset_t& set, JobOutcome& outcome) {
  bool dummy_done = false;
  int dummy_status = 0;
  ReapAll(-1, &dummy_done, &dummy_status);
  std::vector<pid_t> left = Descendants();
  if (left.empty()) return;
  outcome.leftovers_terminated = static_cast<int>(left.size());
  for (pid_t p : left) outcome.pids.insert(p);
  killpg(pgid, SIGTERM);
  for (pid_t p : left) kill(p, SIGTERM);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(grace_s);
  while (std::chrono::steady_clock::now() < deadline) {
    ReapAll(-1, &dummy_done, &dummy_status);
    left = Descendants();
    if (left.empty()) return;
    for (pid_t p : left) outcome.pids.insert(p);
    siginfo_t info;
    WaitSignal(set, 0.01, &info);  // SIGCHLD wakes us early
  }
  for (int round = 0; round < 100; ++round) {
    left = Descendants();
    if (left.empty()) break;
    if (round == 0) outcome.leftovers_killed = static_cast<int>(left.size());
    killpg(pgid, SIGKILL);
    for (pid_t p : left) kill(p, SIGKILL);
    siginfo_t info;
    WaitSignal(set, 0.01, &info);
    ReapAll(-1, &dummy_done, &dummy_status);
  }
}

// In the forked child: become the job's user, enter its directory, open its logs. Returns 0 or
// an errno, with `what` naming the step that failed.
int PrepareChild(const JobSpec& spec, const char** what) {
  if (spec.uid && spec.gid && (*spec.uid != geteuid() || *spec.gid != getegid())) {
    struct passwd pw;
    struct passwd* found = nullptr;
    char buf[4096];
    std::vector<gid_t> groups(256);
    int n = static_cast<int>(groups.size());
    *what = "look up the user's groups";
    if (getpwuid_r(*spec.uid, &pw, buf, sizeof buf, &found) != 0 || !found) return ENOENT;
    if (getgrouplist(found->pw_name, *spec.gid, groups.data(), &n) < 0) return E2BIG;
    *what = "setgroups";
    if (setgroups(static_cast<size_t>(n), groups.data()) != 0) return errno;
    *what = "setgid";
    if (setgid(*spec.gid) != 0) return errno;
    *what = "setuid";
    if (setuid(*spec.uid) != 0) return errno;
    *what = "drop root for good";
    if (setuid(0) == 0 && *spec.uid != 0) return EPERM;  // must be impossible now
  }
  *what = "enter the working directory";
  if (!spec.cwd.empty() && chdir(spec.cwd.c_str()) != 0) return errno;
  auto open_log = [](const std::string& path) { return open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0644); };
  if (!spec.stdout_path.empty()) {
    *what = "open the output log";
    int fd = open_log(spec.stdout_path);
    if (fd < 0 || dup2(fd, STDOUT_FILENO) < 0) return errno;
    if (spec.stderr_path.empty() || spec.stderr_path == spec.stdout_path) {
      if (dup2(fd, STDERR_FILENO) < 0) return errno;
    }
    close(fd);
  }
  if (!spec.stderr_path.empty() && spec.stderr_path != spec.stdout_path) {
    *what = "open the error log";
    int fd = open_log(spec.stderr_path);
    if (fd < 0 || dup2(fd, STDERR_FILENO) < 0) return errno;
    close(fd);
  }
  return 0;
}

}  // namespace

Result<JobOutcome> RunJob(const JobSpec& spec, const std::function<void(pid_t)>& on_started) {
  JobOutcome outcome;
  // Orphans of the job re-parent to us instead of init, so setsid() cannot hide them.
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  sigset_t set, old;
  sigemptyset(&set);
  sigaddset(&set, SIGCHLD);
  for (int s : kForwarded) sigaddset(&set, s);
  sigprocmask(SIG_BLOCK, &set, &old);
  signal(SIGTTOU, SIG_IGN);  // so tcsetpgrp from the background does not stop us

  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return MakeError(ErrorKind::kIo, "cannot create a pipe");
  const std::string program = Resolve(spec.argv.front(), spec.env);
  std::vector<char*> argv, envp;
  for (const auto& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : spec.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  pid_t child = fork();
  if (child < 0) return MakeError(ErrorKind::kIo, fmt::format("cannot fork: {}", std::strerror(errno)));
  if (child == 0) {
    setpgid(0, 0);
    signal(SIGTTOU, SIG_DFL);
    // Only 0, 1, 2 and the descriptors asked for reach the job (not NVML's, not the lease dir's).
    if (close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) != 0)
      for (int fd = 3; fd < 4096; ++fd) fcntl(fd, F_SETFD, FD_CLOEXEC);
    for (int fd : spec.keep_fds) fcntl(fd, F_SETFD, 0);
    sigprocmask(SIG_SETMASK, &old, nullptr);
    const char* what = "start";
    int err = PrepareChild(spec, &what);
    if (err == 0) {
      execve(program.c_str(), argv.data(), envp.data());
      err = errno;
      what = "run";
    }
    ChildFailure failure{err, {}};
    std::snprintf(failure.what, sizeof failure.what, "%s", what);
    (void)!write(pipe_fds[1], &failure, sizeof failure);
    _exit(err == ENOENT && std::strcmp(what, "run") == 0 ? 127 : 126);
  }
  setpgid(child, child);
  close(pipe_fds[1]);
  ChildFailure failure{};
  bool exec_failed = read(pipe_fds[0], &failure, sizeof failure) == sizeof failure;
  int exec_errno = failure.err;
  close(pipe_fds[0]);
  outcome.pids.insert(child);
  TerminalHandoff terminal;
  terminal.Give(child);
  if (exec_failed) {
    outcome.exec_failed = true;
    outcome.exec_error = std::strcmp(failure.what, "run") == 0
                             ? fmt::format("cannot run '{}': {}", spec.argv.front(), std::strerror(exec_errno))
                             : fmt::format("cannot {} for the job: {}", failure.what, std::strerror(exec_errno));
  } else if (on_started) {
    on_started(child);
  }

  bool main_done = false;
  int main_status = 0;
  const auto started = std::chrono::steady_clock::now();
  std::optional<std::chrono::steady_clock::time_point> kill_at;
  while (!main_done) {
    siginfo_t info{};
    double wait_s = 1.0;
    if (spec.time_limit_s && !exec_failed) {
      auto limit_at = started + std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(*spec.time_limit_s));
      auto now = std::chrono::steady_clock::now();
      if (!outcome.timed_out && now >= limit_at) {
        outcome.timed_out = true;
        killpg(child, SIGTERM);
        kill_at = now + std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(spec.kill_grace_s));
      }
      if (kill_at && now >= *kill_at) {
        killpg(child, SIGKILL);
        kill_at.reset();
      }
      auto next = outcome.timed_out ? (kill_at ? *kill_at : now + std::chrono::seconds(1)) : limit_at;
      wait_s = std::clamp(std::chrono::duration<double>(next - now).count(), 0.001, 1.0);
    }
    int sig = WaitSignal(set, wait_s, &info);
    if (sig == SIGCHLD || sig == 0) {
      // Catch a stop (Ctrl-Z) of the job: hand the terminal back and stop ourselves like it.
      int status = 0;
      if (waitpid(child, &status, WNOHANG | WUNTRACED) == child) {
        if (WIFSTOPPED(status)) {
          terminal.Restore();
          kill(getpid(), SIGSTOP);  // returns when the shell continues us (fg/bg)
          terminal.Give(child);
          killpg(child, SIGCONT);
        } else {
          main_done = true;
          main_status = status;
        }
      }
      ReapAll(child, &main_done, &main_status);
      continue;
    }
    for (pid_t p : Descendants()) outcome.pids.insert(p);
    killpg(child, sig);
  }
  outcome.exit_code = exec_failed ? (exec_errno == ENOENT && std::strcmp(failure.what, "run") == 0 ? 127 : 126)
                                  : DecodeStatus(main_status);
  EndLeftovers(child, spec.kill_grace_s, set, outcome);
  terminal.Restore();
  sigprocmask(SIG_SETMASK, &old, nullptr);
  return outcome;
}

}  // namespace gpulane::exec
