#include "lease/lease_dir.h"
#include "lease/line_shares.h"
#include "lease/record_file.h"

#include <time.h>

#include <dirent.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <fmt/format.h>
#include <map>
#include <mutex>
#include <random>
#include <set>

namespace gpulane::lease {
namespace {

constexpr const char* kDefaultDir = "/run/gpulane/leases";

bool EndsWith(const std::string& s, const char* suffix) {
  std::size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

std::string RandomHex() {
  static std::mt19937_64 rng{std::random_device{}() ^ static_cast<std::uint64_t>(getpid())};
  return fmt::format("{:016x}", rng());
}

Status CheckDirectory(const std::string& path, const struct stat& st) {
  const uid_t me = geteuid();
  if (S_ISLNK(st.st_mode))
    return MakeError(ErrorKind::kUnsafe, fmt::format("lease directory {} is a symbolic link: another user could "
                                                     "redirect it; use a real directory or set GPULANE_LEASE_DIR",
                                                     path));
  if (!S_ISDIR(st.st_mode))
    return MakeError(ErrorKind::kUnsafe,
                     fmt::format("lease directory {} is not a directory: remove it or set GPULANE_LEASE_DIR", path));
  if (st.st_uid != 0 && st.st_uid != me)
    return MakeError(ErrorKind::kUnsafe,
                     fmt::format("lease directory {} is owned by {}, not root or you: its owner could remove your "
                                 "leases; use a root-owned directory (sudo install -d -m 1777 {}) or set "
                                 "GPULANE_LEASE_DIR",
                                 path, UserNameOf(st.st_uid), path));
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))
    return MakeError(ErrorKind::kUnsafe,
                     fmt::format("lease directory {} is writable by others but not sticky (mode {:o}): anyone could "
                                 "remove leases; fix with chmod 1777 {}",
                                 path, st.st_mode & 07777, path));
  return Status::Ok();
}

Status CreateDirectory(const std::string& path) {
  auto slash = path.find_last_of('/');
  if (slash != std::string::npos && slash > 0) {
    std::string parent = path.substr(0, slash);
    struct stat pst {};
    if (lstat(parent.c_str(), &pst) != 0 && mkdir(parent.c_str(), 0755) != 0 && errno != EEXIST)
      return MakeError(ErrorKind::kIo, fmt::format("cannot create {}: {}", parent, std::strerror(errno)));
  }
  if (mkdir(path.c_str(), 0700) != 0 && errno != EEXIST)
    return MakeError(ErrorKind::kIo,
                     fmt::format("lease directory {} does not exist and cannot be created ({}): ask an admin to run "
                                 "'sudo install -d -m 1777 {}' (gpulane's tmpfiles.d entry does it at boot), or set "
                                 "GPULANE_LEASE_DIR",
                                 path, std::strerror(errno), path));
  // Set the sticky world-writable mode explicitly: mkdir's mode is filtered by the umask.
  chmod(path.c_str(), 01777);
  return Status::Ok();
}

}  // namespace

std::string UserNameOf(std::uint32_t uid) {
  // Looked up once per uid and process: every read of the directory names each file's owner, and
  // a look-up reads /etc/passwd (or asks NSS) each time, on the path from one job's end to the next.
  // The daemon's loop and its sampler thread both read the directory: the cache has a lock.
  static std::mutex names_lock;
  static std::map<std::uint32_t, std::string> names;
  {
    std::lock_guard<std::mutex> hold(names_lock);
    if (auto known = names.find(uid); known != names.end()) return known->second;
  }
  struct passwd pw;
  struct passwd* result = nullptr;
  char buf[4096];
  std::string name = getpwuid_r(uid, &pw, buf, sizeof buf, &result) == 0 && result ? result->pw_name : fmt::format("uid {}", uid);
  std::lock_guard<std::mutex> hold(names_lock);
  return names.emplace(uid, std::move(name)).first->second;
}

bool TrustLease(LeaseRecord& r, std::optional<std::uint32_t> content_uid, const FileFacts& facts) {
  if (content_uid && *content_uid != facts.owner_uid) return false;
  r.uid = facts.owner_uid;
  r.user = UserNameOf(r.uid);
  r.holder = facts.holder;
  r.dev = facts.dev;
  r.ino = facts.ino;
  return true;
}

// The resolution of the clock that stamps files' times (CLOCK_REALTIME_COARSE), in ns; 10 ms
// when it cannot be read (the tick of a HZ=100 kernel, the coarsest in use).
std::uint64_t CoarseClockResolutionNs() {
  timespec res{};
  if (clock_getres(CLOCK_REALTIME_COARSE, &res) != 0) return 10'000'000;
  return static_cast<std::uint64_t>(res.tv_sec) * 1'000'000'000ULL + static_cast<std::uint64_t>(res.tv_nsec);
}

bool TrustTicket(TicketRecord& t, std::optional<std::uint32_t> content_uid, const FileFacts& facts) {
  t.dev = facts.dev;
  t.ino = facts.ino;
  if (facts.owner_uid == 0) {
    t.request.uid = content_uid.value_or(0);  // root speaks for the user whose job it supervises
  } else {
    if (content_uid && *content_uid != facts.owner_uid) return false;
    t.request.uid = facts.owner_uid;
    t.request.priority = std::min(t.request.priority, 0);
    // Not before the file existed. A file's ctime comes from the kernel's coarse clock, which lags
    // CLOCK_REALTIME by up to its resolution (a tick), so a seq read from the fine clock just
    // before this file was made may exceed ctime: add the resolution to keep such earlier tickets
    // ahead (clock_gettime(2): CLOCK_REALTIME_COARSE).
    t.seq = std::min(std::max(t.seq, facts.ctime_ns + CoarseClockResolutionNs()), kMaxTicketSeq);
  }
  t.request.user = UserNameOf(t.request.uid);
  return true;
}

std::map<FileKey, pid_t> ParseFlockHolders(std::string_view text) {
  std::map<FileKey, pid_t> holders;
  while (!text.empty()) {
    const std::size_t end = std::min(text.find('\n'), text.size());
    const std::string line(text.substr(0, end));
    text.remove_prefix(std::min(end + 1, text.size()));
    // "12: FLOCK  ADVISORY  WRITE 4121 00:1b:7067 0 EOF"; a waiter's line has "->" after the number.
    char type[16], mode[16], access[16];
    long pid = 0;
    unsigned major = 0, minor = 0;
    unsigned long long ino = 0;
    int n = 0;
    if (std::sscanf(line.c_str(), "%*d: %15s %15s %15s %ld %x:%x:%llu%n", type, mode, access, &pid, &major, &minor,
                    &ino, &n) != 7 ||
        n == 0)
      continue;
    if (std::strcmp(type, "FLOCK") != 0 || std::strcmp(access, "WRITE") != 0 || pid <= 0) continue;
    holders[{static_cast<std::uint64_t>(makedev(major, minor)), static_cast<std::uint64_t>(ino)}] = static_cast<pid_t>(pid);
  }
  return holders;
}

HeldFile& HeldFile::operator=(HeldFile&& other) noexcept {
  if (this != &other) {
    Release();
    dir_fd_ = other.dir_fd_;
    name_ = std::move(other.name_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

void HeldFile::Release() {
  if (fd_ < 0) return;
  unlinkat(dir_fd_, name_.c_str(), 0);
  close(fd_);
  fd_ = -1;
}

Status HeldFile::Rewrite(const std::string& text) {
  if (text.size() > kMaxRecordBytes)
    return MakeError(ErrorKind::kInternal, fmt::format("cannot update {}: {} bytes is more than readers read", name_, text.size()));
  // Write first, then cut to size: a reader without the directory lock (gpulane status) never sees
  // an empty file, as it could between a truncate and the write. Padded with spaces (JSON allows
  // them) to the old size, so such a reader never sees the new text followed by the old one's tail
  // either, which would not parse (and count as an unreadable lease).
  std::string content = text;
  struct stat st {};
  if (fstat(fd_, &st) == 0 && static_cast<std::uint64_t>(st.st_size) > content.size() &&
      static_cast<std::uint64_t>(st.st_size) <= kMaxRecordBytes)
    content.append(static_cast<std::size_t>(st.st_size) - content.size(), ' ');
  if (pwrite(fd_, content.data(), content.size(), 0) != static_cast<ssize_t>(content.size()) ||
      ftruncate(fd_, static_cast<off_t>(content.size())) != 0)
    return MakeError(ErrorKind::kIo, fmt::format("cannot update {}: {}", name_, std::strerror(errno)));
  return Status::Ok();
}

std::string LeaseDir::DefaultPath(const std::string& configured) {
  const char* env = std::getenv("GPULANE_LEASE_DIR");
  if (env && *env) return env;
  return configured.empty() ? kDefaultDir : configured;
}

Result<LeaseDir> LeaseDir::Open(const std::string& path, const Clock& clock) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) {
    if (errno != ENOENT)
      return MakeError(ErrorKind::kIo, fmt::format("cannot read lease directory {}: {}", path, std::strerror(errno)));
    Status created = CreateDirectory(path);
    if (!created.ok()) return created.error();
    if (lstat(path.c_str(), &st) != 0)
      return MakeError(ErrorKind::kIo, fmt::format("cannot read lease directory {}: {}", path, std::strerror(errno)));
  }
  Status safe = CheckDirectory(path, st);
  if (!safe.ok()) return safe.error();
  int dir_fd = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir_fd < 0)
    return MakeError(ErrorKind::kIo, fmt::format("cannot open lease directory {}: {}", path, std::strerror(errno)));
  struct stat fst {};
  if (fstat(dir_fd, &fst) != 0 || fst.st_ino != st.st_ino || fst.st_dev != st.st_dev) {
    close(dir_fd);
    return MakeError(ErrorKind::kUnsafe, fmt::format("lease directory {} changed while being opened; try again", path));
  }
  return LeaseDir(path, dir_fd, clock);
}

bool LeaseDir::StartWatching() const {
  if (watch_tried_) return false;
  watch_tried_ = true;
  watch_fd_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (watch_fd_ >= 0 &&
      inotify_add_watch(watch_fd_, path_.c_str(), IN_CLOSE_WRITE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM) < 0) {
    close(watch_fd_);
    watch_fd_ = -1;
  }
  return true;
}

LeaseDir::LeaseDir(LeaseDir&& other) noexcept
    : path_(std::move(other.path_)),
      dir_fd_(other.dir_fd_),
      clock_(other.clock_),
      watch_fd_(other.watch_fd_),
      watch_tried_(other.watch_tried_) {
  other.dir_fd_ = -1;
  other.watch_fd_ = -1;
}

LeaseDir::~LeaseDir() {
  if (dir_fd_ >= 0) close(dir_fd_);
  if (watch_fd_ >= 0) close(watch_fd_);
}

DirLock LeaseDir::Lock() const { return DirLock(dir_fd_); }

void LeaseDir::DrainEvents() const {
  if (watch_fd_ < 0) return;
  alignas(struct inotify_event) char buf[4096];
  while (read(watch_fd_, buf, sizeof buf) > 0) {
  }
}

DirContents LeaseDir::Read() const {
  DirContents out;
  int fd = dup(dir_fd_);
  if (fd < 0) return out;
  DIR* dir = fdopendir(fd);
  if (!dir) {
    close(fd);
    return out;
  }
  rewinddir(dir);
  const uid_t me = geteuid();
  // /proc/locks is read once, at the first lease (or file this user cannot open): a read of it can
  // take milliseconds (strace of a waiting `gpulane run` on the fake NVML: 8.7 and 14 ms for some
  // reads, 26 us for others), which a line of tickets alone, as at a hand-over on one GPU, does not
  // need to pay (bench/handover.py --jobs 11 --job "sleep 0.2": run 15.0 -> 3.5 ms, queue 13.4 -> 4.5 ms).
  std::optional<std::map<FileKey, pid_t>> holders;
  const auto holder_of = [&](const FileKey& key) -> pid_t {
    if (!holders) holders = ParseFlockHolders(ReadProcLocks());
    const auto it = holders->find(key);
    return it == holders->end() ? 0 : it->second;
  };
  std::set<FileKey> seen;
  std::map<FileKey, std::size_t> lease_at;  // where in out.leases each lease file is
  while (struct dirent* e = readdir(dir)) {
    std::string name = e->d_name;
    const bool is_lease = EndsWith(name, ".lease"), is_ticket = EndsWith(name, ".wait");
    if (!is_lease && !is_ticket) continue;
    RecordFile file = ReadRecordFile(dir_fd_, name, me, holder_of);
    if (!file.live) continue;
    const FileKey key{static_cast<std::uint64_t>(file.st.st_dev), static_cast<std::uint64_t>(file.st.st_ino)};
    if (!seen.insert(key).second) {  // another name of a file already read (a hard link): counted once
      if (auto at = lease_at.find(key); at != lease_at.end()) out.leases[at->second].other_names.push_back(name);
      continue;
    }
    // Only a lease's lock holder matters (occupancy.cc: which processes it owns); a ticket's never.
    const FileFacts facts{file.st.st_uid, key.first, key.second, CtimeNs(file.st), is_lease ? holder_of(key) : 0};
    if (is_lease) {
      lease_at[key] = out.leases.size();
      out.leases.push_back(LeaseOf(file, facts));
      out.leases.back().name = std::move(name);
    } else {
      out.tickets.push_back(TicketOf(file, facts));
    }
  }
  closedir(dir);
  // A ticket nested in a job stands in that job's own line: only the job's owner may put one there.
  std::erase_if(out.tickets, [&](const TicketRecord& t) {
    if (t.parent.empty()) return false;
    for (const LeaseRecord& l : out.leases)
      if (IsNamed(l, t.parent)) return l.uid != t.request.uid;
    return false;  // its job has ended: it stands in no line anyone decides
  });
  const double now_s = static_cast<double>(clock_->WallNs()) / 1e9;
  out.shares = ReadLineShares(now_s, &out.shares_unreadable);
  SortLine(out.tickets, out.shares ? &*out.shares : nullptr, now_s);
  return out;
}

std::optional<LeaseRecord> LeaseDir::ReadLease(const std::string& name) const {
  if (!EndsWith(name, ".lease") || name.find('/') != std::string::npos || name == ".lease") return std::nullopt;
  RecordFile file = ReadRecordFile(dir_fd_, name, geteuid(), [](const FileKey&) { return pid_t{0}; });
  if (!file.live || !file.unreadable.empty()) return std::nullopt;
  const FileFacts facts{file.st.st_uid, static_cast<std::uint64_t>(file.st.st_dev),
                        static_cast<std::uint64_t>(file.st.st_ino), CtimeNs(file.st), 0};
  LeaseRecord lease = LeaseOf(file, facts);
  if (!lease.unreadable.empty()) return std::nullopt;
  lease.name = name;
  return lease;
}

std::optional<sched::LineShares> LeaseDir::ReadLineShares(double now_s, std::string* why) const {
  std::string ignored;
  if (!why) why = &ignored;
  why->clear();
  struct stat dir_st {};
  if (fstat(dir_fd_, &dir_st) != 0) return std::nullopt;
  struct stat st {};
  if (fstatat(dir_fd_, kLineSharesFile, &st, AT_SYMLINK_NOFOLLOW) != 0) return std::nullopt;  // none published
  const int f = S_ISLNK(st.st_mode) ? -1 : openat(dir_fd_, kLineSharesFile, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  std::string content;
  if (S_ISLNK(st.st_mode)) *why = "a symbolic link";
  else if (f < 0) *why = fmt::format("cannot be opened: {}", std::strerror(errno));
  else if (fstat(f, &st) != 0 || !S_ISREG(st.st_mode)) *why = "not a regular file";
  else if (st.st_uid != dir_st.st_uid) *why = fmt::format("{}'s, not the lease directory owner's", UserNameOf(st.st_uid));
  else if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) *why = "writable by others than its owner";
  else if (static_cast<std::uint64_t>(st.st_size) > kMaxRecordBytes || !ReadAll(f, &content)) *why = "larger than 1 MiB or unreadable";
  if (f >= 0) close(f);
  if (!why->empty()) return std::nullopt;
  auto shares = LineSharesFromJson(nlohmann::json::parse(content, nullptr, false));
  if (!shares) *why = "not fair-share factors gpulane can read";
  else if (!LineSharesFresh(*shares, now_s)) *why = "stale (the daemon that publishes them has not for a while)";
  if (!why->empty()) return std::nullopt;
  return shares;
}

namespace {

// Renames the written `tmp` in lease directory `dir_fd` (`path`) to kLineSharesFile.
Status PlaceLineShares(int dir_fd, const std::string& path, const std::string& tmp) {
  // A rename replaces any file of that name, but not a folder: `mkdir fair-share.json` by anyone
  // (the directory is 1777) would make every publish fail (EISDIR) and switch fair share off. The
  // owner swaps such a thing with the new file at once (RENAME_EXCHANGE: atomic, so the name never
  // goes missing meanwhile), then removes it when it is an empty folder, else leaves it under a
  // name nobody reads. A few tries: it may vanish or come back between two calls.
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (renameat(dir_fd, tmp.c_str(), dir_fd, kLineSharesFile) == 0) return Status::Ok();
    if (errno != EISDIR && errno != ENOTEMPTY && errno != EEXIST) break;
    if (renameat2(dir_fd, tmp.c_str(), dir_fd, kLineSharesFile, RENAME_EXCHANGE) != 0) {
      if (errno == ENOENT) continue;  // gone meanwhile: a plain rename again
      break;
    }
    if (unlinkat(dir_fd, tmp.c_str(), AT_REMOVEDIR) != 0) {  // not empty (or no folder): kept, under a name nobody reads
      const std::string aside = fmt::format(".refused-{}-{}", kLineSharesFile, RandomHex().substr(0, 8));
      renameat2(dir_fd, tmp.c_str(), dir_fd, aside.c_str(), RENAME_NOREPLACE);
    }
    return Status::Ok();
  }
  const int why = errno;
  unlinkat(dir_fd, tmp.c_str(), 0);
  struct stat st {};
  if (fstatat(dir_fd, kLineSharesFile, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG(st.st_mode))
    return MakeError(ErrorKind::kIo, fmt::format("cannot publish {} in lease directory {}: something that is not a "
                                                 "regular file (of uid {}) keeps its name: {}",
                                                 kLineSharesFile, path, st.st_uid, std::strerror(why)));
  return MakeError(ErrorKind::kIo, fmt::format("cannot write {} in lease directory {}: {}", kLineSharesFile, path,
                                               std::strerror(why)));
}

}  // namespace

Status LeaseDir::PublishLineShares(const sched::LineShares& shares) const {
  struct stat dir_st {};
  if (fstat(dir_fd_, &dir_st) != 0 || dir_st.st_uid != geteuid())
    return MakeError(ErrorKind::kPermission,
                     fmt::format("the lease directory {} is not this user's: fair-share factors are published only by "
                                 "its owner (the system daemon, as root)",
                                 path_));
  const std::string tmp = ".tmp-" + RandomHex();
  const int fd = openat(dir_fd_, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0)
    return MakeError(ErrorKind::kIo, fmt::format("cannot create a file in lease directory {}: {}", path_, std::strerror(errno)));
  const std::string content = LineSharesToJson(shares).dump();
  const bool ok = fchmod(fd, 0644) == 0 && write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size());
  const int err = errno;
  close(fd);
  if (!ok) {
    unlinkat(dir_fd_, tmp.c_str(), 0);
    return MakeError(ErrorKind::kIo, fmt::format("cannot write {} in lease directory {}: {}", kLineSharesFile, path_,
                                                 std::strerror(err)));
  }
  return PlaceLineShares(dir_fd_, path_, tmp);
}

void LeaseDir::RemoveLineShares() const {
  struct stat dir_st {};
  if (fstat(dir_fd_, &dir_st) == 0 && dir_st.st_uid == geteuid()) unlinkat(dir_fd_, kLineSharesFile, 0);
}

Result<HeldFile> LeaseDir::CreateFile(const std::string& final_name, const std::string& content, bool inheritable,
                                      std::optional<std::uint32_t> owner_uid,
                                      std::optional<std::uint32_t> owner_gid) const {
  if (content.size() > kMaxRecordBytes)  // readers would take it for an unreadable file: say so instead
    return MakeError(ErrorKind::kInternal, fmt::format("a record of {} bytes is more than the lease directory's readers read ({})",
                                                       content.size(), kMaxRecordBytes));
  const std::string tmp = ".tmp-" + RandomHex();
  int flags = O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | (inheritable ? 0 : O_CLOEXEC);
  int fd = openat(dir_fd_, tmp.c_str(), flags, 0644);
  if (fd < 0)
    return MakeError(ErrorKind::kIo, fmt::format("cannot create a file in lease directory {}: {}", path_,
                                                 std::strerror(errno)));
  fchmod(fd, 0644);  // readable by every user whatever the umask
  auto fail = [&](const char* what) {
    int err = errno;
    unlinkat(dir_fd_, tmp.c_str(), 0);
    close(fd);
    return MakeError(ErrorKind::kIo, fmt::format("cannot {} in lease directory {}: {}", what, path_, std::strerror(err)));
  };
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) return fail("lock a new file");
  if (write(fd, content.data(), content.size()) != static_cast<ssize_t>(content.size())) return fail("write");
  if (owner_uid && fchown(fd, *owner_uid, owner_gid.value_or(static_cast<std::uint32_t>(-1))) != 0) return fail("hand a file over");
  if (renameat2(dir_fd_, tmp.c_str(), dir_fd_, final_name.c_str(), RENAME_NOREPLACE) != 0) return fail("rename");
  return HeldFile(dir_fd_, final_name, fd);
}

Result<HeldFile> LeaseDir::CreateLease(const LeaseRecord& record, std::optional<std::uint32_t> owner_uid,
                                       std::optional<std::uint32_t> owner_gid) const {
  LeaseRecord written = record;
  written.uid = owner_uid.value_or(geteuid());  // the file's owner: a lease naming another uid is none
  return CreateFile(fmt::format("{}.{}.lease", record.job_id, RandomHex().substr(0, 8)), ToJson(written).dump(),
                    /*inheritable=*/true, owner_uid, owner_gid);
}

Result<HeldFile> LeaseDir::CreateTicket(TicketRecord& record) const {
  std::uint64_t seq = record.seq;
  if (seq == 0) {
    seq = clock_->WallNs();
    for (const auto& t : Read().tickets) seq = std::max(seq, t.seq + 1);  // t.seq <= kMaxTicketSeq: no wrap
  }
  seq = std::min(seq, kMaxTicketSeq);
  record.seq = seq;
  if (geteuid() != 0) record.request.uid = geteuid();  // only root speaks for another user
  record.id = fmt::format("w{:020}.{}", seq, RandomHex().substr(0, 8));
  auto held = CreateFile(record.id + ".wait", ToJson(record).dump(), /*inheritable=*/false);
  if (!held) return held;
  struct stat st {};
  if (fstat(held->fd(), &st) != 0)
    return MakeError(ErrorKind::kIo, fmt::format("cannot read back a ticket in lease directory {}: {}", path_, std::strerror(errno)));
  record.dev = static_cast<std::uint64_t>(st.st_dev);
  record.ino = static_cast<std::uint64_t>(st.st_ino);
  return held;
}

}  // namespace gpulane::lease
