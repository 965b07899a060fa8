#include <fmt/format.h>

#include "render/status_view.h"

namespace gpulane {
namespace {

using json = nlohmann::ordered_json;

template <typename T>
void Put(json& j, const char* key, const std::optional<T>& value) {
  if (value) j[key] = *value;
}

const char* ComputeModeName(ComputeMode mode) {
  switch (mode) {
    case ComputeMode::kDefault: return "default";
    case ComputeMode::kExclusiveThread: return "exclusive_thread";
    case ComputeMode::kProhibited: return "prohibited";
    case ComputeMode::kExclusiveProcess: return "exclusive_process";
  }
  return "unknown";
}

const char* KindName(ProcessKind kind) {
  switch (kind) {
    case ProcessKind::kCompute: return "compute";
    case ProcessKind::kGraphics: return "graphics";
    case ProcessKind::kComputeAndGraphics: return "compute+graphics";
  }
  return "compute";
}

json ProcessJson(const GpuDevice& d, const GpuProcess& p, const StatusContext& c) {
  json j = {{"pid", p.pid}, {"kind", KindName(p.kind)}};
  Put(j, "used_memory_bytes", p.used_memory_bytes);
  Put(j, "uid", p.uid);
  Put(j, "user", p.user);
  Put(j, "command", p.command);
  Put(j, "cmdline", p.cmdline);
  Put(j, "mig_uuid", p.mig_uuid);
  auto stray = c.strays.find({d.pci_index, p.pid});
  if (stray != c.strays.end())
    j["stray"] = {{"job_id", stray->second.job_id}, {"job_text", stray->second.job_text}, {"user", stray->second.user}};
  return j;
}

json DeviceJson(const GpuDevice& d, const StatusContext& c) {
  json j = {{"index", d.pci_index}, {"nvml_index", d.nvml_index}, {"uuid", d.uuid},
            {"pci_bus_id", d.pci_bus_id}, {"allowed", c.visible.Allows(d.pci_index)},
            {"state", d.failed() ? "failed" : "ok"}};
  Put(j, "error", d.error);
  Put(j, "minor_number", d.minor_number);
  Put(j, "name", d.name);
  Put(j, "memory_total_bytes", d.memory_total_bytes);
  Put(j, "memory_used_bytes", d.memory_used_bytes);
  Put(j, "memory_free_bytes", d.memory_free_bytes);
  Put(j, "memory_reserved_bytes", d.memory_reserved_bytes);
  Put(j, "utilization_gpu_pct", d.utilization_gpu_pct);
  Put(j, "utilization_memory_pct", d.utilization_memory_pct);
  Put(j, "temperature_c", d.temperature_c);
  Put(j, "power_draw_mw", d.power_draw_mw);
  Put(j, "power_limit_mw", d.power_limit_mw);
  if (d.performance_state) j["performance_state"] = fmt::format("P{}", *d.performance_state);
  if (d.compute_mode) j["compute_mode"] = ComputeModeName(*d.compute_mode);
  Put(j, "persistence_mode", d.persistence_mode);
  Put(j, "drained", d.drained);
  if (!d.anomalies.empty()) j["anomalies"] = d.anomalies;
  Put(j, "mig_enabled", d.mig_enabled);
  if (d.mig_enabled.value_or(false)) {
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
  }
  j["processes_known"] = d.processes.has_value();
  if (d.processes) {
    json procs = json::array();
    for (const auto& p : *d.processes) procs.push_back(ProcessJson(d, p, c));
    j["processes"] = std::move(procs);
  }
  json links = json::array();
  for (const auto& peer : d.nvlink_peers) links.push_back({{"pci_bus_id", peer.pci_bus_id}, {"links", peer.links}});
  j["nvlink_peers"] = std::move(links);
  auto holder = c.holders.find(d.uuid);
  if (holder != c.holders.end()) j["held_by"] = holder->second;
  if (auto held = c.reserved.find(d.uuid); held != c.reserved.end()) j["reserved_for"] = held->second;
  return j;
}

std::string IsoTime(std::time_t t) {
  char buf[32];
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

json StatusToJson(const GpuSnapshot& snapshot, const StatusContext& context) {
  json j = {{"schema_version", 1}, {"hostname", context.hostname}, {"timestamp", IsoTime(context.now)},
            {"nvml_order_matches_pci_order", !snapshot.nvml_order_differs()}};
  Put(j, "driver_version", snapshot.driver_version);
  Put(j, "nvml_version", snapshot.nvml_version);
  if (snapshot.cuda_driver_version) j["cuda_driver_version"] = FormatCudaVersion(*snapshot.cuda_driver_version);
  Put(j, "cuda_visible_devices", context.cuda_visible_devices);
  Put(j, "slurm_gpus", context.slurm_gpus);
  json gpus = json::array();
  for (const auto& d : snapshot.devices) gpus.push_back(DeviceJson(d, context));
  j["gpus"] = std::move(gpus);
  return j;
}

}  // namespace gpulane
