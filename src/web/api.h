#pragma once
// The dashboard's JSON API (/api/v1/..., docs/web.md): pure functions from the daemon's replies
// (docs/protocol.md: snapshot, telemetry, queue, history, report) to what the API answers, and
// from an HTTP query to the daemon request it asks. Read-only; nothing here does I/O.
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "util/result.h"

namespace gpulane::web {

/// An HTTP query's parameters (the first value of each name).
using Query = std::map<std::string, std::string>;

/// /api/v1/status: every GPU with its latest readings, its processes (pid, user, memory; command
/// lines only with `show_commands`) and the jobs on it, and the unfinished jobs. `snapshot` is the
/// daemon's snapshot reply, `telemetry` its telemetry reply (null when the sampler is off),
/// `queue` its queue reply; `hostname` names the machine.
nlohmann::json StatusView(const nlohmann::json& snapshot, const nlohmann::json& telemetry, const nlohmann::json& queue,
                          bool show_commands, const std::string& hostname);

/// /api/v1/queue: the unfinished jobs, each with its state and why it waits (command lines only
/// with `show_commands`; never a job's environment).
nlohmann::json QueueView(const nlohmann::json& queue, bool show_commands);

/// The daemon's history request for /api/v1/history?gpu=&since=&until=&resolution= at wall time
/// `now_s` (seconds since the epoch). `gpu`: an index or a UUID (required); `since`: a duration
/// back from now ("1h", the default, "3600", "7d") or `since_s`: seconds since the epoch;
/// `resolution`: 0 (full rate, the last hour), 10 or 60 seconds. Errors: kInvalidArgument, one line.
Result<nlohmann::json> HistoryRequest(const Query& query, double now_s);

/// The daemon's report request for /api/v1/report?since=&by=&user= (`since` as for history, default
/// "1d", or `since_s`; `by`: user (default), job, gpu or day). Errors: kInvalidArgument, one line.
Result<nlohmann::json> ReportRequest(const Query& query, double now_s);

/// What a GPU's chart draws of each point, besides its time `t`.
inline constexpr const char* kChartFields[] = {"util_gpu_pct", "memory_used_bytes", "memory_total_bytes"};

/// HistoryRequest's request for a chart: the daemon sends at most `max_points` points, evenly
/// spaced, each with `t` and kChartFields only (an hour at 1 s is 3,600 points of 13 fields a GPU),
/// as columns (one array a field: docs/protocol.md, `history`'s `columns`).
Result<nlohmann::json> ChartHistoryRequest(const Query& query, double now_s, std::size_t max_points);

/// Points of a GPU's history (the daemon's history reply's "points") for a chart: at most
/// `max_points`, evenly spaced through them (the last always kept), each with only `t`,
/// `util_gpu_pct`, `memory_used_bytes` and `memory_total_bytes`. An hour at 1 s is 3,600 points a
/// GPU; a chart a few hundred pixels wide shows no more than this.
nlohmann::json ThinPoints(const nlohmann::json& points, std::size_t max_points);

/// A chart's history from the daemon's reply to ChartHistoryRequest: `columns` true, {"t": [...],
/// "util_gpu_pct": [...], "memory_used_bytes": [...], "memory_total_bytes": [...]} (null where a
/// point lacks the field); false, ThinPoints' points. A daemon older than `columns` answers with
/// points: thinned here (at most `max_points`) either way.
nlohmann::json ChartHistory(const nlohmann::json& reply, std::size_t max_points, bool columns);

/// /api/v1/anomalies from the daemon's events reply (docs/protocol.md, `events`): `anomalies`,
/// the ones current now (kind, message, gpu_index, job_id, user, drains: the GPU takes no new
/// jobs), and `recent`, the stored events of the request's window, newest first, at most 50.
/// `supported` is true. (When the daemon's sampler is off the route answers supported: false.)
nlohmann::json AnomaliesView(const nlohmann::json& events);

/// The HTTP status for a failure of kind `kind` (400, 404, 503, 502 or 500).
int HttpStatusOf(ErrorKind kind);

/// {"error": message, "code": a protocol code name} for an error body.
nlohmann::json ErrorBody(const Error& error);

}  // namespace gpulane::web
