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
//  - A file whose lock is held is never absent, whatever it holds (unknown is not free): one that
//    is no record gpulane can read (larger than kMaxRecordBytes, cut short, not JSON, fields
//    missing or of the wrong type, naming another uid than its owner, not a regular file, not
//    openable by the reader while /proc/locks names its lock's holder) is its owner's unreadable
//    lease, holding exclusively the GPUs whose UUIDs its bytes name, or every GPU when it names none
//    (or is too large to tell), or her unreadable ticket, waiting in line at its file's change time
//    for the same (records.h UnreadableLease, UnreadableTicket). Writers keep records small (a
//    lease keeps a label of at most kMaxLeaseLabelBytes, never a command line) and refuse to write a larger one.
//  - Files are opened O_NOFOLLOW|O_NONBLOCK|O_NOCTTY, and read only when regular and at most
//    kMaxRecordBytes; gpulane never writes to a file it did not create.
//  - The directory must be owned by root or by the caller and, if others may write to it, sticky,
//    so no user can remove or replace another's lease.
//  - inotify on the directory wakes waiters within milliseconds when a lease file is closed for the
//    last time (IN_CLOSE_WRITE, also when its holder is killed) or removed.
//
// Threat model: every user can write files here, so a file's content is only its owner's word, and
// nothing a user writes may decide for another user. What the kernel vouches for decides instead:
//  - Whose it is: the file's owner (fstat). A file whose content names another uid ("uid" of a
//    lease, "request.uid" of a ticket) contradicts its owner and is ignored; only root's files may
//    speak for another user (the system daemon's supervisors run as root and write their jobs'
//    tickets; their leases are handed to the job's user, fchown).
//  - Which file it is: its inode (dev, ino). A waiter knows its own ticket by the inode of the file
//    it holds open, never by the id written in it (another user may copy that id); a file seen
//    twice (a hard link) counts once.
//  - Its place in line (TrustTicket): priority above 0 only from root's tickets (the system daemon
//    wrote them after checking that the submitter is root or in daemon.admin_group; a per-user
//    daemon cannot vouch for that, so its jobs wait at priority 0 at most); a user's own ticket may
//    lower its priority. Its seq no earlier than the file's last status change (ctime: set by the
//    kernel at creation, rename and write, and no user can set it back), so nobody can take a place
//    before the moment the ticket appeared; root's tickets keep theirs (a queued job's submission
//    time). A ticket nested in a job must be its owner's job (the parent lease's owner).
//  - Fair share (lease/line_shares.h): the factors that order the line count only in a file of the
//    directory's owner that nobody else may write; she can remove any file here anyway.
//  - Which processes a lease owns (lease/occupancy.h): only its owner's, and only those descending
//    from the process that holds its lock (/proc/locks, `holder`), or in its job's process group:
//    a "pid" in the file that is no descendant of the lock's holder owns nothing. One exception:
//    a holder running `gpulane _lease` (its command line, /proc/<pid>/cmdline, says so) vouches
//    for its parent when that is the owner's process: the process that started it (a Python
//    lease()) is the job. Her own command line is her word too, but it gains her only what running
//    `gpulane _lease` would: her own processes under one of her own processes.
//  - Preemption (lease/preemption.h): a ticket makes a preemptible job give way only as the waiting
//    request it is would (decided like every ticket, under the rules above); a lease's
//    "preemptible" can only make its own owner's job give way, and a preemptible job's holder
//    decides with its job's spec, not with what its lease file says.
// What a user can still do by writing files: claim GPUs for herself out of turn (an unreadable
// file of hers does no more: it holds GPUs as her lease, and counts for her limits.max_gpus and
// fair share) (as she could by
// using them without gpulane: her processes are foreign to everyone else either way) and wait in
// line like any request (a ticket she holds without ever taking the GPUs the line gives it loses
// its place in every other decider's decisions after sched.max_unclaimed: sched/unclaimed.h; each
// decider counts from its own sight, so no file decides that for another user's ticket either).
#include <signal.h>
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lease/records.h"
#include "sched/fairshare.h"
#include "util/clock.h"
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

/// Holds the directory's decision lock while alive. Every `gpulane` on the machine waits for it,
/// so the terminal's stop signals (Ctrl-Z: SIGTSTP; SIGTTIN, SIGTTOU) are held back while it is
/// held and take effect the moment it is let go: a run stopped at the wrong instant would
/// otherwise stop the whole machine's line with it. (SIGSTOP cannot be held back.)
class DirLock {
 public:
  /// Blocks the stop signals, then takes the lock on `fd`.
  explicit DirLock(int fd);
  DirLock(DirLock&& other) noexcept : fd_(other.fd_), blocked_here_(other.blocked_here_) { other.fd_ = -1; }
  DirLock(const DirLock&) = delete;
  ~DirLock();

 private:
  int fd_;
  sigset_t blocked_here_{};  ///< the stop signals this lock blocked (not those blocked before it)
};

/// What the kernel vouches for of one lease or ticket file, read through its open descriptor.
struct FileFacts {
  std::uint32_t owner_uid = 0;
  std::uint64_t dev = 0, ino = 0;
  std::uint64_t ctime_ns = 0;  ///< last status change, nanoseconds since the epoch
  pid_t holder = 0;            ///< the process holding its exclusive flock (0: unknown)
};

/// Fills what `r` says about itself from `facts`: uid and user from the owner, holder and identity.
/// `content_uid`: the "uid" the file names, if any. False when that is another uid than the owner's
/// (the file contradicts its owner: no lease).
bool TrustLease(LeaseRecord& r, std::optional<std::uint32_t> content_uid, const FileFacts& facts);

/// The same for a ticket, and its place in line: a file of root speaks for the uid it names
/// (`content_uid`, else root) with its priority and seq as written. Any other owner's ticket is
/// that owner's (false when `content_uid` names another), its priority at most 0 and its seq no
/// earlier than facts.ctime_ns.
bool TrustTicket(TicketRecord& t, std::optional<std::uint32_t> content_uid, const FileFacts& facts);
/// The resolution of the clock that stamps files' times (CLOCK_REALTIME_COARSE), in ns: a user's
/// ticket is placed no earlier than its file's ctime plus this (TrustTicket).
std::uint64_t CoarseClockResolutionNs();

/// (st_dev, st_ino) of a file.
using FileKey = std::pair<std::uint64_t, std::uint64_t>;

/// The holders of exclusive flocks in `proc_locks` (the text of /proc/locks): file -> pid. Lines of
/// waiters ("->"), POSIX, OFD and shared locks are left out, and so are pids this PID namespace
/// does not see (0).
std::map<FileKey, pid_t> ParseFlockHolders(std::string_view proc_locks);

/// What the directory holds right now.
struct DirContents {
  std::vector<LeaseRecord> leases;    ///< live leases
  std::vector<TicketRecord> tickets;  ///< live tickets, in line order (lease/line_shares.h SortLine)
  /// The fair-share factors the tickets were ordered by (lease/line_shares.h: the directory owner's
  /// fresh file), or nullopt: then the line is in submission order within each --priority class.
  std::optional<sched::LineShares> shares;
  /// Why a published fair-share file is there but orders nothing (ReadLineShares), "" when none is
  /// there or it was read: not absent, said so (`gpulane status`).
  std::string shares_unreadable;
};

class LeaseDir {
 public:
  /// The directory to use: $GPULANE_LEASE_DIR, else `configured`, else /run/gpulane/leases.
  static std::string DefaultPath(const std::string& configured = "");

  /// Opens and checks `path`. Creates it (mode 1777) when missing and its parent is writable by
  /// the caller (root, for /run/gpulane). Errors: kUnsafe when it is a symlink, not a directory,
  /// owned by someone other than root or the caller, or writable by others without the sticky
  /// bit; kIo when it cannot be created or opened (message says how to create it). `clock`
  /// (os::Env's; it outlives the LeaseDir) gives new tickets their place in line and the time
  /// published fair-share factors are judged fresh at.
  static Result<LeaseDir> Open(const std::string& path, const Clock& clock);

  LeaseDir(LeaseDir&& other) noexcept;
  LeaseDir(const LeaseDir&) = delete;
  ~LeaseDir();

  /// Takes the decision lock (blocking).
  DirLock Lock() const;
  /// Reads live leases and tickets as far as their owners vouch for them (TrustLease,
  /// TrustTicket; a file seen twice counts once; a ticket nested in another user's job is left
  /// out), a live file that is none gpulane can read as an unreadable one (header comment);
  /// removes stale files the caller owns (or all, as root). Orders the tickets by the
  /// published fair-share factors when there are trusted fresh ones (ReadLineShares), else by
  /// --priority and submission.
  DirContents Read() const;
  /// The live lease of file `name` (a plain "*.lease" name of this directory), read alone as Read
  /// reads it but for its lock's holder (0: /proc/locks is not read, the milliseconds Read pays
  /// once); nullopt when there is no such live file or it is none gpulane can read. For a lease's
  /// owner asking while it still holds it (the sampler recording a job that ends, in the answer's
  /// path: the whole folder's read took 23 ms of the next job's wait on the GPU).
  std::optional<LeaseRecord> ReadLease(const std::string& name) const;
  /// The fair-share factors of kLineSharesFile (lease/line_shares.h) when that is a regular file
  /// of the directory's owner that nobody else may write, at most kMaxRecordBytes, parses, and is
  /// fresh at `now_s`; nullopt otherwise, with `*why` (when given) saying why the file that is
  /// there orders nothing ("" when there is none).
  std::optional<sched::LineShares> ReadLineShares(double now_s, std::string* why = nullptr) const;
  /// Replaces kLineSharesFile with `shares` (written whole under a temporary name, then renamed;
  /// mode 0644). Errors: kPermission when the caller does not own the directory (nobody else's
  /// file would be trusted), kIo when the file cannot be written.
  Status PublishLineShares(const sched::LineShares& shares) const;
  /// Removes kLineSharesFile when the caller owns the directory (a daemon that stops).
  void RemoveLineShares() const;
  /// Creates a lease file for `record` (left open and locked, inheritable: not O_CLOEXEC), owned
  /// by `owner_uid`/`owner_gid` when given (root creating a lease on a user's behalf); the "uid"
  /// it records is that owner.
  Result<HeldFile> CreateLease(const LeaseRecord& record, std::optional<std::uint32_t> owner_uid = std::nullopt,
                               std::optional<std::uint32_t> owner_gid = std::nullopt) const;
  /// Creates a ticket. Its seq is record.seq when set (the job's submission time, so a queued job
  /// keeps its place), else larger than every live ticket's. Sets record.id, .seq, .dev and .ino
  /// (the identity its waiter knows it by), and, but for root, record.request.uid to the caller's.
  /// Call under Lock().
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
  LeaseDir(std::string path, int dir_fd, const Clock& clock) : path_(std::move(path)), dir_fd_(dir_fd), clock_(&clock) {}
  Result<HeldFile> CreateFile(const std::string& final_name, const std::string& content, bool inheritable,
                              std::optional<std::uint32_t> owner_uid = std::nullopt,
                              std::optional<std::uint32_t> owner_gid = std::nullopt) const;
  std::string path_;
  int dir_fd_ = -1;
  const Clock* clock_;
  mutable int watch_fd_ = -1;
  mutable bool watch_tried_ = false;
};

/// Login name of a uid ("uid 1001" when it has none).
std::string UserNameOf(std::uint32_t uid);

}  // namespace gpulane::lease
