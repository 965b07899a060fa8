#include "support/planted.h"

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fmt/format.h>
#include <fstream>
#include <random>
#include <stdexcept>

namespace gpulane::test {
namespace fs = std::filesystem;

namespace {

std::string RandomHex8() {
  static std::mt19937 rng{std::random_device{}()};
  return fmt::format("{:08x}", rng());
}

[[noreturn]] void ExecSleep() {
  int null = open("/dev/null", O_RDWR);
  dup2(null, 0);
  dup2(null, 1);
  dup2(null, 2);
  execl("/bin/sleep", "sleep", "3600", static_cast<char*>(nullptr));
  _exit(127);
}

// Reads until end of file: every process holding the close-on-exec write end has exec'd (or died).
void WaitForExec(int read_fd) {
  char buf[64];
  while (true) {
    ssize_t n = read(read_fd, buf, sizeof buf);
    if (n == 0) return;
    if (n < 0 && errno != EINTR) return;
  }
}

// "sleep" once the process has exec'd it.
bool RunsSleep(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/comm", pid));
  std::string comm;
  std::getline(in, comm);
  return comm == "sleep";
}

}  // namespace

PlantedFile::PlantedFile(const fs::path& path, const std::string& content, Holder holder,
                         std::optional<std::uint32_t> owner)
    : path_(path) {
  // Created under a temporary name, locked, filled, then renamed into place: it appears whole and
  // already locked, as gpulane's own files do (LeaseDir::CreateFile).
  const fs::path tmp = path.parent_path() / (".tmp-plant-" + RandomHex8());
  fd_ = open(tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd_ < 0) throw std::runtime_error(fmt::format("cannot create {}: {}", tmp.string(), std::strerror(errno)));
  fchmod(fd_, 0644);
  auto fail = [&](const std::string& why) {
    unlink(tmp.c_str());
    close(fd_);
    fd_ = -1;
    if (holder_ > 0) KillAndReap(holder_);
    throw std::runtime_error(fmt::format("cannot plant {}: {}", path.string(), why));
  };
  if (holder == Holder::kTest && flock(fd_, LOCK_EX | LOCK_NB) != 0) fail(std::strerror(errno));
  if (holder == Holder::kChild) {
    // The child locks the open file it shares with the test, keeps a descriptor of it across the
    // exec and sleeps: the lock is the file's as long as either holds it, the holder the child.
    int sync[2];
    if (pipe2(sync, O_CLOEXEC) != 0) fail("pipe2 failed");
    const pid_t test = getpid();
    holder_ = fork();
    if (holder_ < 0) fail("fork failed");
    if (holder_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != test || flock(fd_, LOCK_EX | LOCK_NB) != 0 || dup(fd_) < 0) _exit(1);  // dup: not close-on-exec
      ExecSleep();
    }
    close(sync[1]);
    WaitForExec(sync[0]);
    close(sync[0]);
    if (!RunsSleep(holder_)) fail("its lock holder did not start");
  }
  if (write(fd_, content.data(), content.size()) != static_cast<ssize_t>(content.size()) ||
      (owner && fchown(fd_, *owner, static_cast<gid_t>(-1)) != 0) ||
      renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, path.c_str(), RENAME_NOREPLACE) != 0)
    fail(std::strerror(errno));
}

PlantedFile::PlantedFile(PlantedFile&& other) noexcept : path_(std::move(other.path_)), fd_(other.fd_), holder_(other.holder_) {
  other.fd_ = -1;
  other.holder_ = -1;
}

PlantedFile::~PlantedFile() {
  if (fd_ < 0) return;
  unlink(path_.c_str());
  close(fd_);
  if (holder_ > 0) KillAndReap(holder_);
}

void PlantedFile::GiveTo(std::uint32_t uid) {
  if (fchown(fd_, uid, static_cast<gid_t>(-1)) != 0)
    throw std::runtime_error(fmt::format("cannot give {} to uid {}: {}", path_.string(), uid, std::strerror(errno)));
}

PlantedFile PlantLease(const fs::path& lease_dir, const nlohmann::json& record) {
  const std::string name = fmt::format("{}.{}.lease", record.at("job_id").get<std::string>(), RandomHex8());
  return PlantedFile(lease_dir / name, record.dump());
}

PlantedFile PlantTicket(const fs::path& lease_dir, nlohmann::json record) {
  const std::string id = fmt::format("w{:020}.{}", record.at("seq").get<std::uint64_t>(), RandomHex8());
  record["id"] = id;
  return PlantedFile(lease_dir / (id + ".wait"), record.dump());
}

void KillAndReap(pid_t pid) {
  if (pid <= 0) return;
  kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

JobTree::JobTree() {
  int sync[2];
  if (pipe2(sync, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
  const pid_t test = getpid();
  supervisor_ = fork();
  if (supervisor_ < 0) throw std::runtime_error("fork failed");
  if (supervisor_ == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != test) _exit(1);
    setpgid(0, 0);
    const pid_t supervisor = getpid();
    pid_t child = fork();
    if (child == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);  // dies with its supervisor
      if (getppid() != supervisor) _exit(1);
      setpgid(0, 0);
      ExecSleep();
    }
    if (write(sync[1], &child, sizeof child) != sizeof child) _exit(1);
    ExecSleep();
  }
  close(sync[1]);
  ssize_t n = read(sync[0], &child_, sizeof child_);
  WaitForExec(sync[0]);
  close(sync[0]);
  if (n != sizeof child_ || child_ <= 0 || !RunsSleep(supervisor_) || !RunsSleep(child_)) {
    if (child_ > 0) kill(child_, SIGKILL);
    KillAndReap(supervisor_);
    throw std::runtime_error("the job tree's sleeps did not start");
  }
}

JobTree::~JobTree() {
  if (child_ > 0) kill(child_, SIGKILL);  // reaped by whoever inherits it once its supervisor is gone
  KillAndReap(supervisor_);
}

SleepProcess::SleepProcess(std::optional<std::uint32_t> as_uid) {
  int sync[2];
  if (pipe2(sync, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
  const pid_t test = getpid();
  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    if (as_uid && (setgroups(0, nullptr) != 0 || setgid(*as_uid) != 0 || setuid(*as_uid) != 0)) _exit(126);
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // after setuid, which clears it
    if (getppid() != test) _exit(1);
    ExecSleep();
  }
  close(sync[1]);
  WaitForExec(sync[0]);
  close(sync[0]);
  if (!RunsSleep(pid_)) {
    KillAndReap(pid_);
    throw std::runtime_error("the sleep did not start");
  }
}

SleepProcess::~SleepProcess() { KillAndReap(pid_); }

Zombie::Zombie() {
  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) _exit(0);
  siginfo_t info{};
  // Until it has exited, without reaping it.
  while (waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOWAIT) != 0 && errno == EINTR) {
  }
}

Zombie::~Zombie() {
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
}

std::uint32_t PidOutsideThisNamespace(unsigned k) {
  std::ifstream in("/proc/sys/kernel/pid_max");
  std::uint64_t pid_max = 4194304;  // the kernel's limit when the file cannot be read
  in >> pid_max;
  return static_cast<std::uint32_t>(pid_max + 1 + k);
}

}  // namespace gpulane::test
