#pragma once
// history.db lives in the state folder beside jobs.db: GPU history must never take the room the
// job store needs (a full disk stops submissions). The sampler stores history only while the
// folder's file system has more free space than a floor, and says so where the daemon's health is
// shown (`gpulane status`, `queue`, `show`: the reply's warnings) while it does not.
#include <cstdint>
#include <optional>
#include <string>

#include "util/result.h"

namespace gpulane::daemon {

/// A file system's space, as statvfs tells it to an unprivileged writer.
struct DiskSpace {
  std::uint64_t free_bytes = 0;   ///< f_bavail * f_frsize
  std::uint64_t total_bytes = 0;  ///< f_blocks * f_frsize
};

inline constexpr std::uint64_t kHistoryFloorMinBytes = std::uint64_t{256} << 20;
inline constexpr double kHistoryFloorFraction = 0.02;

/// The admin's floor (daemon.history_min_free, docs/config.md): a size, or a percentage of the
/// file system; neither: the default, max(256 MiB, 2 %).
struct HistoryFloor {
  std::optional<std::uint64_t> bytes;
  std::optional<double> pct;
};

/// The free space history leaves to the job store: `floor`'s, by default max(256 MiB, 2 % of the
/// file system).
std::uint64_t HistoryFloorBytes(std::uint64_t total_bytes, const HistoryFloor& floor = {});
/// Whether history may be written with `space` free: at least the floor.
bool HistoryHasRoom(const DiskSpace& space, const HistoryFloor& floor = {});
/// statvfs of `path`. Errors: kIo.
Result<DiskSpace> DiskSpaceOf(const std::string& path);
/// The warning while history is not stored: "GPU history is not stored: the state folder DIR has
/// 120 MiB free, under the 256 MiB kept for the job store (...); it resumes once there is more".
std::string NoRoomLine(const std::string& dir, const DiskSpace& space, const HistoryFloor& floor = {});

}  // namespace gpulane::daemon
