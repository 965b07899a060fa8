#include "web/api.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "proto/telemetry_json.h"
#include "util/units.h"

namespace gpulane::web {
namespace {

using nlohmann::json;

Error Bad(std::string message) { return MakeError(ErrorKind::kInvalidArgument, std::move(message)); }

// Copies `key` of `from` into `to` (as `as`) when present.
void Copy(const json& from, json& to, const char* key, const char* as = nullptr) {
  if (from.is_object() && from.contains(key) && !from[key].is_null()) to[as ? as : key] = from[key];
}

// A job's argv as one line for people; bytes that are not UTF-8 (the {"b64"} form) show as "?".
std::string CommandLine(const json& argv) {
  std::string out;
  for (const auto& a : argv) {
    if (!out.empty()) out += ' ';
    out += a.is_string() ? a.get<std::string>() : "?";
  }
  return out;
}

json ProcessView(const json& p, bool show_commands) {
  json out = {{"pid", p.value("pid", 0)}};
  Copy(p, out, "user");
  Copy(p, out, "used_memory_bytes", "memory_bytes");
  Copy(p, out, "kind");
  Copy(p, out, "sm_util_pct", "util_pct");
  if (show_commands) {
    Copy(p, out, "command");
    Copy(p, out, "cmdline");
  }
  return out;
}

// The GPU's readings: the sampler's last point when there is one, else the snapshot's own.
json ReadingOf(const json& device, const json* point) {
  json r;
  if (point) {
    for (const char* key : {"t", "util_gpu_pct", "util_memory_pct", "memory_used_bytes", "memory_total_bytes", "power_mw",
                            "temperature_c", "clock_sm_mhz", "clock_mem_mhz", "energy_mj", "clocks_event_reasons", "xid_errors"})
      Copy(*point, r, key);
  } else {
    Copy(device, r, "utilization_gpu_pct", "util_gpu_pct");
    Copy(device, r, "utilization_memory_pct", "util_memory_pct");
    Copy(device, r, "memory_used_bytes");
    Copy(device, r, "memory_total_bytes");
    Copy(device, r, "power_draw_mw", "power_mw");
    Copy(device, r, "temperature_c");
  }
  Copy(device, r, "power_limit_mw");
  if (!r.contains("memory_total_bytes")) Copy(device, r, "memory_total_bytes");
  return r;
}

// Seconds since the epoch from `since` (a duration back from now) or `since_s`; `fallback_s`
// back from now without either.
Result<double> SinceS(const Query& query, double now_s, double fallback_s) {
  if (auto it = query.find("since_s"); it != query.end()) {
    char* end = nullptr;
    const double t = std::strtod(it->second.c_str(), &end);
    if (it->second.empty() || *end != '\0' || !std::isfinite(t) || t < 0)
      return Bad(fmt::format("since_s={}: give seconds since the epoch, like since_s={:.0f}", it->second, now_s - 3600));
    return t;
  }
  auto it = query.find("since");
  if (it == query.end()) return now_s - fallback_s;
  auto back = ParseDurationOrSecondsS(it->second);
  if (!back || !std::isfinite(*back) || *back < 0)
    return Bad(fmt::format("since={}: give a duration back from now, like since=1h or since=7d", it->second));
  return now_s - *back;
}

}  // namespace

json StatusView(const json& snapshot, const json& telemetry, const json& queue, bool show_commands, const std::string& hostname) {
  std::map<std::string, const json*> points;  // into `telemetry`
  json jobs_by_gpu = json::object();
  if (telemetry.is_object()) {
    if (auto gpus = telemetry.find("gpus"); gpus != telemetry.end() && gpus->is_array())
      for (const auto& g : *gpus)
        if (g.contains("reading")) points[g.value("uuid", "")] = &g["reading"];
    for (const auto& j : telemetry.value("jobs", json::array())) {
      json job = {{"job_id", j.value("job_id", "")}, {"job_text", j.value("job_text", j.value("job_id", ""))},
                  {"user", j.value("user", "")}};
      Copy(j, job, "memory_bytes");
      Copy(j, job, "util_pct");
      jobs_by_gpu[j.value("gpu_uuid", "")].push_back(std::move(job));
    }
  }
  json gpus = json::array();
  for (const auto& d : snapshot.value("devices", json::array())) {
    const std::string uuid = d.value("uuid", "");
    json g = {{"index", d.value("pci_index", 0)}, {"uuid", uuid}};
    Copy(d, g, "name");
    Copy(d, g, "pci_bus_id");
    Copy(d, g, "error");
    auto point = points.find(uuid);
    g["reading"] = ReadingOf(d, point == points.end() ? nullptr : point->second);
    if (d.contains("processes")) {
      g["processes"] = json::array();
      for (const auto& p : d["processes"]) g["processes"].push_back(ProcessView(p, show_commands));
    }
    g["jobs"] = jobs_by_gpu.contains(uuid) ? jobs_by_gpu[uuid] : json::array();
    gpus.push_back(std::move(g));
  }
  json out = {{"hostname", hostname}, {"gpus", std::move(gpus)}, {"queue", QueueView(queue, show_commands)["jobs"]},
              {"telemetry", telemetry.is_object()}};
  Copy(telemetry, out, "time_s");
  Copy(snapshot, out, "driver_version");
  json warnings = queue.value("warnings", json::array());
  for (const auto& w : snapshot.value("warnings", json::array())) warnings.push_back(w);
  out["warnings"] = std::move(warnings);
  return out;
}

json QueueView(const json& queue, bool show_commands) {
  json jobs = json::array();
  for (const auto& j : queue.value("jobs", json::array())) {
    const json spec = j.value("spec", json::object());
    const json request = spec.value("request", json::object());
    json v = {{"id", j.value("id_text", std::to_string(j.value("id", 0)))},
              {"user", j.value("user", "")},
              {"state", j.value("state", "")},
              {"reason", j.value("reason", "")},
              {"gpus", request.value("count", 1)}};
    Copy(spec, v, "name");
    Copy(request, v, "mem_bytes");
    Copy(request, v, "mig_profile");
    Copy(j, v, "submit_time", "submit_time_s");
    Copy(j, v, "start_time", "start_time_s");
    Copy(j, v, "gpu_indices");
    Copy(j, v, "array_job_id");
    if (show_commands && spec.value("argv_hidden", false)) {  // the daemon kept it back (store/job_view.h)
      v["command"] = spec["argv"].is_string() ? spec["argv"].get<std::string>() : "(hidden)";
      v["command_hidden"] = true;
    } else if (show_commands && spec.contains("argv")) {
      v["command"] = CommandLine(spec["argv"]);
    }
    jobs.push_back(std::move(v));
  }
  return {{"jobs", std::move(jobs)}};
}

Result<json> HistoryRequest(const Query& query, double now_s) {
  auto gpu = query.find("gpu");
  if (gpu == query.end() || gpu->second.empty()) return Bad("history needs gpu=INDEX or gpu=UUID, like gpu=0");
  json req = {{"op", "history"}};
  if (gpu->second.rfind("GPU-", 0) == 0) {
    req["gpu"] = gpu->second;
  } else {
    char* end = nullptr;
    const unsigned long index = std::strtoul(gpu->second.c_str(), &end, 10);
    if (*end != '\0' || gpu->second[0] == '-' || index > 1024)
      return Bad(fmt::format("gpu={}: give a GPU index (0, 1, ...) or UUID (GPU-...)", gpu->second));
    req["gpu"] = index;
  }
  auto since = SinceS(query, now_s, 3600);
  if (!since) return since.error();
  req["since_s"] = *since;
  if (auto it = query.find("resolution"); it != query.end()) {
    auto r = ParseDurationOrSecondsS(it->second);
    if (!r || (*r != 0 && *r != 10 && *r != 60))
      return Bad(fmt::format("resolution={}: give 0 (full rate, the last hour), 10 or 60 (seconds)", it->second));
    req["resolution_s"] = *r;
  }
  return req;
}

Result<json> ReportRequest(const Query& query, double now_s) {
  auto since = SinceS(query, now_s, 86400);
  if (!since) return since.error();
  json req = {{"op", "report"}, {"since_s", *since}, {"by", "user"}};
  if (auto it = query.find("by"); it != query.end()) {
    if (it->second != "user" && it->second != "job" && it->second != "gpu" && it->second != "day")
      return Bad(fmt::format("by={}: give user, job, gpu or day", it->second));
    req["by"] = it->second;
  }
  if (auto it = query.find("user"); it != query.end() && !it->second.empty()) req["user"] = it->second;
  return req;
}

Result<json> ChartHistoryRequest(const Query& query, double now_s, std::size_t max_points) {
  auto request = HistoryRequest(query, now_s);
  if (!request) return request;
  (*request)["max_points"] = max_points;
  (*request)["fields"] = json::array();
  for (const char* f : kChartFields) (*request)["fields"].push_back(f);
  (*request)["columns"] = true;
  return request;
}

json ThinPoints(const json& points, std::size_t max_points) {
  json out = json::array();
  if (!points.is_array() || points.empty()) return out;
  for (std::size_t at : proto::EvenlySpaced(points.size(), max_points)) {
    json p;
    Copy(points[at], p, "t");
    for (const char* key : kChartFields) Copy(points[at], p, key);
    out.push_back(std::move(p));
  }
  return out;
}

json ChartHistory(const json& reply, std::size_t max_points, bool columns) {
  const std::vector<std::string> fields(std::begin(kChartFields), std::end(kChartFields));
  if (auto c = reply.find("columns"); c != reply.end() && c->is_object() && c->contains("t") && (*c)["t"].is_array()) {
    if (columns) return *c;
    json points = json::array();  // the rows of the columns, a missing (null) field left out
    const json& t = (*c)["t"];
    for (std::size_t i = 0; i < t.size(); ++i) {
      json p = {{"t", t[i]}};
      for (const auto& f : fields)
        if (auto it = c->find(f); it != c->end() && it->is_array() && i < it->size() && !(*it)[i].is_null()) p[f] = (*it)[i];
      points.push_back(std::move(p));
    }
    return ThinPoints(points, max_points);
  }
  json thin = ThinPoints(reply.value("points", json::array()), max_points);
  return columns ? proto::PointsToColumns(thin, fields) : thin;
}

int HttpStatusOf(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInvalidArgument: return 400;
    case ErrorKind::kNotFound: return 404;
    case ErrorKind::kUnavailable:
    case ErrorKind::kTimeout:
    case ErrorKind::kIo: return 503;
    case ErrorKind::kUnsafe: return 502;
    default: return 500;
  }
}

json ErrorBody(const Error& error) {
  const char* code = "internal";
  switch (error.kind) {
    case ErrorKind::kInvalidArgument: code = "invalid_argument"; break;
    case ErrorKind::kNotFound: code = "not_found"; break;
    case ErrorKind::kUnavailable: code = "unavailable"; break;
    case ErrorKind::kTimeout: code = "timeout"; break;
    case ErrorKind::kIo: code = "io"; break;
    case ErrorKind::kUnsafe: code = "unsafe"; break;
    default: break;
  }
  return {{"error", error.message}, {"code", code}};
}

json AnomaliesView(const json& events) {
  auto pick = [](const json& e, std::initializer_list<const char*> keys) {
    json out = json::object();
    for (const char* k : keys)
      if (e.contains(k)) out[k] = e[k];
    return out;
  };
  json current = json::array(), recent = json::array();
  for (const json& e : events.value("current", json::array()))
    current.push_back(pick(e, {"kind", "message", "gpu_index", "job_id", "user", "drains"}));
  const json stored = events.value("events", json::array());
  for (auto it = stored.rbegin(); it != stored.rend() && recent.size() < 50; ++it)
    recent.push_back(pick(*it, {"time_s", "kind", "message", "gpu_index", "job_id", "user", "cleared_s"}));
  return {{"supported", true}, {"anomalies", current}, {"recent", recent}};
}

}  // namespace gpulane::web
