#include "proto/telemetry_json.h"

#include <algorithm>

#include "proto/call.h"

namespace gpulane::proto {
namespace {

using nlohmann::json;

template <typename T>
void Put(json& j, const char* key, const std::optional<T>& v) {
  if (v) j[key] = *v;
}

template <typename T>
void Get(const json& j, const char* key, std::optional<T>& v) {
  auto it = j.find(key);
  if (it == j.end()) return;
  if constexpr (std::is_floating_point_v<T>) {
    if (it->is_number()) v = it->get<T>();
  } else {
    if (it->is_number_unsigned() || (it->is_number_integer() && it->get<std::int64_t>() >= 0)) v = it->get<T>();
  }
}

double Number(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : 0;
}

}  // namespace

json UsageToJson(const telemetry::JobUsage& u) {
  json j = {{"run_s", u.run_s}, {"gpus", u.gpus}, {"gpu_s", u.gpu_s}, {"samples", u.samples}};
  Put(j, "wait_s", u.wait_s);
  Put(j, "energy_j", u.energy_j);
  Put(j, "peak_memory_bytes", u.peak_memory_bytes);
  Put(j, "mean_memory_bytes", u.mean_memory_bytes);
  Put(j, "mean_util_pct", u.mean_util_pct);
  Put(j, "p10_util_pct", u.p10_util_pct);
  Put(j, "idle_fraction", u.idle_fraction);
  return j;
}

telemetry::JobUsage UsageFromJson(const json& j) {
  telemetry::JobUsage u;
  if (!j.is_object()) return u;
  u.run_s = Number(j, "run_s");
  u.gpus = Number(j, "gpus");
  u.gpu_s = Number(j, "gpu_s");
  u.samples = static_cast<std::uint64_t>(Number(j, "samples"));
  Get(j, "wait_s", u.wait_s);
  Get(j, "energy_j", u.energy_j);
  Get(j, "peak_memory_bytes", u.peak_memory_bytes);
  Get(j, "mean_memory_bytes", u.mean_memory_bytes);
  Get(j, "mean_util_pct", u.mean_util_pct);
  Get(j, "p10_util_pct", u.p10_util_pct);
  Get(j, "idle_fraction", u.idle_fraction);
  return u;
}

json UsageRecordToJson(const telemetry::UsageRecord& r) {
  json j = {{"job_id", r.job_id}, {"uid", r.uid},         {"user", r.user},       {"name", r.name},
          {"gpu_uuids", r.gpu_uuids}, {"gpu_indices", r.gpu_indices}, {"start_s", r.start_s}, {"end_s", r.end_s},
          {"usage", UsageToJson(r.usage)}};
  if (!r.job_text.empty()) j["job_text"] = r.job_text;
  return j;
}

telemetry::UsageRecord UsageRecordFromJson(const json& j) {
  telemetry::UsageRecord r;
  if (!j.is_object()) return r;
  r.job_id = j.value("job_id", "");
  r.job_text = j.value("job_text", "");
  r.uid = j.value("uid", 0u);
  r.user = j.value("user", "");
  r.name = j.value("name", "");
  if (j.contains("gpu_uuids") && j["gpu_uuids"].is_array())
    for (const auto& u : j["gpu_uuids"])
      if (u.is_string()) r.gpu_uuids.push_back(u.get<std::string>());
  if (j.contains("gpu_indices") && j["gpu_indices"].is_array())
    for (const auto& i : j["gpu_indices"])
      if (i.is_number_unsigned()) r.gpu_indices.push_back(i.get<unsigned>());
  r.start_s = Number(j, "start_s");
  r.end_s = Number(j, "end_s");
  if (j.contains("usage")) r.usage = UsageFromJson(j["usage"]);
  return r;
}

std::vector<std::size_t> EvenlySpaced(std::size_t n, std::size_t max) {
  const std::size_t kept = std::min(n, max);
  std::vector<std::size_t> at(kept);
  for (std::size_t i = 0; i < kept; ++i) at[i] = kept == 1 ? n - 1 : i * (n - 1) / (kept - 1);
  return at;
}

json PointsToColumns(const json& points, const std::vector<std::string>& fields) {
  std::vector<std::string> keys = {"t"};
  for (const auto& f : fields)
    if (f != "t") keys.push_back(f);
  if (fields.empty() && points.is_array())
    for (const auto& p : points)
      if (p.is_object())
        for (const auto& [k, v] : p.items())
          if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
  json out = json::object();
  for (const auto& k : keys) {
    json column = json::array();
    if (points.is_array()) {
      column.get_ref<json::array_t&>().reserve(points.size());
      for (const auto& p : points) {
        auto it = p.is_object() ? p.find(k) : p.end();
        column.push_back(p.is_object() && it != p.end() ? *it : json());
      }
    }
    out[k] = std::move(column);
  }
  return out;
}

json GpuPointsToColumns(const std::vector<telemetry::GpuPoint>& points, const std::vector<std::size_t>& at,
                        const std::vector<std::string>& fields) {
  using R = telemetry::GpuReading;
  auto column = [&](auto value) {
    json c = json::array();
    c.get_ref<json::array_t&>().reserve(at.size());
    for (std::size_t i : at) c.push_back(value(points[i]));
    return c;
  };
  auto optional = [&](auto member) {
    return column([member](const telemetry::GpuPoint& p) { const auto& v = p.reading.*member; return v ? json(*v) : json(); });
  };
  json out = {{"t", column([](const telemetry::GpuPoint& p) { return json(p.time_s); })}};
  for (const auto& f : fields) {
    if (f == "t") continue;
    if (f == "util_gpu_pct") out[f] = optional(&R::util_gpu_pct);
    else if (f == "util_memory_pct") out[f] = optional(&R::util_memory_pct);
    else if (f == "memory_used_bytes") out[f] = optional(&R::memory_used_bytes);
    else if (f == "memory_total_bytes") out[f] = optional(&R::memory_total_bytes);
    else if (f == "power_mw") out[f] = optional(&R::power_mw);
    else if (f == "temperature_c") out[f] = optional(&R::temperature_c);
    else if (f == "clock_sm_mhz") out[f] = optional(&R::clock_sm_mhz);
    else if (f == "clock_mem_mhz") out[f] = optional(&R::clock_mem_mhz);
    else if (f == "energy_mj") out[f] = optional(&R::energy_mj);
    else if (f == "clocks_event_reasons") out[f] = optional(&R::clocks_event_reasons);
    else if (f == "xid_errors")
      out[f] = column([](const telemetry::GpuPoint& p) { return p.reading.xid_errors ? json(p.reading.xid_errors) : json(); });
    else if (f == "failed")
      out[f] = column([](const telemetry::GpuPoint& p) { return p.reading.failed ? json(true) : json(); });
    else out[f] = column([](const telemetry::GpuPoint&) { return json(); });
  }
  return out;
}

json PointToJson(const telemetry::GpuPoint& p) {
  const telemetry::GpuReading& r = p.reading;
  json j = {{"t", p.time_s}};
  Put(j, "util_gpu_pct", r.util_gpu_pct);
  Put(j, "util_memory_pct", r.util_memory_pct);
  Put(j, "memory_used_bytes", r.memory_used_bytes);
  Put(j, "memory_total_bytes", r.memory_total_bytes);
  Put(j, "power_mw", r.power_mw);
  Put(j, "temperature_c", r.temperature_c);
  Put(j, "clock_sm_mhz", r.clock_sm_mhz);
  Put(j, "clock_mem_mhz", r.clock_mem_mhz);
  Put(j, "energy_mj", r.energy_mj);
  Put(j, "clocks_event_reasons", r.clocks_event_reasons);
  if (r.xid_errors) j["xid_errors"] = r.xid_errors;
  if (r.failed) j["failed"] = true;
  return j;
}

json HistoryRowToJson(const telemetry::HistoryRow& r) {
  json j = {{"t", r.start_s}, {"length_s", r.length_s}, {"samples", r.samples}};
  Put(j, "util_gpu_pct", r.util_gpu_mean_pct);
  Put(j, "util_gpu_max_pct", r.util_gpu_max_pct);
  Put(j, "util_memory_pct", r.util_memory_mean_pct);
  Put(j, "memory_used_bytes", r.memory_used_mean_bytes);
  Put(j, "memory_used_max_bytes", r.memory_used_max_bytes);
  Put(j, "power_mw", r.power_mean_mw);
  Put(j, "temperature_max_c", r.temperature_max_c);
  Put(j, "clock_sm_mhz", r.clock_sm_mean_mhz);
  Put(j, "energy_mj", r.energy_mj);
  if (r.clocks_event_reasons) j["clocks_event_reasons"] = r.clocks_event_reasons;
  if (r.xid_errors) j["xid_errors"] = r.xid_errors;
  if (r.failed_samples) j["failed_samples"] = r.failed_samples;
  return j;
}

json ReportRowToJson(const telemetry::ReportRow& r) {
  json j = {{"key", r.key}, {"jobs", r.jobs}, {"gpu_s", r.gpu_s}, {"run_s", r.run_s}};
  Put(j, "energy_j", r.energy_j);
  Put(j, "peak_memory_bytes", r.peak_memory_bytes);
  Put(j, "mean_util_pct", r.mean_util_pct);
  Put(j, "idle_fraction", r.idle_fraction);
  Put(j, "mean_wait_s", r.mean_wait_s);
  return j;
}

telemetry::ReportRow ReportRowFromJson(const json& j) {
  telemetry::ReportRow r;
  if (!j.is_object()) return r;
  r.key = j.value("key", "");
  r.jobs = static_cast<std::uint64_t>(Number(j, "jobs"));
  r.gpu_s = Number(j, "gpu_s");
  r.run_s = Number(j, "run_s");
  Get(j, "energy_j", r.energy_j);
  Get(j, "peak_memory_bytes", r.peak_memory_bytes);
  Get(j, "mean_util_pct", r.mean_util_pct);
  Get(j, "idle_fraction", r.idle_fraction);
  Get(j, "mean_wait_s", r.mean_wait_s);
  return r;
}

std::optional<telemetry::UsageRecord> AskUsage(const std::vector<std::string>& sockets, json query, double timeout_s) {
  query["op"] = "usage";
  for (const auto& socket : sockets) {
    auto reply = CallExisting(socket, query, timeout_s);
    if (!reply) {
      if (reply.error().kind == ErrorKind::kUnavailable) continue;  // no daemon there: the next one
      return std::nullopt;
    }
    if (reply->contains("record")) return UsageRecordFromJson((*reply)["record"]);
    return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace gpulane::proto
