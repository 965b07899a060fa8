#include "os/user_file.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/openat2.h>
#include <pwd.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <fmt/format.h>

namespace gpulane::os {
namespace {

// The user's groups (primary first), looked up in the user database; the primary group alone when
// the uid has no entry there.
std::vector<gid_t> GroupsOf(const FileUser& user) {
  struct passwd pw {};
  struct passwd* found = nullptr;
  std::vector<char> buf(16384);
  if (getpwuid_r(user.uid, &pw, buf.data(), buf.size(), &found) != 0 || !found) return {user.gid};
  std::vector<gid_t> groups(64);
  int n = static_cast<int>(groups.size());
  if (getgrouplist(found->pw_name, user.gid, groups.data(), &n) < 0) {
    groups.resize(static_cast<std::size_t>(n));
    if (getgrouplist(found->pw_name, user.gid, groups.data(), &n) < 0) return {user.gid};
  }
  groups.resize(static_cast<std::size_t>(n));
  return groups;
}

// This thread's file-system rights become the user's while alive (root only; a no-op for none).
// Raw system calls: each changes the calling thread's credentials alone.
class AsUserRights {
 public:
  explicit AsUserRights(std::optional<FileUser> as) {
    if (!as || geteuid() != 0 || as->uid == 0) {
      ok_ = true;
      return;
    }
    const std::vector<gid_t> groups = GroupsOf(*as);
    const int count = getgroups(0, nullptr);
    saved_groups_.resize(static_cast<std::size_t>(std::max(count, 0)));
    if (count < 0 || getgroups(count, saved_groups_.data()) != count) return;
    if (syscall(SYS_setgroups, groups.size(), groups.data()) != 0) return;
    active_ = true;
    old_gid_ = static_cast<gid_t>(syscall(SYS_setfsgid, as->gid));
    old_uid_ = static_cast<uid_t>(syscall(SYS_setfsuid, as->uid));
    // Both answer the previous id whatever happens: asking again says whether it took.
    ok_ = syscall(SYS_setfsuid, as->uid) == static_cast<long>(as->uid) &&
          syscall(SYS_setfsgid, as->gid) == static_cast<long>(as->gid);
  }
  ~AsUserRights() {
    if (!active_) return;
    const int err = errno;
    syscall(SYS_setfsuid, old_uid_);
    syscall(SYS_setfsgid, old_gid_);
    const bool back = syscall(SYS_setfsuid, old_uid_) == static_cast<long>(old_uid_) &&
                      syscall(SYS_setfsgid, old_gid_) == static_cast<long>(old_gid_) &&
                      syscall(SYS_setgroups, saved_groups_.size(), saved_groups_.data()) == 0;
    if (!back) std::abort();  // root's rights could not be taken back: stop, never go on as someone else
    errno = err;
  }
  AsUserRights(const AsUserRights&) = delete;
  AsUserRights& operator=(const AsUserRights&) = delete;
  bool ok() const { return ok_; }

 private:
  bool ok_ = false;
  bool active_ = false;
  uid_t old_uid_ = 0;
  gid_t old_gid_ = 0;
  std::vector<gid_t> saved_groups_;
};

int FlagsFor(UserFileAccess access) {
  switch (access) {
    case UserFileAccess::kRead: return O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
    case UserFileAccess::kAppend: return O_WRONLY | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
    case UserFileAccess::kStat: return O_PATH | O_NOFOLLOW | O_CLOEXEC;  // openat2 refuses other flags with O_PATH
  }
  return O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
}

// open(2) that also refuses /proc's magic links on the way (openat2 where the kernel has it).
int OpenNoMagicLinks(const char* path, int flags) {
#ifdef SYS_openat2
  struct open_how how {};
  how.flags = static_cast<std::uint64_t>(flags);
  how.resolve = RESOLVE_NO_MAGICLINKS;
  const long fd = syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof how);
  if (fd >= 0 || errno != ENOSYS) return static_cast<int>(fd);
#endif
  return open(path, flags);  // a kernel before 5.6
}

const char* KindOf(mode_t mode) {
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file";
}

std::string AsText(std::optional<FileUser> as) {
  return as && geteuid() == 0 && as->uid != 0 ? fmt::format(" as uid {}", as->uid) : "";
}

Error OpenError(const std::string& path, std::optional<FileUser> as, int err) {
  const std::string where = path + AsText(as);
  switch (err) {
    case ENOENT:
    case ENOTDIR: return MakeError(ErrorKind::kNotFound, fmt::format("cannot open {}: {}", where, std::strerror(err)));
    case EACCES:
    case EPERM: return MakeError(ErrorKind::kPermission, fmt::format("cannot open {}: {}", where, std::strerror(err)));
    case ELOOP:
      return MakeError(ErrorKind::kUnsafe,
                       fmt::format("cannot open {}: it is a symbolic link (or leads through /proc's), which gpulane never "
                                   "follows for a user",
                                   where));
    case ENXIO: return MakeError(ErrorKind::kUnsafe, fmt::format("cannot open {}: it is a FIFO or socket, not a regular file", where));
    default: return MakeError(ErrorKind::kIo, fmt::format("cannot open {}: {}", where, std::strerror(err)));
  }
}

}  // namespace

std::optional<FileUser> ActingFor(std::uint32_t uid, std::uint32_t gid) {
  if (geteuid() != 0 || uid == 0) return std::nullopt;
  return FileUser{uid, gid};
}

UserFile& UserFile::operator=(UserFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = other.fd_;
    st_ = other.st_;
    other.fd_ = -1;
  }
  return *this;
}

UserFile::~UserFile() {
  if (fd_ >= 0) close(fd_);
}

bool UserFile::null_device() const { return S_ISCHR(st_.st_mode) && st_.st_rdev == makedev(1, 3); }

Result<UserFile> OpenAsUser(const std::string& path, std::optional<FileUser> as, const UserFileRules& rules) {
  if (path.empty()) return MakeError(ErrorKind::kNotFound, "no file named");
  int fd = -1, err = 0;
  {
    AsUserRights rights(as);
    if (!rights.ok()) return MakeError(ErrorKind::kPermission, fmt::format("cannot take the rights of uid {} to open {}", as->uid, path));
    fd = OpenNoMagicLinks(path.c_str(), FlagsFor(rules.access));
    err = errno;
  }
  if (fd < 0) return OpenError(path, as, err);
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    err = errno;
    close(fd);
    return MakeError(ErrorKind::kIo, fmt::format("cannot inspect {}: {}", path, std::strerror(err)));
  }
  UserFile file(fd, st);
  if (!S_ISREG(st.st_mode) && !(rules.null_device_ok && file.null_device()))
    return MakeError(ErrorKind::kUnsafe, fmt::format("{} is not a regular file ({}): gpulane opens only regular files for a user",
                                                     path, KindOf(st.st_mode)));
  if (rules.owner && S_ISREG(st.st_mode) && st.st_uid != *rules.owner)
    return MakeError(ErrorKind::kUnsafe, fmt::format("{} belongs to uid {}, not to uid {} whose file it should be", path,
                                                     st.st_uid, *rules.owner));
  return file;
}

Result<std::string> ReadAt(const UserFile& file, std::uint64_t offset, std::size_t max_bytes) {
  std::string data(max_bytes, '\0');
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = pread(file.fd(), data.data() + done, data.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return MakeError(ErrorKind::kIo, fmt::format("cannot read: {}", std::strerror(errno)));
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  data.resize(done);
  return data;
}

Result<std::string> ReadTailAsUser(const std::string& path, std::optional<FileUser> as,
                                   std::optional<std::uint32_t> owner, std::size_t max_bytes) {
  auto file = OpenAsUser(path, as, {.access = UserFileAccess::kRead, .owner = owner});
  if (!file) return file.error();
  const std::uint64_t size = file->size_bytes();
  const std::uint64_t from = size > max_bytes ? size - max_bytes : 0;
  return ReadAt(*file, from, static_cast<std::size_t>(size - from));
}

Status AppendAsUser(const std::string& path, std::optional<FileUser> as, std::optional<std::uint32_t> owner,
                    const std::string& text) {
  auto file = OpenAsUser(path, as, {.access = UserFileAccess::kAppend, .owner = owner});
  if (!file) return file.error();
  if (write(file->fd(), text.data(), text.size()) != static_cast<ssize_t>(text.size()))
    return MakeError(ErrorKind::kIo, fmt::format("cannot write to {}: {}", path, std::strerror(errno)));
  return Status::Ok();
}

bool AccessibleAsUser(const std::string& path, std::optional<FileUser> as, int mode) {
  AsUserRights rights(as);
  return rights.ok() && faccessat(AT_FDCWD, path.c_str(), mode, AT_EACCESS) == 0;
}

}  // namespace gpulane::os
