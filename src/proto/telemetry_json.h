#pragma once
// JSON of telemetry's values, as the daemon answers them and clients read them
// (docs/protocol.md, "Telemetry"): absent fields are left out, never written as 0 or null.
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "telemetry/history.h"
#include "telemetry/job_usage.h"
#include "telemetry/report.h"

namespace gpulane::proto {

nlohmann::json UsageToJson(const telemetry::JobUsage& usage);
/// The inverse of UsageToJson; fields of the wrong type are left absent.
telemetry::JobUsage UsageFromJson(const nlohmann::json& j);

nlohmann::json UsageRecordToJson(const telemetry::UsageRecord& record);
telemetry::UsageRecord UsageRecordFromJson(const nlohmann::json& j);

/// Indices of `n` items, at most `max` of them evenly spaced from the first to the last (all when
/// n <= max; none when max is 0): a chart's points (the `history` op's `max_points`).
std::vector<std::size_t> EvenlySpaced(std::size_t n, std::size_t max);

nlohmann::json PointToJson(const telemetry::GpuPoint& point);
/// `points` (objects with `t`) as columns: {"t": [...], field: [...], ...}, one array a field of
/// `fields` (all the points' fields, in the order first met, when empty), null where a point has
/// none (the `history` op's `columns`): a chart's data without a key repeated for every point.
nlohmann::json PointsToColumns(const nlohmann::json& points, const std::vector<std::string>& fields = {});
/// The same columns straight from points (`at`: which of them, in order), without an object a
/// point: PointsToColumns of their PointToJson, for non-empty `fields`.
nlohmann::json GpuPointsToColumns(const std::vector<telemetry::GpuPoint>& points, const std::vector<std::size_t>& at,
                                  const std::vector<std::string>& fields);
nlohmann::json HistoryRowToJson(const telemetry::HistoryRow& row);
nlohmann::json ReportRowToJson(const telemetry::ReportRow& row);
telemetry::ReportRow ReportRowFromJson(const nlohmann::json& j);

/// The usage a daemon metered (op "usage", `query` {"lease": name} or {"job_id": "12"}), asked of
/// the first of `sockets` that answers; nullopt when none answers or none metered it.
std::optional<telemetry::UsageRecord> AskUsage(const std::vector<std::string>& sockets, nlohmann::json query,
                                               double timeout_s);

}  // namespace gpulane::proto
