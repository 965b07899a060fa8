#include "os/file_system.h"

#include <fcntl.h>
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
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
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

Status SystemFileSystem::WriteFileDurably(const std::string& path, std::string_view data, mode_t mode) {
  const std::string temp = path + ".tmp";
  int fd = open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
  if (fd < 0) return MakeError(ErrorKind::kIo, fmt::format("cannot write {}: {}", temp, std::strerror(errno)));
  const bool written = write(fd, data.data(), data.size()) == static_cast<ssize_t>(data.size()) && fsync(fd) == 0;
  const int saved = errno;
  close(fd);
  if (!written || rename(temp.c_str(), path.c_str()) != 0) {
    const int why = written ? errno : saved;
    unlink(temp.c_str());
    return MakeError(ErrorKind::kIo, fmt::format("cannot write {}: {}", path, std::strerror(why)));
  }
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

}  // namespace gpulane::os
