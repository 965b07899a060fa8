#include "gpu/snapshot_json.h"

#include <stdexcept>
#include <utility>

namespace gpulane {
namespace {

using nlohmann::json;

template <typename T>
void Put(json& j, const char* key, const std::optional<T>& v) {
  if (v) j[key] = *v;
}

template <typename T>
void Get(const json& j, const char* key, std::optional<T>& v) {
  if (j.contains(key) && !j[key].is_null()) v = j[key].get<T>();
}

// The wire names of ProcessKind. A process without "kind" is a compute process (what snapshots
// held before graphics processes were read).
constexpr std::pair<ProcessKind, const char*> kKindNames[] = {
    {ProcessKind::kCompute, "compute"},
    {ProcessKind::kGraphics, "graphics"},
    {ProcessKind::kComputeAndGraphics, "compute+graphics"},
};

const char* KindName(ProcessKind kind) {
  for (const auto& [k, name] : kKindNames)
    if (k == kind) return name;
  return "compute";
}

ProcessKind KindFromName(const std::string& name) {
  for (const auto& [k, n] : kKindNames)
    if (name == n) return k;
  throw std::runtime_error("unknown process kind '" + name + "'");
}

json ProcessToJson(const GpuProcess& p) {
  json j = {{"pid", p.pid}, {"kind", KindName(p.kind)}};
  Put(j, "used_memory_bytes", p.used_memory_bytes);
  Put(j, "mig_uuid", p.mig_uuid);
  Put(j, "uid", p.uid);
  Put(j, "user", p.user);
  Put(j, "command", p.command);
  Put(j, "cmdline", p.cmdline);
  Put(j, "sm_util_pct", p.sm_util_pct);
  return j;
}

GpuProcess ProcessFromJson(const json& j) {
  GpuProcess p;
  p.pid = j.at("pid").get<std::uint32_t>();
  if (j.contains("kind")) p.kind = KindFromName(j["kind"].get<std::string>());
  Get(j, "used_memory_bytes", p.used_memory_bytes);
  Get(j, "mig_uuid", p.mig_uuid);
  Get(j, "uid", p.uid);
  Get(j, "user", p.user);
  Get(j, "command", p.command);
  Get(j, "cmdline", p.cmdline);
  Get(j, "sm_util_pct", p.sm_util_pct);
  return p;
}

json DeviceToJson(const GpuDevice& d) {
  json j = {{"nvml_index", d.nvml_index}, {"pci_index", d.pci_index}, {"uuid", d.uuid}, {"pci_bus_id", d.pci_bus_id}};
  Put(j, "minor_number", d.minor_number);
  Put(j, "name", d.name);
  Put(j, "error", d.error);
  Put(j, "memory_total_bytes", d.memory_total_bytes);
  Put(j, "memory_used_bytes", d.memory_used_bytes);
  Put(j, "memory_free_bytes", d.memory_free_bytes);
  Put(j, "memory_reserved_bytes", d.memory_reserved_bytes);
  Put(j, "utilization_gpu_pct", d.utilization_gpu_pct);
  Put(j, "utilization_memory_pct", d.utilization_memory_pct);
  Put(j, "temperature_c", d.temperature_c);
  Put(j, "power_draw_mw", d.power_draw_mw);
  Put(j, "power_limit_mw", d.power_limit_mw);
  Put(j, "performance_state", d.performance_state);
  if (d.compute_mode) j["compute_mode"] = static_cast<int>(*d.compute_mode);
  Put(j, "persistence_mode", d.persistence_mode);
  Put(j, "mig_enabled", d.mig_enabled);
  json migs = json::array();
  for (const auto& m : d.mig_devices) {
    json mj = {{"uuid", m.uuid}};
    Put(mj, "profile", m.profile);
    Put(mj, "gpu_instance_id", m.gpu_instance_id);
    Put(mj, "compute_instance_id", m.compute_instance_id);
    Put(mj, "memory_total_bytes", m.memory_total_bytes);
    Put(mj, "memory_used_bytes", m.memory_used_bytes);
    migs.push_back(std::move(mj));
  }
  j["mig_devices"] = std::move(migs);
  if (d.processes) {
    json procs = json::array();
    for (const auto& p : *d.processes) procs.push_back(ProcessToJson(p));
    j["processes"] = std::move(procs);
  }
  json peers = json::array();
  for (const auto& peer : d.nvlink_peers) peers.push_back({{"pci_bus_id", peer.pci_bus_id}, {"links", peer.links}});
  j["nvlink_peers"] = std::move(peers);
  Put(j, "energy_mj", d.energy_mj);
  Put(j, "clock_sm_mhz", d.clock_sm_mhz);
  Put(j, "clock_mem_mhz", d.clock_mem_mhz);
  Put(j, "clocks_event_reasons", d.clocks_event_reasons);
  Put(j, "ecc_uncorrected_volatile", d.ecc_uncorrected_volatile);
  Put(j, "xid_errors", d.xid_errors);
  Put(j, "drained", d.drained);
  if (!d.anomalies.empty()) j["anomalies"] = d.anomalies;
  return j;
}

GpuDevice DeviceFromJson(const json& j) {
  GpuDevice d;
  d.nvml_index = j.at("nvml_index").get<unsigned>();
  d.pci_index = j.at("pci_index").get<unsigned>();
  d.uuid = j.at("uuid").get<std::string>();
  d.pci_bus_id = j.at("pci_bus_id").get<std::string>();
  Get(j, "minor_number", d.minor_number);
  Get(j, "name", d.name);
  Get(j, "error", d.error);
  Get(j, "memory_total_bytes", d.memory_total_bytes);
  Get(j, "memory_used_bytes", d.memory_used_bytes);
  Get(j, "memory_free_bytes", d.memory_free_bytes);
  Get(j, "memory_reserved_bytes", d.memory_reserved_bytes);
  Get(j, "utilization_gpu_pct", d.utilization_gpu_pct);
  Get(j, "utilization_memory_pct", d.utilization_memory_pct);
  Get(j, "temperature_c", d.temperature_c);
  Get(j, "power_draw_mw", d.power_draw_mw);
  Get(j, "power_limit_mw", d.power_limit_mw);
  Get(j, "performance_state", d.performance_state);
  if (j.contains("compute_mode")) d.compute_mode = static_cast<ComputeMode>(j["compute_mode"].get<int>());
  Get(j, "persistence_mode", d.persistence_mode);
  Get(j, "mig_enabled", d.mig_enabled);
  for (const auto& mj : j.value("mig_devices", json::array())) {
    MigDevice m;
    m.uuid = mj.at("uuid").get<std::string>();
    Get(mj, "profile", m.profile);
    Get(mj, "gpu_instance_id", m.gpu_instance_id);
    Get(mj, "compute_instance_id", m.compute_instance_id);
    Get(mj, "memory_total_bytes", m.memory_total_bytes);
    Get(mj, "memory_used_bytes", m.memory_used_bytes);
    d.mig_devices.push_back(std::move(m));
  }
  if (j.contains("processes")) {
    d.processes.emplace();
    for (const auto& pj : j["processes"]) d.processes->push_back(ProcessFromJson(pj));
  }
  for (const auto& pj : j.value("nvlink_peers", json::array()))
    d.nvlink_peers.push_back({pj.at("pci_bus_id").get<std::string>(), pj.at("links").get<unsigned>()});
  Get(j, "energy_mj", d.energy_mj);
  Get(j, "clock_sm_mhz", d.clock_sm_mhz);
  Get(j, "clock_mem_mhz", d.clock_mem_mhz);
  Get(j, "clocks_event_reasons", d.clocks_event_reasons);
  Get(j, "ecc_uncorrected_volatile", d.ecc_uncorrected_volatile);
  Get(j, "xid_errors", d.xid_errors);
  Get(j, "drained", d.drained);
  if (j.contains("anomalies") && j["anomalies"].is_array())
    for (const auto& a : j["anomalies"])
      if (a.is_string()) d.anomalies.push_back(a.get<std::string>());
  return d;
}

}  // namespace

json SnapshotToJson(const GpuSnapshot& s) {
  json j = {{"devices", json::array()}};
  Put(j, "driver_version", s.driver_version);
  Put(j, "nvml_version", s.nvml_version);
  Put(j, "cuda_driver_version", s.cuda_driver_version);
  for (const auto& d : s.devices) j["devices"].push_back(DeviceToJson(d));
  return j;
}

Result<GpuSnapshot> SnapshotFromJson(const json& j) {
  try {
    GpuSnapshot s;
    Get(j, "driver_version", s.driver_version);
    Get(j, "nvml_version", s.nvml_version);
    Get(j, "cuda_driver_version", s.cuda_driver_version);
    for (const auto& dj : j.at("devices")) s.devices.push_back(DeviceFromJson(dj));
    return s;
  } catch (const std::exception& e) {  // json::exception, or an unknown process kind
    return MakeError(ErrorKind::kIo, std::string("malformed GPU snapshot from the daemon: ") + e.what());
  }
}

}  // namespace gpulane
