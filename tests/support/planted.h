#pragma once
// Test support: lease-directory state planted by the test itself, as other gpulane processes
// would leave it, without running them: lease and ticket files the test holds locked, and helper
// processes in the process tree shapes gpulane's leases own (a supervisor and its job in process
// groups of their own), other users' processes, and a zombie (an ended GPU process NVML still lists).
#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace gpulane::test {

/// A lease or ticket file in a lease directory, created whole, locked (flock LOCK_EX) and kept
/// locked by this process as its holder would (so gpulane reads it as live); removed and unlocked
/// on destruction. The descriptor is close-on-exec: processes the test starts do not hold it.
class PlantedFile {
 public:
  /// Whose flock holds the file: the test's own (its descriptor) or that of a `sleep` child
  /// started for it (so /proc/locks names that child as the holder: a process that is nobody's
  /// ancestor), which ends with the file.
  enum class Holder { kTest, kChild };
  /// `owner`: whose file it is from the moment it appears (root only; GiveTo changes it later).
  PlantedFile(const std::filesystem::path& path, const std::string& content, Holder holder = Holder::kTest,
              std::optional<std::uint32_t> owner = std::nullopt);
  ~PlantedFile();
  PlantedFile(PlantedFile&& other) noexcept;
  PlantedFile& operator=(PlantedFile&&) = delete;
  PlantedFile(const PlantedFile&) = delete;
  const std::filesystem::path& path() const { return path_; }
  /// Gives the file to another user (root only), as if that user had planted it: gpulane takes a
  /// record's user from its file's owner.
  void GiveTo(std::uint32_t uid);
  /// The child holding the lock (Holder::kChild), else -1.
  pid_t holder() const { return holder_; }

 private:
  std::filesystem::path path_;
  int fd_ = -1;
  pid_t holder_ = -1;
};

/// A live lease in `lease_dir` (format: src/lease/records.h LeaseRecord; at least "job_id",
/// "pid" and "gpus"), named "<job_id>.<8 hex>.lease" as gpulane names them.
PlantedFile PlantLease(const std::filesystem::path& lease_dir, const nlohmann::json& record);

/// A live ticket in `lease_dir` (format: TicketRecord; at least "seq", "pid" and "request"). Its
/// "id" is set to "w<20-digit seq>.<8 hex>" and the file named "<id>.wait", as gpulane does.
PlantedFile PlantTicket(const std::filesystem::path& lease_dir, nlohmann::json record);

/// Ends a process this test started (SIGKILL) and reaps it.
void KillAndReap(pid_t pid);

/// A `sleep` supervisor in a process group of its own (pgid == supervisor()) with one `sleep`
/// child in another group of its own (pgid == child()): the shapes a lease's "pid" (an ancestor)
/// and "pgid" (the job's group) own. Both have exec'd sleep when the constructor returns (so /proc
/// names them "sleep" from the start) and both die with the test (PR_SET_PDEATHSIG).
class JobTree {
 public:
  JobTree();
  ~JobTree();
  JobTree(const JobTree&) = delete;
  JobTree& operator=(const JobTree&) = delete;
  std::uint32_t supervisor() const { return static_cast<std::uint32_t>(supervisor_); }
  std::uint32_t child() const { return static_cast<std::uint32_t>(child_); }

 private:
  pid_t supervisor_ = -1;
  pid_t child_ = -1;
};

/// A plain `sleep` child of the test (same process group): a process outside gpulane, of the test's
/// user or (as root) of user `as_uid`. Has exec'd sleep when the constructor returns; dies with the test.
class SleepProcess {
 public:
  explicit SleepProcess(std::optional<std::uint32_t> as_uid = std::nullopt);
  ~SleepProcess();
  SleepProcess(const SleepProcess&) = delete;
  SleepProcess& operator=(const SleepProcess&) = delete;
  std::uint32_t pid() const { return static_cast<std::uint32_t>(pid_); }

 private:
  pid_t pid_ = -1;
};

/// A child of the test that has exited and is not reaped yet: /proc still shows who it was, but it
/// runs no more, as a GPU process that NVML still lists just after it ended.
class Zombie {
 public:
  Zombie();
  ~Zombie();
  Zombie(const Zombie&) = delete;
  Zombie& operator=(const Zombie&) = delete;
  std::uint32_t pid() const { return static_cast<std::uint32_t>(pid_); }

 private:
  pid_t pid_ = -1;
};

/// A pid no process can have on this machine (above /proc/sys/kernel/pid_max): a process in
/// another PID namespace, which /proc never shows. `k` = 0, 1, ... gives distinct pids.
std::uint32_t PidOutsideThisNamespace(unsigned k);

}  // namespace gpulane::test
