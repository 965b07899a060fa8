#include "exec/job_runner.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <linux/close_range.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <grp.h>
#include <pwd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <limits>
#include <memory>
#include <optional>
#include <chrono>
#include <cstring>
#include <fmt/format.h>
#include <fstream>
#include <sstream>

#include "exec/isolation_run.h"
#include "exec/job_child.h"
#include "os/user_file.h"
#include "util/terminal_text.h"

namespace gpulane::exec {
namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();
constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

int DecodeStatus(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

// Looks argv[0] up in the PATH of the job's environment, as execvp would in that environment and
// with the rights of the job's user `as` (os/user_file.h: never root's for a root supervisor).
std::string Resolve(const std::string& name, const std::vector<std::string>& env, std::optional<os::FileUser> as) {
  if (name.find('/') != std::string::npos) return name;
  std::string path = "/usr/local/bin:/usr/bin:/bin";
  for (const auto& kv : env)
    if (kv.rfind("PATH=", 0) == 0) path = kv.substr(5);
  std::stringstream dirs(path);
  std::string dir;
  std::string fallback;
  while (std::getline(dirs, dir, ':')) {
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (os::AccessibleAsUser(candidate, as, X_OK)) return candidate;
    if (fallback.empty() && os::AccessibleAsUser(candidate, as, F_OK)) fallback = candidate;
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

// Every descendant of this process but `except` (the namespace holder, which is not the job's and
// ends by itself once the job is over), depth first.
std::vector<pid_t> Descendants(pid_t except) {
  std::vector<pid_t> out;
  std::vector<pid_t> todo = ChildrenOf(getpid());
  while (!todo.empty()) {
    pid_t p = todo.back();
    todo.pop_back();
    if (p == except) continue;
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
void EndLeftovers(pid_t pgid, double grace_s, const sigset_t& set, JobOutcome& outcome, pid_t holder, const Clock& clock) {
  bool dummy_done = false;
  int dummy_status = 0;
  ReapAll(-1, &dummy_done, &dummy_status);
  std::vector<pid_t> left = Descendants(holder);
  if (left.empty()) return;
  outcome.leftovers_terminated = static_cast<int>(left.size());
  for (pid_t p : left) outcome.pids.insert(p);
  killpg(pgid, SIGTERM);
  for (pid_t p : left) kill(p, SIGTERM);
  const double deadline_s = clock.MonotonicS() + grace_s;
  while (clock.MonotonicS() < deadline_s) {
    ReapAll(-1, &dummy_done, &dummy_status);
    left = Descendants(holder);
    if (left.empty()) return;
    for (pid_t p : left) outcome.pids.insert(p);
    siginfo_t info;
    WaitSignal(set, 0.01, &info);  // SIGCHLD wakes us early
  }
  for (int round = 0; round < 100; ++round) {
    left = Descendants(holder);
    if (left.empty()) break;
    if (round == 0) outcome.leftovers_killed = static_cast<int>(left.size());
    killpg(pgid, SIGKILL);
    for (pid_t p : left) kill(p, SIGKILL);
    siginfo_t info;
    WaitSignal(set, 0.01, &info);
    ReapAll(-1, &dummy_done, &dummy_status);
  }
}

// The line for a job started without its device isolation.
std::string NotIsolatedWarning(const std::string& why) {
  return EscapeForTerminal(fmt::format("the job runs without device isolation (every GPU's device node is visible to it): {}; "
                                       "[run] isolate_required = true refuses such a start", why));
}

// The time limit or the stop (its partition closes), whichever comes first: SIGTERM to the job at
// it (outcome.timed_out or .stopped), SIGKILL kill_grace_s later (`kill_at_s`, kNever when none is
// due: a plain double, as GCC 12 took an optional's value for uninitialised, -Wmaybe-uninitialized).
// Returns when to look again: the deadline, then the SIGKILL or a second on (kNever without a deadline).
double EnforceDeadline(const JobSpec& spec, std::optional<double> stop_in_s, double started_s, double now_s, pid_t child,
                       double& kill_at_s, JobOutcome& outcome) {
  const std::optional<double> deadline_s = spec.time_limit_s && stop_in_s ? std::min(*spec.time_limit_s, *stop_in_s)
                                                                          : (spec.time_limit_s ? spec.time_limit_s : stop_in_s);
  if (!deadline_s) return kNever;
  const double limit_at_s = started_s + *deadline_s;
  if (!outcome.timed_out && !outcome.stopped && now_s >= limit_at_s) {
    if (spec.time_limit_s && *deadline_s == *spec.time_limit_s) outcome.timed_out = true;
    else outcome.stopped = true;
    killpg(child, SIGTERM);
    kill_at_s = now_s + spec.kill_grace_s;
  }
  if (now_s >= kill_at_s) {
    killpg(child, SIGKILL);
    kill_at_s = kNever;
  }
  return outcome.timed_out || outcome.stopped ? std::min(kill_at_s, now_s + 1) : limit_at_s;
}

// The signals RunJob takes with sigtimedwait instead of handlers (SIGCHLD and the forwarded ones),
// and the mask to restore at the end.
struct BlockedSignals {
  sigset_t set;
  sigset_t old;
};

BlockedSignals BlockJobSignals() {
  BlockedSignals signals;
  sigemptyset(&signals.set);
  sigaddset(&signals.set, SIGCHLD);
  for (int s : kForwarded) sigaddset(&signals.set, s);
  sigprocmask(SIG_BLOCK, &signals.set, &signals.old);
  signal(SIGTTOU, SIG_IGN);  // so tcsetpgrp from the background does not stop us
  return signals;
}

// The job's argv and environment as execve takes them, pointing into the spec's strings.
struct ExecArgs {
  std::vector<char*> argv, envp;
};

ExecArgs ExecArgsOf(const JobSpec& spec) {
  ExecArgs args;
  for (const auto& a : spec.argv) args.argv.push_back(const_cast<char*>(a.c_str()));
  args.argv.push_back(nullptr);
  for (const auto& e : spec.env) args.envp.push_back(const_cast<char*>(e.c_str()));
  args.envp.push_back(nullptr);
  return args;
}

// What the child reported before it exec'd (ChildReport): the logs it opened, its warnings, and
// the failure if it could not start.
struct ChildStart {
  bool exec_failed = false;
  bool logs_opened = false;
  OpenedLogs logs;
  std::unique_ptr<ChildReport> failure = std::make_unique<ChildReport>();
  std::vector<std::string> warnings;
  std::string isolation_not_applied;  // "cannot ...", "" = nothing known against the isolation
};

// Reads the child's reports from `fd` up to the pipe's end or a failure; nothing more comes once
// it execs.
ChildStart ReadChildStart(int fd, const JobSpec& spec, IsolationRun& isolation) {
  ChildStart start;
  auto report = std::make_unique<ChildReport>();
  start.isolation_not_applied = spec.isolation_failure.empty() ? "" : "cannot " + spec.isolation_failure;
  if (!spec.isolation_failure.empty() && !spec.isolation_required)
    start.warnings.push_back(NotIsolatedWarning(start.isolation_not_applied));
  while (!start.exec_failed && ReadReport(fd, report.get())) {
    if (report->kind == ChildReport::kWarning) {
      start.isolation_not_applied = fmt::format("cannot {}: {}", report->what, std::strerror(report->err));
      start.warnings.push_back(NotIsolatedWarning(start.isolation_not_applied));
    } else if (report->kind == ChildReport::kIsolated) {
      isolation.Isolated(report->holder, report->steps);
    } else if (report->kind == ChildReport::kLogsOpened) {
      start.logs = {report->stdout_path, report->stderr_path, report->stdout_offset, report->stderr_offset};
      start.logs_opened = true;
    } else {
      start.exec_failed = true;
      std::swap(report, start.failure);
    }
  }
  return start;
}

// Why the isolation asked for was not applied, for JobSpec::on_isolated: the warning's words, or
// the failure's when a required isolation failed the start.
std::string IsolationNotApplied(const JobSpec& spec, const IsolationRun& isolation, const ChildStart& start) {
  if (!(start.exec_failed && spec.isolation_required && !isolation.applied && (spec.isolation || !spec.isolation_failure.empty())))
    return start.isolation_not_applied;
  const ChildReport& failure = *start.failure;
  return failure.err ? fmt::format("cannot {}: {}", failure.what, std::strerror(failure.err)) : fmt::format("cannot {}", failure.what);
}

// Quotes the command and paths, which are bytes: made visible (util/terminal_text.h), so the
// message is text that a terminal, a status file (JSON) and the job's reason all take.
std::string ExecErrorOf(const JobSpec& spec, const ChildReport& failure) {
  return EscapeForTerminal(failure.at_exec ? fmt::format("cannot run '{}': {}", spec.argv.front(), std::strerror(failure.err))
                           : failure.err   ? fmt::format("cannot {} for the job: {}", failure.what, std::strerror(failure.err))
                                           : fmt::format("cannot {}", failure.what));
}

// The started job as RunJob's wait loop sees it.
struct RunningJob {
  const JobSpec& spec;
  const Clock& clock;
  const sigset_t& signals;
  pid_t child;
  pid_t holder;      // the namespace holder, not the job's (IsolationRun::holder)
  bool exec_failed;  // then nothing is ticked nor enforced: the child only exits
};

// The wait loop's times, monotonic seconds.
struct JobTimers {
  double started_s;
  double next_tick_s;
  double kill_at_s = kNever;  // the SIGKILL after the deadline's SIGTERM (EnforceDeadline)
  // The stop, seconds after the start: its partition's close, or now when on_tick asks for it.
  std::optional<double> stop_in_s;
};

// Calls on_tick when due and enforces the deadline; returns how long to wait for a signal.
double TickAndEnforce(const RunningJob& job, JobTimers& timers, JobOutcome& outcome) {
  const JobSpec& spec = job.spec;
  double wait_s = 1.0;
  if (job.exec_failed) return wait_s;
  if (spec.on_tick && spec.tick_s > 0) {
    const double now_s = job.clock.MonotonicS();
    if (now_s >= timers.next_tick_s) {
      if (spec.on_tick() && !outcome.timed_out && !outcome.stopped) {
        const double elapsed_s = now_s - timers.started_s;
        timers.stop_in_s = timers.stop_in_s ? std::min(*timers.stop_in_s, elapsed_s) : elapsed_s;
      }
      timers.next_tick_s = now_s + spec.tick_s;
    }
    wait_s = std::clamp(timers.next_tick_s - now_s, 0.001, wait_s);
  }
  const double now_s = job.clock.MonotonicS();
  const double next_s = EnforceDeadline(spec, timers.stop_in_s, timers.started_s, now_s, job.child, timers.kill_at_s, outcome);
  return std::clamp(next_s - now_s, 0.001, wait_s);
}

// After a SIGCHLD (or a time-out): reaps what ended; a stop (Ctrl-Z) of the job hands the terminal
// back and stops us like it. Returns the main process's status once it is over.
std::optional<int> ReapOrFollowStop(pid_t child, TerminalHandoff& terminal) {
  bool main_done = false;
  int main_status = 0;
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
  if (!main_done) return std::nullopt;
  return main_status;
}

// Waits for the job's main process to end, ticking, enforcing its deadline and forwarding the
// signals we get to its process group; returns its wait status.
int WaitForMainExit(const RunningJob& job, TerminalHandoff& terminal, JobOutcome& outcome) {
  const double started_s = job.clock.MonotonicS();
  JobTimers timers{started_s, started_s + job.spec.tick_s, kNever, job.spec.stop_in_s};
  while (true) {
    siginfo_t info{};
    const int sig = WaitSignal(job.signals, TickAndEnforce(job, timers, outcome), &info);
    if (sig == SIGCHLD || sig == 0) {
      if (auto main_status = ReapOrFollowStop(job.child, terminal)) return *main_status;
      continue;
    }
    for (pid_t p : Descendants(job.holder)) outcome.pids.insert(p);
    if (!outcome.stop_signal && (sig == SIGINT || sig == SIGTERM || sig == SIGHUP)) {
      outcome.stop_signal = sig;
      outcome.stop_signal_sender = info.si_pid;
      outcome.stop_signal_cancel = info.si_code == SI_QUEUE && info.si_value.sival_int == kCancelSignalValue;
    }
    killpg(job.child, sig);
  }
}

}  // namespace

Result<JobOutcome> RunJob(const JobSpec& spec, const os::Env& env, const std::function<void(pid_t)>& on_started,
                          const std::function<void(const OpenedLogs&)>& on_logs) {
  std::vector<gid_t> groups;
  if (spec.uid && spec.gid && (*spec.uid != geteuid() || *spec.gid != getegid())) {
    auto looked_up = GroupsOf(*spec.uid, *spec.gid);
    if (!looked_up) return looked_up.error();
    groups = std::move(looked_up).value();
  }
  // Orphans of the job re-parent to us instead of init, so setsid() cannot hide them.
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  const BlockedSignals signals = BlockJobSignals();

  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return MakeError(ErrorKind::kIo, "cannot create a pipe");
  IsolationRun isolation(spec.isolation && spec.isolation_failure.empty() ? &*spec.isolation : nullptr, spec.isolation_plan_us);
  const std::string program =
      Resolve(spec.argv.front(), spec.env, spec.uid && spec.gid ? os::ActingFor(*spec.uid, *spec.gid) : std::nullopt);
  const ExecArgs args = ExecArgsOf(spec);
  const ChildPlan plan{spec, groups, isolation.fds, pipe_fds[1], env.clock, program.c_str(), args.argv.data(), args.envp.data()};
  auto started = env.spawner.Start([&] { BecomeTheJob(plan); });
  if (!started) return MakeError(ErrorKind::kIo, "cannot " + started.error().message);
  const pid_t child = *started;
  setpgid(child, child);
  close(pipe_fds[1]);
  isolation.Forked();
  if (spec.on_forked) spec.on_forked(child);

  const ChildStart start = ReadChildStart(pipe_fds[0], spec, isolation);
  close(pipe_fds[0]);
  if (spec.on_isolated) spec.on_isolated(isolation.applied, IsolationNotApplied(spec, isolation, start));
  JobOutcome outcome;
  if (start.logs_opened) outcome.logs = start.logs;
  outcome.pids.insert(child);
  TerminalHandoff terminal;
  terminal.Give(child);
  if (start.logs_opened && on_logs) on_logs(outcome.logs);
  if (spec.on_warning)
    for (const std::string& line : start.warnings) spec.on_warning(line);
  if (start.exec_failed) {
    outcome.exec_failed = true;
    outcome.exec_error = ExecErrorOf(spec, *start.failure);
  } else if (on_started) {
    on_started(child);
  }

  const RunningJob job{spec, env.clock, signals.set, child, isolation.holder, start.exec_failed};
  const int main_status = WaitForMainExit(job, terminal, outcome);
  const ChildReport& failure = *start.failure;
  outcome.exit_code = start.exec_failed ? (failure.at_exec && failure.err == ENOENT ? 127 : 126) : DecodeStatus(main_status);
  EndLeftovers(child, spec.kill_grace_s, signals.set, outcome, isolation.holder, env.clock);
  isolation.Release();  // the holder leaves the job's namespace and frees it, without us waiting
  terminal.Restore();
  sigprocmask(SIG_SETMASK, &signals.old, nullptr);
  return outcome;
}

}  // namespace gpulane::exec
