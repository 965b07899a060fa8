#pragma once
// `gpulane share`: every user's share, decayed GPU use and fair-share factor (sched/fairshare.h),
// as a table for people and as JSON (the daemon's "share" reply, docs/protocol.md).
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sched/fairshare.h"

namespace gpulane {

/// The rows as the protocol carries them: [{"user", "share", "share_norm", "usage_gpu_s",
/// "usage_norm", "fair_share"}...].
nlohmann::json ShareRowsToJson(const std::vector<sched::UserShare>& rows);
/// The rows back from that JSON (members missing or of the wrong kind read as 0, names as "").
std::vector<sched::UserShare> ShareRowsFromJson(const nlohmann::json& rows);

/// The table: a header, then one line per user (name escaped for the terminal), then a line
/// naming the half-life. Lowest fair-share factor (heaviest user) first, ties by name.
std::string ShareTableText(std::vector<sched::UserShare> rows, double half_life_s);

}  // namespace gpulane
