#include "daemon/web_child.h"

#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "util/web_config.h"

namespace gpulane::daemon {
namespace {

constexpr double kMaxBackoffS = 60;
constexpr double kStableRunS = 60;  ///< a run this long resets the back-off

std::string Describe(int status) {
  if (WIFEXITED(status)) return fmt::format("exited with status {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return fmt::format("was killed by signal {}", WTERMSIG(status));
  return "ended";
}

// The child's side of the fork: async-signal-safe calls only (the daemon has threads), the
// credentials changed by raw system calls (glibc's wrappers signal the other threads, which are
// not in the child).
[[noreturn]] void ExecChild(const WebChildSpec& spec, char* const* argv, char* const* envp, pid_t parent, int url_fd) {
  for (int fd : spec.close_in_child) close(fd);
  // --ready-fd 3: the pipe's write end there, kept across the exec (dup2 clears close-on-exec).
  if (url_fd >= 0 && (url_fd == 3 ? fcntl(3, F_SETFD, 0) : dup2(url_fd, 3)) < 0) _exit(126);
  const int null_fd = open("/dev/null", O_RDONLY);
  if (null_fd >= 0) dup2(null_fd, 0);
  dup2(2, 1);  // its lines go to the daemon's log
  if (spec.drop_privileges &&
      (syscall(SYS_setgroups, 0, nullptr) != 0 || syscall(SYS_setresgid, spec.gid, spec.gid, spec.gid) != 0 ||
       syscall(SYS_setresuid, spec.uid, spec.uid, spec.uid) != 0))
    _exit(126);
  // After the credentials change (which clears it): it ends with the daemon, even a kill -9'ed one.
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() != parent) _exit(0);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  signal(SIGPIPE, SIG_DFL);
  execve(spec.exe.c_str(), argv, envp);
  _exit(127);
}

}  // namespace

WebChild::WebChild(WebChildSpec spec, const os::Env& env, std::function<void(const std::string&)> log)
    : spec_(std::move(spec)), clock_(env.clock), spawner_(env.spawner), log_(std::move(log)) {
  listen_ = spec_.argv.size() > 2 ? spec_.argv[2] : "";
}

WebChild::~WebChild() { Stop(); }

void WebChild::CloseUrlPipe() {
  if (url_fd_ >= 0) close(url_fd_);
  url_fd_ = -1;
  url_read_.clear();
}

std::string WebChild::Url() {
  while (url_fd_ >= 0 && url_read_.find('\n') == std::string::npos && url_read_.size() < 1024) {
    char buf[256];
    const ssize_t n = read(url_fd_, buf, sizeof buf);
    if (n <= 0) break;  // nothing yet (EAGAIN), or it closed the pipe
    url_read_.append(buf, static_cast<std::size_t>(n));
  }
  const auto end = url_read_.find('\n');
  return pid_ >= 0 && end != std::string::npos ? url_read_.substr(0, end) : "";
}

void WebChild::Start(double now_s) {
  // Everything the child needs is made before the fork.
  std::vector<std::string> args = spec_.argv;
  int url_pipe[2] = {-1, -1};
  CloseUrlPipe();
  if (spec_.ask_url && pipe2(url_pipe, O_CLOEXEC) == 0) {
    fcntl(url_pipe[0], F_SETFL, O_NONBLOCK);
    args.insert(args.end(), {"--ready-fd", "3"});
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // An environment of its own, not the daemon's; sanitizer settings pass (scripts/test-sanitizers.sh
  // collects every sanitized process's reports).
  std::vector<std::string> env = {"PATH=/usr/bin:/bin", "LANG=C.UTF-8"};
  for (const char* name : {"ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS", "TSAN_OPTIONS"})
    if (const char* value = std::getenv(name)) env.push_back(std::string(name) + "=" + value);
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  const pid_t parent = getpid();
  auto started = spawner_.Start([&] { ExecChild(spec_, argv.data(), envp.data(), parent, url_pipe[1]); });
  if (!started) {
    log_(fmt::format("web: cannot start gpulane-web: {}; trying again in {:g} s", started.error().message, backoff_s_));
    restart_at_s_ = now_s + backoff_s_;
    for (int fd : url_pipe)
      if (fd >= 0) close(fd);
    return;
  }
  if (url_pipe[1] >= 0) close(url_pipe[1]);
  url_fd_ = url_pipe[0];
  pid_ = *started;
  started_s_ = now_s;
  restart_at_s_ = -1;
  // "127.0.0.1:0" is no address a user can open: port 0 asks for a free one, which gpulane-web says
  // (its "listening on" line follows) and `gpulane daemon status` prints.
  std::string where = spec_.argv.size() > 2 ? spec_.argv[2] : "?";
  if (where.size() > 2 && where.ends_with(":0"))
    where = where.substr(0, where.size() - 2) + ", a free port of its own (gpulane daemon status says which)";
  log_(fmt::format("web: started gpulane-web (pid {}) on {}{}", pid_, where,
                   spec_.drop_privileges ? fmt::format(" as uid {}", spec_.uid) : ""));
}

void WebChild::Reaped(pid_t pid, int status, double now_s) {
  if (pid != pid_ || pid < 0) return;
  pid_ = -1;
  CloseUrlPipe();
  backoff_s_ = now_s - started_s_ >= kStableRunS ? 1 : backoff_s_;
  restart_at_s_ = now_s + backoff_s_;
  log_(fmt::format("web: gpulane-web (pid {}) {}; starting it again in {:g} s", pid, Describe(status), backoff_s_));
  backoff_s_ = std::min(backoff_s_ * 2, kMaxBackoffS);
}

void WebChild::Tick(double now_s) {
  if (pid_ < 0 && restart_at_s_ >= 0 && now_s >= restart_at_s_) Start(now_s);
}

void WebChild::Stop() {
  restart_at_s_ = -1;
  CloseUrlPipe();
  if (pid_ < 0) return;
  kill(pid_, SIGTERM);
  const double deadline_s = clock_.MonotonicS() + 2;
  while (waitpid(pid_, nullptr, WNOHANG) == 0) {
    if (clock_.MonotonicS() >= deadline_s) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  pid_ = -1;
}

nlohmann::json WebInfo(WebChild* web) {
  if (!web) return {{"state", "off"}};
  const std::string url = web->Url();
  if (url.empty()) return {{"state", "starting"}, {"listen", web->listen()}};
  return {{"state", "listening"}, {"url", url}};
}

std::unique_ptr<WebChild> MakeWebChild(const Config& config, const DaemonPaths& paths, const std::string& self_exe,
                                       std::vector<int> close_in_child, const os::Env& env,
                                       std::function<void(const std::string&)> log) {
  Config machine;  // the machine's file alone: its web.listen is the system daemon's
  if (!paths.system) (void)LoadConfigFile(kMachineConfigFile, true, machine);
  const std::string listen = WebListenFor(config, machine.web_listen, paths.system);
  if (listen == "off") return nullptr;
  WebChildSpec spec;
  spec.exe = self_exe.substr(0, self_exe.rfind('/') + 1) + "gpulane-web";
  if (access(spec.exe.c_str(), X_OK) != 0) {
    log(fmt::format("web: no /metrics and no dashboard: {} is missing (build or install gpulane-web beside gpulane, or set "
                    "[web] listen = \"off\")", spec.exe));
    return nullptr;
  }
  spec.argv = {"gpulane-web", "--listen", listen, "--socket", paths.socket};
  if (config.web_show_commands) spec.argv.push_back("--show-commands");
  for (const auto& host : config.web_allowed_hosts) spec.argv.insert(spec.argv.end(), {"--allow-host", host});
  for (const auto& peer : config.web_peers) spec.argv.insert(spec.argv.end(), {"--peer", peer});
  if (paths.system && geteuid() == 0) {
    // The system daemon's HTTP side runs as nobody: it needs nothing but the socket (mode 0666).
    passwd pw{}, *found = nullptr;
    char buf[4096];
    if (getpwnam_r("nobody", &pw, buf, sizeof buf, &found) != 0 || !found) {
      log("web: no /metrics and no dashboard: there is no user \"nobody\" to run gpulane-web as");
      return nullptr;
    }
    spec.drop_privileges = true;
    spec.uid = found->pw_uid;
    spec.gid = found->pw_gid;
  }
  spec.close_in_child = std::move(close_in_child);
  spec.ask_url = true;
  return std::make_unique<WebChild>(std::move(spec), env, std::move(log));
}

}  // namespace gpulane::daemon
