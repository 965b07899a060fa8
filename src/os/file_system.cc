#include "os/file_system.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fmt/format.h>

namespace gpulane::os {

Result<std::optional<FileInfo>> SystemFileSystem::Stat(const std::string& path, Links links) {
  struct stat st {};
  const int rc = links == Links::kFollow ? stat(path.c_str(), &st) : lstat(path.c_str(), &st);
  if (rc != 0) {
    if (errno == ENOENT) return std::optional<FileInfo>();
    return MakeError(ErrorKind::kIo, fmt::format("cannot look at {}: {}", path, std::strerror(errno)));
  }
  FileInfo info;
  info.kind = S_ISREG(st.st_mode)   ? FileInfo::Kind::kRegular
              : S_ISDIR(st.st_mode) ? FileInfo::Kind::kDirectory
              : S_ISLNK(st.st_mode) ? FileInfo::Kind::kSymlink
                                    : FileInfo::Kind::kOther;
  info.size_bytes = static_cast<std::uint64_t>(st.st_size);
  return std::optional<FileInfo>(info);
}

Result<std::string> SystemFileSystem::ReadFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return MakeError(ErrorKind::kIo, fmt::format("cannot read {}: {}", path, std::strerror(errno)));
  std::string text;
  char buf[65536];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
    if (n > 0) text.append(buf, static_cast<std::size_t>(n));
  const int saved = errno;
  close(fd);
  if (n < 0) return MakeError(ErrorKind::kIo, fmt::format("cannot read {}: {}", path, std::strerror(saved)));
  return text;
}

namespace {

// Replaces `path` with `data` through `path`.tmp and a rename; with `durably`, the file is flushed
// before the rename and its folder after it.
Status WriteReplacing(const std::string& path, std::string_view data, mode_t mode, bool durably) {
  const std::string temp = path + ".tmp";
  int fd = open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
  if (fd < 0) return MakeError(ErrorKind::kIo, fmt::format("cannot write {}: {}", temp, std::strerror(errno)));
  const bool written = write(fd, data.data(), data.size()) == static_cast<ssize_t>(data.size()) &&
                       (!durably || fsync(fd) == 0);
  const int saved = errno;
  close(fd);
  if (!written || rename(temp.c_str(), path.c_str()) != 0) {
    const int why = written ? errno : saved;
    unlink(temp.c_str());
    return MakeError(ErrorKind::kIo, fmt::format("cannot write {}: {}", path, std::strerror(why)));
  }
  if (!durably) return Status::Ok();
  // The rename itself durable: the folder's entry.
  const std::string::size_type slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  const int dir_fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    fsync(dir_fd);
    close(dir_fd);
  }
  return Status::Ok();
}

}  // namespace

Status SystemFileSystem::WriteFileDurably(const std::string& path, std::string_view data, mode_t mode) {
  return WriteReplacing(path, data, mode, /*durably=*/true);
}

Status SystemFileSystem::WriteFileAtomically(const std::string& path, std::string_view data, mode_t mode) {
  return WriteReplacing(path, data, mode, /*durably=*/false);
}

Status SystemFileSystem::RemoveFile(const std::string& path) {
  if (unlink(path.c_str()) == 0 || errno == ENOENT) return Status::Ok();
  return MakeError(ErrorKind::kIo, fmt::format("cannot remove {}: {}", path, std::strerror(errno)));
}

Result<std::vector<std::string>> SystemFileSystem::ListDir(const std::string& dir) {
  DIR* folder = opendir(dir.c_str());
  if (!folder) return MakeError(ErrorKind::kIo, fmt::format("cannot list {}: {}", dir, std::strerror(errno)));
  std::vector<std::string> names;
  errno = 0;
  while (const dirent* entry = readdir(folder)) {
    const std::string_view name = entry->d_name;
    if (name != "." && name != "..") names.emplace_back(name);
  }
  const int saved = errno;
  closedir(folder);
  if (saved != 0) return MakeError(ErrorKind::kIo, fmt::format("cannot list {}: {}", dir, std::strerror(saved)));
  return names;
}

bool SystemFileSystem::LockedExclusively(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return false;
  const bool locked = flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  close(fd);
  return locked;
}

}  // namespace gpulane::os
