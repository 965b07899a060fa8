#pragma once
// The files of gpulane's own state as the library sees them (issue 25, item 3; leveldb's Env file
// calls, ninja's DiskInterface): what the daemon and the supervisors read and write in the state
// folder (the store's marker first; the job files, logs and spec files are to follow). The real
// one (SystemFileSystem) is built in an executable's main() with the rest of os::Env; a test may
// hand the same code files kept in memory. Paths a *user* named are never read through this: the
// root side opens those with os::OpenAsUser (os/user_file.h).
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

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
  /// The whole file at `path`. Errors: kIo (missing, unreadable, a folder).
  virtual Result<std::string> ReadFile(const std::string& path) = 0;
  /// Replaces `path` with `data` so that a crash leaves the old file or the new one, never a part:
  /// written to `path`.tmp (mode `mode`, never through a symlink), flushed to disk, renamed over
  /// `path`, the folder flushed. Errors: kIo naming the file that failed (the .tmp one when it
  /// cannot be created).
  virtual Status WriteFileDurably(const std::string& path, std::string_view data, mode_t mode) = 0;
};

/// The real files (POSIX calls). Built in an executable's main() (os::SystemEnv).
class SystemFileSystem final : public FileSystem {
 public:
  Result<std::optional<FileInfo>> Stat(const std::string& path, Links links) override;
  Result<std::string> ReadFile(const std::string& path) override;
  Status WriteFileDurably(const std::string& path, std::string_view data, mode_t mode) override;
};

}  // namespace gpulane::os
