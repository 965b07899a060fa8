#include "render/metrics_text.h"

#include <fmt/format.h>

namespace gpulane::render {
namespace {

// The labels dcgm-exporter puts on every GPU metric: gpu (NVML's index, as DCGM numbers GPUs),
// UUID, pci_bus_id, device ("nvidia<minor>"), modelName, Hostname.
std::string GpuLabels(const GpuDevice& d, const std::string& hostname) {
  return fmt::format("gpu=\"{}\",UUID=\"{}\",pci_bus_id=\"{}\",device=\"{}\",modelName=\"{}\",Hostname=\"{}\"",
                     d.nvml_index, EscapeLabel(d.uuid), EscapeLabel(d.pci_bus_id),
                     d.minor_number ? fmt::format("nvidia{}", *d.minor_number) : std::string(),
                     EscapeLabel(d.name.value_or("")), EscapeLabel(hostname));
}

void Header(std::string& out, const char* name, const char* type, const char* help) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

template <typename T>
void Gauge(std::string& out, const char* name, const std::string& labels, const std::optional<T>& v) {
  if (v) out += fmt::format("{}{{{}}} {}\n", name, labels, *v);
}

struct GpuMetric {
  const char* name;
  const char* type;
  const char* help;
  std::optional<double> (*value)(const telemetry::GpuReading&);
};

std::optional<double> Mib(const std::optional<std::uint64_t>& bytes) {
  if (!bytes) return std::nullopt;
  return static_cast<double>(*bytes >> 20);
}

const GpuMetric kGpuMetrics[] = {
    {"DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).",
     [](const telemetry::GpuReading& r) -> std::optional<double> {
       return r.util_gpu_pct ? std::optional<double>(*r.util_gpu_pct) : std::nullopt;
     }},
    {"DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %).",
     [](const telemetry::GpuReading& r) -> std::optional<double> {
       return r.util_memory_pct ? std::optional<double>(*r.util_memory_pct) : std::nullopt;
     }},
    {"DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).",
     [](const telemetry::GpuReading& r) { return Mib(r.memory_used_bytes); }},
    {"DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).",
     [](const telemetry::GpuReading& r) -> std::optional<double> {
       if (!r.memory_total_bytes || !r.memory_used_bytes || *r.memory_used_bytes > *r.memory_total_bytes) return std::nullopt;
       return Mib(*r.memory_total_bytes - *r.memory_used_bytes);
     }},
    {"DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).",
     [](const telemetry::GpuReading& r) -> std::optional<double> {
       return r.power_mw ? std::optional<double>(*r.power_mw / 1000.0) : std::nullopt;
     }},
    {"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ).",
     [](const telemetry::GpuReading& r) -> std::optional<double> {
       return r.energy_mj ? std::optional<double>(static_cast<double>(*r.energy_mj)) : std::nullopt;
     }},
    {"DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).",
     [](const telemetry::GpuReading& r) -> std::optional<double> {
       return r.temperature_c ? std::optional<double>(*r.temperature_c) : std::nullopt;
     }},
    {"DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).",
     [](const telemetry::GpuReading& r) -> std::optional<double> {
       return r.clock_sm_mhz ? std::optional<double>(*r.clock_sm_mhz) : std::nullopt;
     }},
    {"DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz).",
     [](const telemetry::GpuReading& r) -> std::optional<double> {
       return r.clock_mem_mhz ? std::optional<double>(*r.clock_mem_mhz) : std::nullopt;
     }},
    {"DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "gauge", "Current clock throttle reasons (a bit mask of NVML's reasons).",
     [](const telemetry::GpuReading& r) -> std::optional<double> {
       return r.clocks_event_reasons ? std::optional<double>(static_cast<double>(*r.clocks_event_reasons)) : std::nullopt;
     }},
};

}  // namespace

std::string EscapeLabel(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string MetricsText(const MetricsInput& in) {
  std::string out;
  out.reserve(4096 + in.gpus.size() * 2048 + in.jobs.size() * 512);
  std::map<std::string, std::string> labels;  // by UUID
  for (const auto& d : in.gpus) labels[d.uuid] = GpuLabels(d, in.hostname);
  for (const GpuMetric& m : kGpuMetrics) {
    Header(out, m.name, m.type, m.help);
    for (const auto& d : in.gpus)
      if (auto it = in.readings.find(d.uuid); it != in.readings.end()) Gauge(out, m.name, labels[d.uuid], m.value(it->second));
  }
  Header(out, "DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered.");
  for (const auto& d : in.gpus) {
    auto it = in.last_xid.find(d.uuid);
    out += fmt::format("DCGM_FI_DEV_XID_ERRORS{{{}}} {}\n", labels[d.uuid], it == in.last_xid.end() ? 0 : it->second);
  }
  Header(out, "gpulane_gpu_xid_errors_total", "counter", "Xid errors NVML reported since the gpulane daemon started.");
  for (const auto& d : in.gpus) {
    auto it = in.xid_totals.find(d.uuid);
    out += fmt::format("gpulane_gpu_xid_errors_total{{{}}} {}\n", labels[d.uuid], it == in.xid_totals.end() ? 0 : it->second);
  }
  Header(out, "gpulane_gpu_up", "gauge", "1 when NVML reads the GPU, 0 when it reports the GPU failed.");
  for (const auto& d : in.gpus) {
    auto it = in.readings.find(d.uuid);
    const bool failed = it == in.readings.end() ? d.failed() : it->second.failed;
    out += fmt::format("gpulane_gpu_up{{{}}} {}\n", labels[d.uuid], failed ? 0 : 1);
  }
  Header(out, "gpulane_gpu_leased", "gauge", "1 for each GPU a gpulane job holds, with its user and job.");
  for (const auto& j : in.jobs) {
    auto it = labels.find(j.gpu_uuid);
    const std::string base = it != labels.end() ? it->second : fmt::format("UUID=\"{}\"", EscapeLabel(j.gpu_uuid));
    out += fmt::format("gpulane_gpu_leased{{{},user=\"{}\",job=\"{}\"}} 1\n", base, EscapeLabel(j.user), EscapeLabel(j.job_id));
  }
  Header(out, "gpulane_job_gpu_memory_used_bytes", "gauge", "GPU memory of a job's processes on the GPU.");
  for (const auto& j : in.jobs) {
    auto it = labels.find(j.gpu_uuid);
    const std::string l = fmt::format("{},user=\"{}\",job=\"{}\"", it != labels.end() ? it->second : "", EscapeLabel(j.user),
                                      EscapeLabel(j.job_id));
    Gauge(out, "gpulane_job_gpu_memory_used_bytes", l, j.memory_bytes);
  }
  Header(out, "gpulane_job_gpu_utilization_percent", "gauge",
         "A job's utilization of the GPU (its processes' SM share, or the GPU's when it holds it whole).");
  for (const auto& j : in.jobs) {
    auto it = labels.find(j.gpu_uuid);
    const std::string l = fmt::format("{},user=\"{}\",job=\"{}\"", it != labels.end() ? it->second : "", EscapeLabel(j.user),
                                      EscapeLabel(j.job_id));
    Gauge(out, "gpulane_job_gpu_utilization_percent", l, j.util_pct);
  }
  Header(out, "gpulane_jobs", "gauge", "Queued jobs of the daemon by state.");
  for (const auto& [state, count] : in.jobs_by_state)
    out += fmt::format("gpulane_jobs{{state=\"{}\"}} {}\n", EscapeLabel(state), count);
  Header(out, "gpulane_queue_wait_seconds", "histogram", "How long jobs waited for their GPUs (queued jobs and gpulane run).");
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < in.wait_bounds_s.size() && i < in.wait_counts.size(); ++i)
    out += fmt::format("gpulane_queue_wait_seconds_bucket{{le=\"{}\"}} {}\n", in.wait_bounds_s[i], in.wait_counts[i]);
  if (in.wait_counts.size() > in.wait_bounds_s.size()) total = in.wait_counts[in.wait_bounds_s.size()];
  out += fmt::format("gpulane_queue_wait_seconds_bucket{{le=\"+Inf\"}} {}\n", total);
  out += fmt::format("gpulane_queue_wait_seconds_sum {}\n", in.wait_sum_s);
  out += fmt::format("gpulane_queue_wait_seconds_count {}\n", total);
  Header(out, "gpulane_sampler_samples_total", "counter", "GPU samples the gpulane daemon has taken.");
  out += fmt::format("gpulane_sampler_samples_total {}\n", in.samples);
  return out;
}

}  // namespace gpulane::render
