#pragma once
// The one way gpulane's root side touches a path a user named (docs/security.md, "Root never
// opens a user's path with root's rights"): a job's logs and their tails (--notify's
// GPULANE_LOG_TAIL, `gpulane logs`, the supervisor's notes, usage line and log sizes), the
// programs a job's PATH names, anything else under a user's control. A job can replace any such
// path between its start and its end (a symlink to /etc/shadow, a FIFO, /dev/zero, a folder on the
// way that now leads elsewhere), so:
//   - the path is resolved with the user's file-system rights: for the call alone this thread takes
//     the user's fsuid, fsgid and groups (the raw setfsuid, setfsgid and setgroups system calls,
//     which change this thread's credentials only; glibc's setgroups would change every thread's),
//     and gives root's back after (or aborts: nothing goes on as someone else);
//   - never through a final symlink (O_NOFOLLOW) nor a /proc magic link (openat2
//     RESOLVE_NO_MAGICLINKS: /proc/<this pid>/fd/N would lead to root's open files), never blocking
//     (O_NONBLOCK: a FIFO), never becoming a controlling terminal (O_NOCTTY), never inherited;
//   - then fstat on the descriptor: regular files only (and /dev/null where asked), the user's own
//     where asked;
//   - reads are bounded by the caller's byte count.
// A process that is not root (gpulane run, a per-user daemon) opens with its own rights, the same
// flags and checks. scripts/check-user-paths.py (a ctest test) keeps every other path-taking call
// out of src/daemon/ and src/exec/ but for an allow-list with its reasons.
#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

#include "util/result.h"

namespace gpulane::os {

/// Whose file-system rights a path is resolved with.
struct FileUser {
  std::uint32_t uid = 0;
  std::uint32_t gid = 0;
};

/// The rights a process acting for `uid`/`gid` takes: theirs when this process is root and they
/// are not; none (its own) otherwise.
std::optional<FileUser> ActingFor(std::uint32_t uid, std::uint32_t gid);

enum class UserFileAccess {
  kRead,    ///< O_RDONLY
  kAppend,  ///< O_WRONLY | O_APPEND, never created
  kStat,    ///< O_PATH: the file's kind and size, nothing opened for reading or writing
};

/// What a user's file must be.
struct UserFileRules {
  UserFileAccess access = UserFileAccess::kRead;
  /// The file must belong to this uid (a job's log is its owner's own); none: any the user may open.
  std::optional<std::uint32_t> owner;
  /// /dev/null passes too (`-o /dev/null`: the output thrown away); UserFile::null_device says so.
  bool null_device_ok = false;
};

/// An opened user's file: its descriptor (closed with it) and what fstat said of it.
class UserFile {
 public:
  UserFile(int fd, const struct stat& st) : fd_(fd), st_(st) {}
  UserFile(UserFile&& other) noexcept : fd_(other.fd_), st_(other.st_) { other.fd_ = -1; }
  UserFile& operator=(UserFile&& other) noexcept;
  UserFile(const UserFile&) = delete;
  UserFile& operator=(const UserFile&) = delete;
  ~UserFile();

  int fd() const { return fd_; }
  const struct stat& stat() const { return st_; }
  std::uint64_t size_bytes() const { return S_ISREG(st_.st_mode) ? static_cast<std::uint64_t>(st_.st_size) : 0; }
  bool null_device() const;

 private:
  int fd_ = -1;
  struct stat st_ {};
};

/// Opens `path` as `as` (none: with this process's own rights) under `rules`.
/// Errors: kNotFound (no such file), kPermission (the user may not open it), kUnsafe (a final
/// symlink, a magic link, not a regular file, not the owner's), kIo (anything else); each message
/// names the path and why.
Result<UserFile> OpenAsUser(const std::string& path, std::optional<FileUser> as, const UserFileRules& rules);

/// At most `max_bytes` of `file` from `offset` (short at its end). Errors: kIo.
Result<std::string> ReadAt(const UserFile& file, std::uint64_t offset, std::size_t max_bytes);

/// The last `max_bytes` of the regular file `path` (of `owner`, when given), opened as `as`.
Result<std::string> ReadTailAsUser(const std::string& path, std::optional<FileUser> as,
                                   std::optional<std::uint32_t> owner, std::size_t max_bytes);

/// Appends `text` to the existing regular file `path` of `owner` (when given), opened as `as`.
Status AppendAsUser(const std::string& path, std::optional<FileUser> as, std::optional<std::uint32_t> owner,
                    const std::string& text);

/// Whether `as` may execute (`mode` X_OK) or find (F_OK) `path`, as execve would decide for them
/// (faccessat with AT_EACCESS under the user's rights).
bool AccessibleAsUser(const std::string& path, std::optional<FileUser> as, int mode);

}  // namespace gpulane::os
