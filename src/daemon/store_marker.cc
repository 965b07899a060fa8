#include "daemon/store_marker.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <fmt/format.h>

namespace gpulane::daemon {

std::string StoreMarkerPath(const std::string& db_path) { return db_path + ".known"; }

Result<std::optional<std::int64_t>> ReadStoreMarker(const std::string& marker_path) {
  struct stat st {};
  if (lstat(marker_path.c_str(), &st) != 0 && errno == ENOENT) return std::optional<std::int64_t>();
  std::ifstream in(marker_path);
  if (!in || !S_ISREG(st.st_mode))
    return MakeError(ErrorKind::kStore, fmt::format("cannot read {}: not a readable file", marker_path));
  std::string line;
  while (std::getline(in, line)) {
    long long id = 0;
    if (std::sscanf(line.c_str(), "max_id %lld", &id) == 1 && id >= 0) return std::optional<std::int64_t>(id);
  }
  return MakeError(ErrorKind::kStore, fmt::format("{} is damaged (no \"max_id\" line): remove it only if the job "
                                                  "database next to it is the one to keep",
                                                  marker_path));
}

Status CheckStoreFileAgainstMarker(const std::string& db_path) {
  const std::string marker = StoreMarkerPath(db_path);
  auto recorded = ReadStoreMarker(marker);
  if (!recorded) return recorded.error();
  if (!*recorded) return Status::Ok();
  struct stat st {};
  const bool missing = stat(db_path.c_str(), &st) != 0;
  if (!missing && st.st_size > 0) return Status::Ok();
  return MakeError(ErrorKind::kStore,
                   fmt::format("the job database {} is {}, but {} records a store with job ids up to {}: restore the "
                               "database from a backup, or remove {} to start afresh with no jobs",
                               db_path, missing ? "missing" : "empty (0 bytes)", marker, **recorded, marker));
}

Status CheckStoreIdsAgainstMarker(const std::string& db_path, std::int64_t store_max_id) {
  const std::string marker = StoreMarkerPath(db_path);
  auto recorded = ReadStoreMarker(marker);
  if (!recorded) return recorded.error();
  if (!*recorded || store_max_id >= **recorded) return Status::Ok();
  return MakeError(ErrorKind::kStore,
                   fmt::format("the job database {} has job ids up to {}, but {} records ids up to {}: it is older "
                               "than the store the daemon last ran on (restored from an old backup?); restore the "
                               "newest one, or remove {} to go on with this one",
                               db_path, store_max_id, marker, **recorded, marker));
}

Status WriteStoreMarker(const std::string& db_path, std::int64_t max_id) {
  const std::string marker = StoreMarkerPath(db_path);
  const std::string temp = marker + ".tmp";
  const std::string text = fmt::format(
      "# gpulane: the job store {} exists and has used job ids up to max_id; the daemon refuses to start on a\n"
      "# missing, empty or older database while this file is here (remove it to start afresh).\nmax_id {}\n",
      db_path, max_id);
  int fd = open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return MakeError(ErrorKind::kIo, fmt::format("cannot write {}: {}", temp, std::strerror(errno)));
  const bool written = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && fsync(fd) == 0;
  const int saved = errno;
  close(fd);
  if (!written || rename(temp.c_str(), marker.c_str()) != 0) {
    const int why = written ? errno : saved;
    unlink(temp.c_str());
    return MakeError(ErrorKind::kIo, fmt::format("cannot write {}: {}", marker, std::strerror(why)));
  }
  // The rename itself durable: the folder's entry.
  const std::string dir = marker.substr(0, marker.rfind('/') == std::string::npos ? 0 : marker.rfind('/'));
  int dir_fd = open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    fsync(dir_fd);
    close(dir_fd);
  }
  return Status::Ok();
}

}  // namespace gpulane::daemon
