#pragma once
// A lossless JSON form of GpuSnapshot, for handing snapshots between processes (the daemon answers
// `gpulane status`, `pick` and `run` with one so they need not initialise NVML themselves). Not the
// user-facing `status --json` schema (render/status_view.h), which adds context and drops nothing
// a user needs.
#include <nlohmann/json.hpp>

#include "gpu/types.h"
#include "util/result.h"

namespace gpulane {

nlohmann::json SnapshotToJson(const GpuSnapshot& snapshot);
/// Errors: kIo when fields are missing or of the wrong type.
Result<GpuSnapshot> SnapshotFromJson(const nlohmann::json& j);

}  // namespace gpulane
