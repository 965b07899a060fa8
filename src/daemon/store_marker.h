#pragma once
// The job store's side file, <state>/jobs.db.known: written by the daemon once it has opened the
// store, it records that a store exists there and the largest job id it had used. A daemon that
// finds the marker but a missing or zero-length jobs.db, or one whose ids stop short of the
// recorded one, refuses to start (kStore, exit 13) instead of starting silently on an empty or
// older queue: queued jobs would be lost and finished ones forgotten. Removing the marker is the
// admin's way of saying "start afresh". Read and written through the daemon's os::Env files
// (os/file_system.h).
#include <cstdint>
#include <optional>
#include <string>

#include "os/file_system.h"
#include "util/result.h"

namespace gpulane::daemon {

/// The marker's path for the database at `db_path` (`db_path` + ".known").
std::string StoreMarkerPath(const std::string& db_path);

/// The largest job id the marker at `marker_path` records; nullopt when there is no marker.
/// Errors: kStore when it exists but cannot be read.
Result<std::optional<std::int64_t>> ReadStoreMarker(os::FileSystem& files, const std::string& marker_path);

/// Before the store is opened: kStore when the marker exists and the database file is missing or
/// has zero length (one line naming both files and the way out).
Status CheckStoreFileAgainstMarker(os::FileSystem& files, const std::string& db_path);

/// After it is opened: kStore when the store's largest id `store_max_id` is below the marker's.
Status CheckStoreIdsAgainstMarker(os::FileSystem& files, const std::string& db_path, std::int64_t store_max_id);

/// Records `max_id` in the marker (a new file renamed into place, flushed to disk, mode 0600).
/// Errors: kIo.
Status WriteStoreMarker(os::FileSystem& files, const std::string& db_path, std::int64_t max_id);

}  // namespace gpulane::daemon
