#include "daemon/store_marker.h"

#include <cstdio>
#include <sstream>
#include <fmt/format.h>

namespace gpulane::daemon {

std::string StoreMarkerPath(const std::string& db_path) { return db_path + ".known"; }

Result<std::optional<std::int64_t>> ReadStoreMarker(os::FileSystem& files, const std::string& marker_path) {
  auto info = files.Stat(marker_path, os::Links::kNoFollow);  // a symlink is never followed
  if (info && !*info) return std::optional<std::int64_t>();
  const Error unreadable = MakeError(ErrorKind::kStore, fmt::format("cannot read {}: not a readable file", marker_path));
  if (!info || (*info)->kind != os::FileInfo::Kind::kRegular) return unreadable;
  auto text = files.ReadFile(marker_path);
  if (!text) return unreadable;
  std::istringstream in(*text);
  std::string line;
  while (std::getline(in, line)) {
    long long id = 0;
    if (std::sscanf(line.c_str(), "max_id %lld", &id) == 1 && id >= 0) return std::optional<std::int64_t>(id);
  }
  return MakeError(ErrorKind::kStore, fmt::format("{} is damaged (no \"max_id\" line): remove it only if the job "
                                                  "database next to it is the one to keep",
                                                  marker_path));
}

Status CheckStoreFileAgainstMarker(os::FileSystem& files, const std::string& db_path) {
  const std::string marker = StoreMarkerPath(db_path);
  auto recorded = ReadStoreMarker(files, marker);
  if (!recorded) return recorded.error();
  if (!*recorded) return Status::Ok();
  auto info = files.Stat(db_path, os::Links::kFollow);
  const bool missing = !info || !*info;  // as stat(2) failing: missing, or not to be looked at
  if (!missing && (*info)->size_bytes > 0) return Status::Ok();
  return MakeError(ErrorKind::kStore,
                   fmt::format("the job database {} is {}, but {} records a store with job ids up to {}: restore the "
                               "database from a backup, or remove {} to start afresh with no jobs",
                               db_path, missing ? "missing" : "empty (0 bytes)", marker, **recorded, marker));
}

Status CheckStoreIdsAgainstMarker(os::FileSystem& files, const std::string& db_path, std::int64_t store_max_id) {
  const std::string marker = StoreMarkerPath(db_path);
  auto recorded = ReadStoreMarker(files, marker);
  if (!recorded) return recorded.error();
  if (!*recorded || store_max_id >= **recorded) return Status::Ok();
  return MakeError(ErrorKind::kStore,
                   fmt::format("the job database {} has job ids up to {}, but {} records ids up to {}: it is older "
                               "than the store the daemon last ran on (restored from an old backup?); restore the "
                               "newest one, or remove {} to go on with this one",
                               db_path, store_max_id, marker, **recorded, marker));
}

Status WriteStoreMarker(os::FileSystem& files, const std::string& db_path, std::int64_t max_id) {
  const std::string text = fmt::format(
      "# gpulane: the job store {} exists and has used job ids up to max_id; the daemon refuses to start on a\n"
      "# missing, empty or older database while this file is here (remove it to start afresh).\nmax_id {}\n",
      db_path, max_id);
  return files.WriteFileDurably(StoreMarkerPath(db_path), text, 0600);
}

}  // namespace gpulane::daemon
