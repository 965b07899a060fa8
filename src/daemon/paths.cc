#include "daemon/paths.h"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>

namespace gpulane::daemon {
namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : "";
}

bool Exists(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0;
}

std::string NameOf(uid_t uid) {
  struct passwd pw;
  struct passwd* found = nullptr;
  char buf[4096];
  if (getpwuid_r(uid, &pw, buf, sizeof buf, &found) == 0 && found) return fmt::format("{} (uid {})", found->pw_name, uid);
  return fmt::format("uid {}", uid);
}

bool Within(const std::string& path, const std::string& dir) {
  return path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 && path[dir.size()] == '/';
}

}  // namespace

DaemonPaths SystemPaths() {
  DaemonPaths p{kSystemSocket, kSystemStateDir, true};
  if (!Env("GPULANE_SOCKET").empty()) p.socket = Env("GPULANE_SOCKET");
  if (!Env("GPULANE_STATE_DIR").empty()) p.state_dir = Env("GPULANE_STATE_DIR");
  return p;
}

std::string UserTmpDir() { return fmt::format("/tmp/gpulane-{}", getuid()); }

DaemonPaths UserPaths() {
  DaemonPaths p;
  std::string runtime = Env("XDG_RUNTIME_DIR");
  p.socket = runtime.empty() ? UserTmpDir() + "/gpulane.sock" : runtime + "/gpulane/gpulane.sock";
  std::string state = Env("XDG_STATE_HOME");
  if (state.empty()) state = Env("HOME").empty() ? UserTmpDir() + "/state" : Env("HOME") + "/.local/state";
  p.state_dir = state + "/gpulane";
  if (!Env("GPULANE_SOCKET").empty()) p.socket = Env("GPULANE_SOCKET");
  if (!Env("GPULANE_STATE_DIR").empty()) p.state_dir = Env("GPULANE_STATE_DIR");
  return p;
}

Status EnsurePrivateDir(const std::string& dir, bool create) {
  const uid_t me = geteuid();
  const std::string fix = fmt::format("remove it (ask an admin if it is not yours) or set XDG_RUNTIME_DIR to a folder of "
                                      "your own");
  struct stat st {};
  if (lstat(dir.c_str(), &st) != 0) {
    if (errno != ENOENT)
      return MakeError(ErrorKind::kIo, fmt::format("cannot check {}: {}", dir, std::strerror(errno)));
    if (!create) return Status::Ok();
    if (mkdir(dir.c_str(), 0700) == 0) {
      chmod(dir.c_str(), 0700);  // the umask may have taken bits off
    } else if (errno != EEXIST) {
      return MakeError(ErrorKind::kIo, fmt::format("cannot create {}: {}; set XDG_RUNTIME_DIR to a folder of your own",
                                                   dir, std::strerror(errno)));
    }
    if (lstat(dir.c_str(), &st) != 0)
      return MakeError(ErrorKind::kIo, fmt::format("cannot check {}: {}", dir, std::strerror(errno)));
  }
  if (S_ISLNK(st.st_mode))
    return MakeError(ErrorKind::kUnsafe,
                     fmt::format("{} is a symbolic link, not gpulane's private folder: another user may have made it "
                                 "to take your jobs; {}",
                                 dir, fix));
  if (!S_ISDIR(st.st_mode))
    return MakeError(ErrorKind::kUnsafe, fmt::format("{} is not a directory; {}", dir, fix));
  if (st.st_uid != me)
    return MakeError(ErrorKind::kUnsafe,
                     fmt::format("{} belongs to {}, not you: another user may have made it to take your jobs; {}", dir,
                                 NameOf(st.st_uid), fix));
  if ((st.st_mode & 07777) != 0700)
    return MakeError(ErrorKind::kUnsafe,
                     fmt::format("{} has mode {:04o}, not 0700: others could reach gpulane's socket and state in it; "
                                 "fix with chmod 700 {}",
                                 dir, st.st_mode & 07777, dir));
  return Status::Ok();
}

Status SecureUserPaths(const DaemonPaths& paths, bool create) {
  const std::string tmp = UserTmpDir();
  if (!Within(paths.socket, tmp) && !Within(paths.state_dir, tmp)) return Status::Ok();
  return EnsurePrivateDir(tmp, create);
}

Result<bool> SystemDaemonInstalled(const std::string& config_mode, const std::string& root) {
  const std::string forced = Env("GPULANE_SYSTEM_DAEMON");
  if (forced == "1") return true;
  if (forced == "0") return false;
  if (!forced.empty())
    return MakeError(ErrorKind::kInvalidArgument,
                     fmt::format("GPULANE_SYSTEM_DAEMON='{}': use 1 (a system daemon serves this machine) or 0 (per-user daemons)", forced));
  if (config_mode == "system") return true;
  if (config_mode == "user") return false;
  return Exists(root + kSystemStateDir) || Exists(root + kEnabledUnitLink);
}

bool SystemUnitInstalled(const std::string& root) {
  for (const char* dir : {"/etc/systemd/system", "/usr/local/lib/systemd/system", "/usr/lib/systemd/system",
                          "/lib/systemd/system"})
    if (Exists(root + dir + "/gpulane.service")) return true;
  return false;
}

std::vector<std::string> SnapshotSockets() {
  std::vector<std::string> sockets = {SystemPaths().socket};
  if (Env("GPULANE_SOCKET").empty()) sockets.push_back(UserPaths().socket);
  return sockets;
}

}  // namespace gpulane::daemon
