#pragma once
// The files of gpulane's own state as the library sees them (issue 25, item 3; leveldb's Env file
// calls, ninja's DiskInterface): what the daemon and the supervisors read and write in the state
// folder: the store's marker and the job files through which the daemon and a supervisor hand a job
// over (daemon/job_files.h: spec, status, listing, liveness; what is about disk blocks or
// descriptors that cross a fork stays on POSIX there, said where). The real one (SystemFileSystem)
// is built in an executable's main() with the rest of os::Env; a test may hand the same code files
// kept in memory. Paths a *user* named are never read through this: the root side opens those with
// os::OpenAsUser (os/user_file.h).
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace gpulane::os {

/// What a path is, as stat(2) (kFollow) or lstat(2) (kNoFollow) says.
struct FileInfo {
  enum class Kind { kRegular, kDirectory, kSymlink, kOther } kind = Kind::kOther;
  std::uint64_t size_bytes = 0;
};
enum class Links { kFollow, kNoFollow };

class FileSystem {
 public:
  virtual ~FileSystem() = default;
  /// The path's kind and size; nullopt when nothing is there (ENOENT). Errors: kIo (any other
  /// failure: a folder on the way that cannot be searched, say).
  virtual Result<std::optional<FileInfo>> Stat(const std::string& path, Links links) = 0;
  /// The whole file at `path`, never through a symlink. Errors: kIo (missing, unreadable, a folder,
  /// a symlink).
  virtual Result<std::string> ReadFile(const std::string& path) = 0;
  /// Replaces `path` with `data` so that a crash leaves the old file or the new one, never a part:
  /// written to `path`.tmp (mode `mode`, never through a symlink), flushed to disk, renamed over
  /// `path`, the folder flushed. Errors: kIo naming the file that failed (the .tmp one when it
  /// cannot be created).
  virtual Status WriteFileDurably(const std::string& path, std::string_view data, mode_t mode) = 0;
  /// WriteFileDurably without the flushes: a crash of the process leaves the old file or the new
  /// one, a power loss may leave either or none (for what only has to outlive a process, where two
  /// flushes would cost milliseconds). Errors: as WriteFileDurably's.
  virtual Status WriteFileAtomically(const std::string& path, std::string_view data, mode_t mode) = 0;
  /// Removes the file at `path` (a symlink itself, never its target); nothing there is no error.
  /// Errors: kIo (it is there and cannot be removed).
  virtual Status RemoveFile(const std::string& path) = 0;
  /// The names in the folder `dir` ("." and ".." left out), in no particular order. Errors: kIo
  /// (no such folder, or it cannot be read).
  virtual Result<std::vector<std::string>> ListDir(const std::string& dir) = 0;
  /// True when some open file holds an exclusive flock(2) lock on the file at `path` (probed with a
  /// shared lock, taken and let go at once); false when none does or there is no such file (no
  /// file, no lock) or it cannot be opened.
  virtual bool LockedExclusively(const std::string& path) = 0;
};

/// The real files (POSIX calls). Built in an executable's main() (os::SystemEnv).
class SystemFileSystem final : public FileSystem {
 public:
  Result<std::optional<FileInfo>> Stat(const std::string& path, Links links) override;
  Result<std::string> ReadFile(const std::string& path) override;
  Status WriteFileDurably(const std::string& path, std::string_view data, mode_t mode) override;
  Status WriteFileAtomically(const std::string& path, std::string_view data, mode_t mode) override;
  Status RemoveFile(const std::string& path) override;
  Result<std::vector<std::string>> ListDir(const std::string& dir) override;
  bool LockedExclusively(const std::string& path) override;
};

}  // namespace gpulane::os
