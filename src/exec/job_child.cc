#include "exec/job_child.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/close_range.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fmt/format.h>

namespace gpulane::exec {
namespace {

// In the child: records a failed step (`err` 0: `what` is the whole reason). Returns false.
bool ChildFailed(ChildReport* failure, int err, const char* what) {
  failure->kind = ChildReport::kFailed;
  failure->err = err;
  std::snprintf(failure->what, sizeof failure->what, "%s", what);
  return false;
}

const char* FileKind(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "of an unknown kind";
}

// /dev/null: the one file besides regular ones a log may be (to throw the output away).
bool IsNullDevice(const struct stat& st) { return S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3); }

// The n-th name to try for a new log: `path` itself, then "<stem>.<n><ext>" ("gpulane-12.out" ->
// "gpulane-12.1.out"; without an extension "<path>.<n>"). False when it does not fit `size`.
bool CandidateName(const char* path, int n, char* out, std::size_t size) {
  int len = 0;
  if (n == 0) {
    len = std::snprintf(out, size, "%s", path);
  } else {
    const char* slash = std::strrchr(path, '/');
    const char* base = slash ? slash + 1 : path;
    const char* dot = std::strrchr(base, '.');
    if (!dot || dot == base) dot = path + std::strlen(path);
    len = std::snprintf(out, size, "%.*s.%d%s", static_cast<int>(dot - path), path, n, dot);
  }
  return len > 0 && static_cast<std::size_t>(len) < size;
}

constexpr int kMaxNewLogNames = 1000;

// In the child, with the job's rights: opens the log `path` (`which`: "output" or "error", set by
// `option`), appending, without following a final symlink, blocking on a FIFO or acquiring a
// controlling terminal, and keeps it only when it is a regular file or /dev/null. `new_file`:
// create it afresh (O_EXCL), taking the next free CandidateName when the name is taken. Writes the
// name used to `opened` (PATH_MAX bytes) and the size it had to `offset`. Returns the descriptor,
// or -1 with `failure` filled in.
int OpenLog(const char* path, bool new_file, const char* which, const char* option, char* opened,
            std::uint64_t* offset, ChildReport* failure) {
  char what[sizeof failure->what];
  const int flags = O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC | (new_file ? O_EXCL : 0);
  int fd = -1;
  int err = 0;
  for (int n = 0; n < (new_file ? kMaxNewLogNames : 1); ++n) {
    if (!CandidateName(path, n, opened, PATH_MAX)) {
      err = ENAMETOOLONG;
      break;
    }
    fd = open(opened, flags, 0644);
    err = fd < 0 ? errno : 0;
    if (fd >= 0 || err != EEXIST || !new_file) break;
  }
  struct stat st {};
  if (fd < 0) {
    if (err == ENXIO && lstat(opened, &st) == 0) {  // a FIFO nobody reads, or a socket
      std::snprintf(what, sizeof what, "use %s as the job's %s log: it is %s, not a regular file; give %s a regular file",
                    opened, which, FileKind(st.st_mode), option);
      ChildFailed(failure, 0, what);
      return -1;
    }
    if (err == ELOOP) {
      std::snprintf(what, sizeof what, "open the job's %s log %s: it is a symbolic link, which logs never follow; give %s the file it points to",
                    which, opened, option);
      ChildFailed(failure, 0, what);
      return -1;
    }
    if (err == EEXIST && new_file) {
      std::snprintf(what, sizeof what, "create the job's %s log: %s and the next %d names like it are taken; give %s a path",
                    which, path, kMaxNewLogNames - 1, option);
      ChildFailed(failure, 0, what);
      return -1;
    }
    std::snprintf(what, sizeof what, "open the %s log %s", which, opened);
    ChildFailed(failure, err, what);
    return -1;
  }
  if (fstat(fd, &st) != 0 || !(S_ISREG(st.st_mode) || IsNullDevice(st))) {
    close(fd);
    std::snprintf(what, sizeof what, "use %s as the job's %s log: it is %s, not a regular file; give %s a regular file",
                  opened, which, FileKind(st.st_mode), option);
    ChildFailed(failure, 0, what);
    return -1;
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  *offset = S_ISREG(st.st_mode) ? static_cast<std::uint64_t>(st.st_size) : 0;
  return fd;
}

// In the child: opens the job's logs onto stdout and stderr and reports them through `report_fd`.
bool OpenLogs(const JobSpec& spec, int report_fd, ChildReport* failure) {
  if (spec.stdout_path.empty() && spec.stderr_path.empty()) return true;
  ChildReport logs;
  logs.kind = ChildReport::kLogsOpened;
  const bool shared = spec.stderr_path.empty() || spec.stderr_path == spec.stdout_path;
  if (!spec.stdout_path.empty()) {
    int fd = OpenLog(spec.stdout_path.c_str(), spec.stdout_new_file, "output", "-o", logs.stdout_path,
                     &logs.stdout_offset, failure);
    if (fd < 0) return false;
    if (dup2(fd, STDOUT_FILENO) < 0 || (shared && dup2(fd, STDERR_FILENO) < 0))
      return ChildFailed(failure, errno, "attach the output log");
    if (shared) {
      std::memcpy(logs.stderr_path, logs.stdout_path, sizeof logs.stderr_path);
      logs.stderr_offset = logs.stdout_offset;
    }
    close(fd);
  }
  if (!spec.stderr_path.empty() && !shared) {
    int fd = OpenLog(spec.stderr_path.c_str(), false, "error", "-e", logs.stderr_path, &logs.stderr_offset, failure);
    if (fd < 0) return false;
    if (dup2(fd, STDERR_FILENO) < 0) return ChildFailed(failure, errno, "attach the error log");
    close(fd);
  }
  WriteReport(report_fd, logs);
  return true;
}

// In the forked child: become the job's user (its groups looked up by the parent), enter its
// directory, open its logs. False (with `failure` filled in) when a step failed.
bool PrepareChild(const JobSpec& spec, const std::vector<gid_t>& groups, int report_fd, ChildReport* failure) {
  if (spec.uid && spec.gid && (*spec.uid != geteuid() || *spec.gid != getegid())) {
    if (setgroups(groups.size(), groups.data()) != 0) return ChildFailed(failure, errno, "setgroups");
    if (setgid(*spec.gid) != 0) return ChildFailed(failure, errno, "setgid");
    if (setuid(*spec.uid) != 0) return ChildFailed(failure, errno, "setuid");
    if (setuid(0) == 0 && *spec.uid != 0) return ChildFailed(failure, EPERM, "drop root for good");  // must be impossible now
  }
  if (!spec.cwd.empty() && chdir(spec.cwd.c_str()) != 0) return ChildFailed(failure, errno, "enter the working directory");
  return OpenLogs(spec, report_fd, failure);
}

// In the forked child, still root: the job's device isolation (exec/device_isolation.h). A job that
// cannot be isolated fails here when isolation is required, else it starts with a warning.
bool Isolate(const JobSpec& spec, const IsolationFds& fds, int report_fd, ChildReport* failure, const Clock& clock) {
  if (!spec.isolation_failure.empty()) {
    if (spec.isolation_required) return ChildFailed(failure, 0, spec.isolation_failure.c_str());
    return true;  // the parent warns
  }
  if (!spec.isolation) return true;
  ChildReport report;
  if (ApplyIsolation(*spec.isolation, clock, report.what, sizeof report.what, &report.err, &report.steps)) {
    report.kind = ChildReport::kIsolated;
    report.what[0] = '\0';
    if (fds.hold_read >= 0) report.holder = StartNamespaceHolder(fds.hold_read, fds.timing ? STDERR_FILENO : -1, fds.host_ns, clock);
    report.steps.holder_ns = clock.MonotonicNs();
    WriteReport(report_fd, report);
    return true;
  }
  if (spec.isolation_required) {
    report.kind = ChildReport::kFailed;
    *failure = report;
    return false;
  }
  report.kind = ChildReport::kWarning;
  WriteReport(report_fd, report);
  return true;
}

}  // namespace

void WriteReport(int fd, const ChildReport& report) {
  const char* p = reinterpret_cast<const char*>(&report);
  std::size_t left = sizeof report;
  while (left > 0) {
    ssize_t n = write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

bool ReadReport(int fd, ChildReport* report) {
  char* p = reinterpret_cast<char*>(report);
  std::size_t got = 0;
  while (got < sizeof *report) {
    ssize_t n = read(fd, p + got, sizeof *report - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    got += static_cast<std::size_t>(n);
  }
  return true;
}

Result<std::vector<gid_t>> GroupsOf(std::uint32_t uid, std::uint32_t gid) {
  struct passwd pw;
  struct passwd* found = nullptr;
  std::vector<char> buf(16384);
  if (getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) != 0 || !found)
    return MakeError(ErrorKind::kIo, fmt::format("cannot start the job: uid {} has no entry in the user database", uid));
  std::vector<gid_t> groups(256);
  int n = static_cast<int>(groups.size());
  if (getgrouplist(found->pw_name, gid, groups.data(), &n) < 0) {
    groups.resize(static_cast<std::size_t>(n));
    if (getgrouplist(found->pw_name, gid, groups.data(), &n) < 0)
      return MakeError(ErrorKind::kIo, fmt::format("cannot start the job: cannot list the groups of {}", found->pw_name));
  }
  groups.resize(static_cast<std::size_t>(n));
  return groups;
}

[[noreturn]] void BecomeTheJob(const ChildPlan& plan) {
  const JobSpec& spec = plan.spec;
  setpgid(0, 0);
  signal(SIGTTOU, SIG_DFL);
  // Only 0, 1, 2 and the descriptors asked for reach the job (not NVML's, not the lease dir's).
  if (close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) != 0)
    for (int fd = 3; fd < 4096; ++fd) fcntl(fd, F_SETFD, FD_CLOEXEC);
  for (int fd : spec.keep_fds) fcntl(fd, F_SETFD, 0);
  // The job starts with no signal blocked, whatever gpulane blocked to take its signals in turn.
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  ChildReport failure;
  if (Isolate(spec, plan.isolation_fds, plan.report_fd, &failure, plan.clock) &&
      PrepareChild(spec, plan.groups, plan.report_fd, &failure)) {
    // The exec mark: the last step before execve; nothing that could fail (but execve) comes after.
    // Flushed to disk first, so that after a power loss the job is known to have maybe run.
    if (spec.exec_mark_fd >= 0 && (pwrite(spec.exec_mark_fd, "1", 1, 0) != 1 || fdatasync(spec.exec_mark_fd) != 0)) {
      ChildFailed(&failure, errno, "record the start");
    } else {
      execve(plan.program, plan.argv, plan.envp);
      ChildFailed(&failure, errno, "run");
      failure.at_exec = true;
      if (spec.exec_mark_fd >= 0) pwrite(spec.exec_mark_fd, "0", 1, 0);  // it did not start after all
    }
  }
  WriteReport(plan.report_fd, failure);
  _exit(failure.at_exec && failure.err == ENOENT ? 127 : 126);
}


}  // namespace gpulane::exec
