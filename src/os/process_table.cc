#include "os/process_table.h"

#include <pwd.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

namespace gpulane {
namespace {

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream buf;
  buf << in.rdbuf();
  *out = buf.str();
  return true;
}

}  // namespace

std::string ProcfsProcessTable::UserName(std::uint32_t uid) {
  {
    std::lock_guard<std::mutex> lock(users_mutex_);
    auto it = users_.find(uid);
    if (it != users_.end()) return it->second;
  }
  std::string name = std::to_string(uid);
  struct passwd pw;
  struct passwd* result = nullptr;
  std::vector<char> buf(16384);
  if (getpwuid_r(uid, &pw, buf.data(), buf.size(), &result) == 0 && result) name = result->pw_name;
  std::lock_guard<std::mutex> lock(users_mutex_);
  users_[uid] = name;
  return name;
}

std::optional<ProcessInfo> ProcfsProcessTable::Lookup(std::uint32_t pid) {
  const std::string dir = root_ + "/" + std::to_string(pid);
  std::string status;
  if (!ReadFile(dir + "/status", &status)) return std::nullopt;
  ProcessInfo info;
  std::istringstream lines(status);
  std::string line;
  bool have_uid = false;
  std::string comm;
  while (std::getline(lines, line)) {
    if (line.rfind("Uid:", 0) == 0) {
      info.uid = static_cast<std::uint32_t>(std::stoul(line.substr(4)));
      have_uid = true;
    } else if (line.rfind("Name:", 0) == 0) {
      comm = line.substr(5);
      comm.erase(0, comm.find_first_not_of(" \t"));
    }
  }
  if (!have_uid) return std::nullopt;
  info.user = UserName(info.uid);
  std::string raw;
  ReadFile(dir + "/cmdline", &raw);
  while (!raw.empty() && raw.back() == '\0') raw.pop_back();
  if (raw.empty()) {
    info.command = comm;
    info.cmdline = "[" + comm + "]";
    return info;
  }
  std::string argv0 = raw.substr(0, raw.find('\0'));
  auto slash = argv0.rfind('/');
  info.command = slash == std::string::npos ? argv0 : argv0.substr(slash + 1);
  for (char& c : raw)
    if (c == '\0') c = ' ';
  info.cmdline = raw;
  return info;
}

bool ProcfsProcessTable::UnseenPidsMayBeOurs() {
  if (const char* forced = std::getenv("GPULANE_PID_NAMESPACE"); forced && *forced) return std::string(forced) == "container";
  std::ifstream comm(root_ + "/2/comm");
  std::string name;
  return !(std::getline(comm, name) && name == "kthreadd");
}

std::optional<ProcessLinks> ProcfsProcessTable::Links(std::uint32_t pid) {
  std::string stat;
  if (!ReadFile(root_ + "/" + std::to_string(pid) + "/stat", &stat)) return std::nullopt;
  // "pid (comm) S ppid pgrp session ...": comm may hold spaces and parentheses; parse after the last ')'.
  auto close = stat.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  char state = 0;
  ProcessLinks links;
  if (std::sscanf(stat.c_str() + close + 1, " %c %u %u %u", &state, &links.ppid, &links.pgid, &links.sid) != 4)
    return std::nullopt;
  if (state == 'Z' || state == 'X') return std::nullopt;
  return links;
}

bool BelongsTo(ProcessTable& table, std::uint32_t pid, std::uint32_t ancestor, std::uint32_t pgid) {
  for (int depth = 0; depth < 64 && pid > 1; ++depth) {
    if (pid == ancestor) return true;
    auto links = table.Links(pid);
    if (!links) return false;
    if (pgid != 0 && links->pgid == pgid) return true;
    pid = links->ppid;
  }
  return false;
}

void AnnotateProcesses(GpuSnapshot& snapshot, ProcessTable& table) {
  for (auto& device : snapshot.devices) {
    if (!device.processes) continue;
    for (auto& p : *device.processes) {
      auto info = table.Lookup(p.pid);
      if (!info) continue;
      p.uid = info->uid;
      p.user = info->user;
      p.command = info->command;
      p.cmdline = info->cmdline;
    }
  }
}

}  // namespace gpulane
