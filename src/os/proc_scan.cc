#include "os/proc_scan.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace gpulane {
namespace {

bool IsPid(const char* name) {
  if (!*name) return false;
  for (const char* c = name; *c; ++c)
    if (*c < '0' || *c > '9') return false;
  return true;
}

// The text of a small /proc file (at most 4 KiB), "" when it cannot be read.
std::string ReadSmall(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return {};
  char buf[4096];
  const ssize_t n = read(fd, buf, sizeof buf);
  close(fd);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
}

}  // namespace

std::vector<ProcEntry> ListProcesses(const std::string& proc_root) {
  std::vector<ProcEntry> out;
  DIR* dir = opendir(proc_root.c_str());
  if (!dir) return out;
  while (const dirent* e = readdir(dir)) {
    if (!IsPid(e->d_name)) continue;
    const std::string base = proc_root + "/" + e->d_name;
    // "pid (comm) S ppid pgrp ...": comm may hold anything; parse after the last ')'.
    const std::string stat = ReadSmall(base + "/stat");
    const auto close_paren = stat.rfind(')');
    if (close_paren == std::string::npos || close_paren + 4 > stat.size()) continue;
    const char state = stat[close_paren + 2];
    if (state == 'Z' || state == 'X') continue;
    char* end = nullptr;
    ProcEntry p;
    p.pid = static_cast<pid_t>(std::strtol(e->d_name, nullptr, 10));
    p.ppid = static_cast<pid_t>(std::strtol(stat.c_str() + close_paren + 4, &end, 10));
    p.pgid = static_cast<pid_t>(std::strtol(end, nullptr, 10));
    const std::string status = ReadSmall(base + "/status");
    const auto uid_at = status.find("\nUid:");
    if (uid_at == std::string::npos) continue;
    p.uid = static_cast<std::uint32_t>(std::strtoul(status.c_str() + uid_at + 5, nullptr, 10));
    out.push_back(p);
  }
  closedir(dir);
  return out;
}

bool HoldsFileOpen(pid_t pid, std::uint64_t dev, std::uint64_t ino, const std::string& proc_root) {
  const std::string fds = proc_root + "/" + std::to_string(pid) + "/fd";
  DIR* dir = opendir(fds.c_str());
  if (!dir) return false;
  bool holds = false;
  while (const dirent* e = readdir(dir)) {
    if (!IsPid(e->d_name)) continue;
    struct stat st {};
    // fstatat follows the kernel's link to the open file itself, whatever its name now.
    if (fstatat(dirfd(dir), e->d_name, &st, 0) != 0) continue;
    if (static_cast<std::uint64_t>(st.st_dev) == dev && static_cast<std::uint64_t>(st.st_ino) == ino) {
      holds = true;
      break;
    }
  }
  closedir(dir);
  return holds;
}

}  // namespace gpulane
