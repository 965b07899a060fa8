#include "cli/daemon_control.h"

#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <fmt/format.h>
#include <fstream>
#include <sstream>
#include <thread>

#include "cli/client.h"
#include "cli/common.h"
#include "daemon/paths.h"
#include "store/job_counts.h"
#include "util/config.h"
#include "util/exit_codes.h"
#include "util/listen_address.h"
#include "util/terminal_text.h"

namespace gpulane::cli {
namespace {

constexpr double kStopPatienceS = 30;

// What the daemon runs with that a systemd user manager would not give it: pinned in the unit.
// GPULANE_LEASE_DIR above all: a daemon whose supervisors leased GPUs in another lease directory
// than this shell's `gpulane run` would hand the same GPU to both. FAKE_NVML_STATE is the recorded
// GPUs' file of the fake NVML that GPULANE_NVML_LIBRARY may name (the README's demo).
constexpr const char* kPinnedVariables[] = {"GPULANE_STATE_DIR",    "GPULANE_SOCKET", "GPULANE_CONFIG",
                                            "GPULANE_NVML_LIBRARY", "GPULANE_LEASE_DIR", "FAKE_NVML_STATE",
                                            "XDG_STATE_HOME",       "XDG_CONFIG_HOME"};

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : "";
}

// `text` as one word of a unit file's value: quoted, with systemd's escapes and specifiers
// ("%" and, in command lines, "$") taken literally.
std::string UnitWord(const std::string& text, bool command) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '%') out += '%';
    if (c == '$' && command) out += '$';
    out += c;
  }
  return out + "\"";
}

std::string ReadSmallFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// `text` into `path` (its folder `dir` made first), whole or not at all: written beside it, then renamed.
Status WriteFileAtomically(const std::string& dir, const std::string& path, const std::string& text) {
  for (std::size_t i = 1; i <= dir.size(); ++i)
    if ((i == dir.size() || dir[i] == '/') && mkdir(dir.substr(0, i).c_str(), 0755) != 0 && errno != EEXIST)
      return MakeError(ErrorKind::kIo, fmt::format("cannot create {}: {}", dir.substr(0, i), std::strerror(errno)));
  const std::string temp = path + ".new";
  const int fd = open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  int error = fd < 0 ? errno : 0;
  if (!error && (write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size()) || fsync(fd) != 0)) error = errno ? errno : EIO;
  if (fd >= 0) close(fd);
  if (!error && rename(temp.c_str(), path.c_str()) != 0) error = errno;
  if (error) {
    unlink(temp.c_str());
    return MakeError(ErrorKind::kIo, fmt::format("cannot write {}: {}", path, std::strerror(error)));
  }
  return Status::Ok();
}

// Alive, or a zombie whose other threads are still ending: a thread group's leader shows 'Z' while
// its threads (the daemon's sampler, NVML's own) finish exiting, and its parent can reap it only
// after them (seen under ASan, whose threads end slowly: `daemon stop` returned before its parent
// could reap it). Ended once gone, or a zombie alone in its thread group.
bool Alive(pid_t pid) {
  const std::string stat = ReadSmallFile(fmt::format("/proc/{}/stat", pid));
  const auto close = stat.rfind(')');
  if (close == std::string::npos || close + 2 >= stat.size()) return false;
  if (stat[close + 2] != 'Z') return true;
  std::error_code ec;
  auto tasks = std::filesystem::directory_iterator(fmt::format("/proc/{}/task", pid), ec);
  return !ec && std::distance(tasks, std::filesystem::directory_iterator()) > 1;
}

std::string UserName() {
  passwd pw{}, *found = nullptr;
  char buf[4096];
  if (getpwuid_r(getuid(), &pw, buf, sizeof buf, &found) == 0 && found) return found->pw_name;
  return fmt::format("{}", getuid());
}

std::string Plural(std::int64_t n, const char* word) { return fmt::format("{} {}{}", n, word, n == 1 ? "" : "s"); }

// The user's own daemon's state, one line: where, and how many of its jobs are unfinished.
std::string StateLine(const daemon::DaemonPaths& user) {
  auto counts = store::CountJobs(user.state_dir + "/jobs.db");
  if (!counts) return fmt::format("state:     {} ({})", user.state_dir, counts.error().message);
  return fmt::format("state:     {} ({} unfinished, {} in all)", user.state_dir, counts->unfinished,
                     Plural(counts->total, "job"));
}

// Whether only `gpulane submit` starts the stopped per-user daemon: a job command starts it only
// while its state holds jobs, or cannot be read (StartWhenStateHasJobs).
bool OnlySubmitStartsIt(const daemon::DaemonPaths& user) {
  auto counts = store::CountJobs(user.state_dir + "/jobs.db");
  return counts && counts->total == 0;
}

// How a stopped per-user daemon comes back (OnlySubmitStartsIt).
std::string StartLine(const daemon::DaemonPaths& user) {
  const std::string how = OnlySubmitStartsIt(user)
                              ? "gpulane submit starts it (its state holds no jobs, so no other command does)"
                              : "the next gpulane command about jobs (gpulane queue) starts it while its state holds jobs";
  return "start:     " + how + "; gpulane daemon --user --install keeps it running under systemd";
}

// After `daemon stop`: how the stopped per-user daemon comes back, as StartLine says.
std::string ComesBackLine(const daemon::DaemonPaths& user) {
  if (OnlySubmitStartsIt(user))
    return "its state holds no jobs, so only gpulane submit starts it again (no other command does)";
  return "running jobs go on under their supervisors, queued ones wait: the next gpulane command about jobs starts it "
         "again";
}

std::string DashboardLine(const nlohmann::json& web) {
  const std::string state = web.value("state", "");
  if (state == "listening") return "dashboard: " + web.value("url", "");
  // Port 0: the kernel picks one when gpulane-web listens; until then there is no web port to name.
  if (auto listen = ParseListen(web.value("listen", "")); state == "starting" && listen && listen->port == 0)
    return fmt::format("dashboard: not serving a web port yet (gpulane-web gets one on {} from the kernel once it "
                       "listens; the daemon's log says why it has not)", listen->host);
  if (state == "starting") return fmt::format("dashboard: not listening yet on {} (the daemon's log says why)", web.value("listen", "?"));
  if (state == "off") return "dashboard: off ([web] listen = \"off\", or gpulane-web is missing: the daemon's log says which)";
  return "dashboard: unknown (an older daemon)";
}

// Prints `text` on stdout, each line escaped for the terminal (paths and URLs come from the
// environment and the daemon).
void PrintLines(const std::string& text) {
  std::string out;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t end = text.find('\n', start);
    out += EscapeForTerminal(text.substr(start, end == std::string::npos ? std::string::npos : end - start)) + "\n";
    if (end == std::string::npos) break;
    start = end + 1;
  }
  fmt::print("{}", out);
}

}  // namespace

int RunDaemonStatus() {
  auto pong = CallIfRunning({{"op", "ping"}}, 5, false, IfDown::kStartNone);
  if (!pong) {
    if (pong.error().kind != ErrorKind::kUnavailable) return Fail(pong.error());
    fmt::print("gpulane daemon: not running\n");
    return Fail(pong.error());  // the system daemon's: how to start it
  }
  const daemon::DaemonPaths user = daemon::UserPaths();
  std::string out;
  if (*pong) {
    const nlohmann::json& p = **pong;
    const std::string mode = p.value("mode", "?");
    out = fmt::format("gpulane daemon: running ({} mode), pid {}\nsocket:    {}\n", mode, p.value("pid", 0),
                      p.value("socket", "?"));
    if (mode == "user") out += StateLine(user) + "\n";
    // Just started on a large store: its jobs are read in parts while it answers (issue 23, item 8).
    if (const auto loading = p.find("loading"); loading != p.end() && loading->is_object())
      out += fmt::format("loading:   its jobs, {} of {} read; queue, submit and the other job commands answer once all "
                         "are in\n",
                         loading->value("loaded", 0), loading->value("total", 0));
    out += DashboardLine(p.value("web", nlohmann::json::object())) + "\n";
  } else {
    out = fmt::format("gpulane daemon: not running (nothing answers on {})\n{}\n{}\n", user.socket, StateLine(user),
                      StartLine(user));
  }
  PrintLines(out);
  return *pong ? kExitOk : kExitUnavailable;
}

int RunDaemonStop() {
  auto pong = CallIfRunning({{"op", "ping"}}, 5, false, IfDown::kStartNone);
  if (!pong) return Fail(pong.error());
  if (!*pong) {
    fmt::print("your gpulane daemon is not running\n");
    return kExitOk;
  }
  const nlohmann::json& p = **pong;
  if (p.value("mode", "") != "user")
    return Fail(MakeError(ErrorKind::kInvalidArgument, "the gpulane system daemon is systemd's to stop: "
                                                       "'sudo systemctl stop gpulane' (an admin's)"));
  const pid_t pid = p.value("pid", 0);
  if (pid <= 1) return Fail(MakeError(ErrorKind::kIo, "the gpulane daemon did not say its pid"));
  if (kill(pid, SIGTERM) != 0)
    return Fail(MakeError(ErrorKind::kPermission, fmt::format("cannot stop the gpulane daemon (pid {}): {}", pid, std::strerror(errno))));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(kStopPatienceS);
  while (Alive(pid)) {
    if (std::chrono::steady_clock::now() > deadline)
      return Fail(MakeError(ErrorKind::kTimeout, fmt::format("the gpulane daemon (pid {}) did not stop within {:g} s of "
                                                             "SIGTERM; its log says why", pid, kStopPatienceS)));
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  fmt::print("stopped your gpulane daemon (pid {}); {}\n", pid, ComesBackLine(daemon::UserPaths()));
  return kExitOk;
}

std::string UserUnitText(const std::string& exe, const std::map<std::string, std::string>& environment) {
  std::string text =
      "# Written by 'gpulane daemon --user --install': your own gpulane queue, started at login (at boot\n"
      "# with 'loginctl enable-linger'), restarted after a crash. docs/user-daemon.md.\n"
      "[Unit]\n"
      "Description=gpulane per-user GPU job queue (gpulane daemon --user)\n"
      "\n"
      "[Service]\n"
      "Type=simple\n";
  for (const auto& [name, value] : environment) text += "Environment=" + UnitWord(name + "=" + value, false) + "\n";
  text += "ExecStart=" + UnitWord(exe, true) + " daemon --user\n" +
          "# Jobs run under their own supervisors: stopping or restarting the daemon must not kill them.\n"
          "KillMode=process\n"
          "Restart=on-failure\n"
          "RestartSec=2\n"
          "\n"
          "[Install]\n"
          "WantedBy=default.target\n";
  return text;
}

int RunDaemonInstall() {
  auto config = LoadConfig();
  if (!config) return Fail(config.error());
  auto installed = daemon::SystemDaemonInstalled(config->daemon_mode);
  if (!installed) return Fail(installed.error());
  if (*installed)
    return Fail(MakeError(ErrorKind::kInvalidArgument, "a system daemon serves this machine: your jobs go to it, so a "
                                                       "per-user daemon is not needed (nothing written)"));
  std::string dir = Env("XDG_CONFIG_HOME");
  if (dir.empty() && Env("HOME").empty())
    return Fail(MakeError(ErrorKind::kInvalidArgument, "neither XDG_CONFIG_HOME nor HOME is set: nowhere to write the unit"));
  dir = (dir.empty() ? Env("HOME") + "/.config" : dir) + "/systemd/user";
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return Fail(MakeError(ErrorKind::kIo, "cannot find the gpulane binary (/proc/self/exe)"));
  std::map<std::string, std::string> environment;
  for (const char* name : kPinnedVariables)
    if (!Env(name).empty()) environment[name] = Env(name);
  const std::string text = UserUnitText(std::string(exe, static_cast<std::size_t>(n)), environment);
  const std::string path = dir + "/gpulane.service";
  if (Status written = WriteFileAtomically(dir, path, text); !written.ok()) return Fail(written.error());
  std::string out = fmt::format("wrote {}\nto start it now and at every login:\n  systemctl --user daemon-reload\n"
                                "  systemctl --user enable --now gpulane\n"
                                "to keep it (and your jobs) running after you log out, and start it at boot:\n"
                                "  loginctl enable-linger {}\n", path, UserName());
  if (auto pong = CallIfRunning({{"op", "ping"}}, 5, false, IfDown::kStartNone); pong && *pong)
    out += "first stop the daemon running now (systemd's cannot start beside it): gpulane daemon stop\n";
  if (Env("XDG_RUNTIME_DIR").empty() && Env("GPULANE_SOCKET").empty())  // a pinned socket is the same for both
    out += "note: this shell has no XDG_RUNTIME_DIR, so its commands look for the daemon in /tmp, while systemd's listens "
           "in /run/user/UID: log in with a session (ssh with pam_systemd) or export XDG_RUNTIME_DIR=/run/user/$(id -u)\n";
  PrintLines(out);
  return kExitOk;
}

}  // namespace gpulane::cli
