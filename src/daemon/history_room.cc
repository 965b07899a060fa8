#include "daemon/history_room.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "util/units.h"

namespace gpulane::daemon {

std::uint64_t HistoryFloorBytes(std::uint64_t total_bytes, const HistoryFloor& floor) {
  if (floor.bytes) return *floor.bytes;
  if (floor.pct) return static_cast<std::uint64_t>(static_cast<double>(total_bytes) * (*floor.pct / 100));
  return std::max(kHistoryFloorMinBytes, static_cast<std::uint64_t>(static_cast<double>(total_bytes) * kHistoryFloorFraction));
}

bool HistoryHasRoom(const DiskSpace& space, const HistoryFloor& floor) {
  return space.free_bytes >= HistoryFloorBytes(space.total_bytes, floor);
}

Result<DiskSpace> DiskSpaceOf(const std::string& path) {
  struct statvfs st {};
  if (statvfs(path.c_str(), &st) != 0)
    return MakeError(ErrorKind::kIo, fmt::format("cannot read the free space of {}: {}", path, std::strerror(errno)));
  return DiskSpace{static_cast<std::uint64_t>(st.f_bavail) * st.f_frsize, static_cast<std::uint64_t>(st.f_blocks) * st.f_frsize};
}

std::string NoRoomLine(const std::string& dir, const DiskSpace& space, const HistoryFloor& floor) {
  const std::string why = floor.bytes ? "daemon.history_min_free"
                          : floor.pct ? fmt::format("daemon.history_min_free, {:g} % of its file system", *floor.pct)
                                      : "max of 256 MiB and 2 % of its file system";
  return fmt::format("GPU history is not stored: the state folder {} has {} free, under the {} kept for the job store "
                     "({}); it resumes once there is more",
                     dir, FormatBytes(space.free_bytes), FormatBytes(HistoryFloorBytes(space.total_bytes, floor)), why);
}

}  // namespace gpulane::daemon
