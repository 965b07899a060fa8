#pragma once
// The lease directory: one folder shared by every user of the machine (default /run/gpulane/leases,
// mode 1777, owned by root) where leases and waiting tickets live as files.
//
// How it stays correct and safe:
//  - Decisions are made under an exclusive flock on the directory itself (no lock file that a user
//    could pre-create with the wrong mode).
//  - A lease or ticket file is created under a random name with O_CREAT|O_EXCL|O_NOFOLLOW, locked
//    with flock(LOCK_EX), filled, then renamed into place (RENAME_NOREPLACE), so it appears whole
//    and already locked. Its descriptor is inherited by the job, so the lock, and with it the lease,
//    lives exactly as long as the last process holding it, also if `gpulane run` is SIGKILLed.
//  - A file whose lock can be taken is stale: ignored, and removed when its owner or root sees it.
//  - Files are opened O_NOFOLLOW, checked to be regular, read only; gpulane never writes to a file
//    it did not create, and its owner (fstat), not its content, says whose lease it is.
//  - The directory must be owned by root or by the caller and, if others may write to it, sticky,
//    so no user can remove or replace another's lease.
//  - inotify on the directory wakes waiters within milliseconds when a lease file is closed for the
//    last time (IN_CLOSE_WRITE, also when its holder is killed) or removed.
#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "lease/records.h"
#include "util/result.h"

namespace gpulane::lease {

/// A file this process created and holds locked; removed and unlocked by Release() or destruction.
class HeldFile {
 public:
  HeldFile() = default;
  HeldFile(int dir_fd, std::string name, int fd) : dir_fd_(dir_fd), name_(std::move(name)), fd_(fd) {}
  HeldFile(HeldFile&& other) noexcept { *this = std::move(other); }
  HeldFile& operator=(HeldFile&& other) noexcept;
  ~HeldFile() { Release(); }
  /// Removes the file and closes the descriptor (the lock ends when every inheritor closed it too).
  void Release();
  /// Replaces the content (e.g. to record the job's process group once it started).
  Status Rewrite(const std::string& content);
  int fd() const { return fd_; }
  const std::string& name() const { return name_; }
  bool held() const { return fd_ >= 0; }

 private:
  int dir_fd_ = -1;
  std::string name_;
  int fd_ = -1;
};

/// Holds the directory's decision lock while alive.
class DirLock {
 public:
  explicit DirLock(int fd) : fd_(fd) {}
  DirLock(DirLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  DirLock(const DirLock&) = delete;
  ~DirLock();

 private:
  int fd_;
};

/// What the directory holds right now.
struct DirContents {
  std::vector<LeaseRecord> leases;    ///< live leases
  std::vector<TicketRecord> tickets;  ///< live tickets, oldest first
};

class LeaseDir {
 public:
  /// The directory to use: $GPULANE_LEASE_DIR, else `configured`, else /run/gpulane/leases.
  static std::string DefaultPath(const std::string& configured = "");

  /// Opens and checks `path`. Creates it (mode 1777) when missing and its parent is writable by
  /// the caller (root, for /run/gpulane). Errors: kUnsafe when it is a symlink, not a directory,
  /// owned by someone other than root or the caller, or writable by others without the sticky
  /// bit; kIo when it cannot be created or opened (message says how to create it).
  static Result<LeaseDir> Open(const std::string& path);

  LeaseDir(LeaseDir&& other) noexcept;
  LeaseDir(const LeaseDir&) = delete;
  ~LeaseDir();

  /// Takes the decision lock (blocking).
  DirLock Lock() const;
  /// Reads live leases and tickets; removes stale files the caller owns (or all, as root).
  DirContents Read() const;
  /// Creates a lease file for `record` (left open and locked, inheritable: not O_CLOEXEC), owned
  /// by `owner_uid`/`owner_gid` when given (root creating a lease on a user's behalf).
  Result<HeldFile> CreateLease(const LeaseRecord& record, std::optional<std::uint32_t> owner_uid = std::nullopt,
                               std::optional<std::uint32_t> owner_gid = std::nullopt) const;
  /// Creates a ticket. Its seq is record.seq when set (the job's submission time, so a queued job
  /// keeps its place), else larger than every live ticket's. Call under Lock().
  Result<HeldFile> CreateTicket(TicketRecord& record) const;
  /// Starts watching the directory with inotify, if not yet: returns true when it just started, so
  /// the caller re-reads the directory before sleeping on watch_fd() (nothing in between is missed).
  /// Lazily, because closing an inotify descriptor waits for a kernel grace period (measured: up to
  /// 23 ms at exit), a cost only commands that actually wait should pay.
  bool StartWatching() const;
  /// The inotify descriptor (non-blocking; -1 before StartWatching or when inotify is unavailable):
  /// readable when a lease or ticket ends or appears. Drain it with DrainEvents().
  int watch_fd() const { return watch_fd_; }
  void DrainEvents() const;
  const std::string& path() const { return path_; }

 private:
  LeaseDir(std::string path, int dir_fd) : path_(std::move(path)), dir_fd_(dir_fd) {}
  Result<HeldFile> CreateFile(const std::string& final_name, const std::string& content, bool inheritable,
                              std::optional<std::uint32_t> owner_uid = std::nullopt,
                              std::optional<std::uint32_t> owner_gid = std::nullopt) const;
  std::string path_;
  int dir_fd_ = -1;
  mutable int watch_fd_ = -1;
  mutable bool watch_tried_ = false;
};

/// Login name of a uid ("uid 1001" when it has none).
std::string UserNameOf(std::uint32_t uid);

}  // namespace gpulane::lease
