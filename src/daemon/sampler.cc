#include "daemon/sampler.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "lease/job_observation.h"
#include "lease/occupancy.h"

namespace gpulane::daemon {
namespace {

// How long a lease's final usage stays answerable after it ended (its supervisor asks for it
// just after its job's end; a slow one may ask a little later).
constexpr double kEndedKeptS = 600;

template <typename T>
std::optional<std::uint16_t> Narrow(const std::optional<T>& v) {
  if (!v) return std::nullopt;
  return static_cast<std::uint16_t>(std::min<T>(*v, 65535));
}


}  // namespace

std::map<std::string, std::string> JobMappingFiles(const GpuSnapshot& snapshot, const std::map<std::string, LiveJob>& live) {
  std::map<std::string, std::string> files;
  std::map<std::string, std::string> name_of;  // UUID (GPU or MIG device) -> file name
  for (const GpuDevice& d : snapshot.devices) {
    if (d.uuid.empty()) continue;
    name_of[d.uuid] = std::to_string(d.nvml_index);
    files[name_of[d.uuid]];
    for (const MigDevice& m : d.mig_devices)
      if (m.gpu_instance_id) files[name_of[m.uuid] = std::to_string(d.nvml_index) + "." + std::to_string(*m.gpu_instance_id)];
  }
  for (const auto& [lease, job] : live)
    for (const auto& g : job.lease.gpus)
      if (auto it = name_of.find(g.uuid); it != name_of.end()) files[it->second] += job.lease.job_id + "\n";
  return files;
}

telemetry::GpuReading ReadingOf(const GpuDevice& d) {
  telemetry::GpuReading r;
  r.failed = d.failed();
  r.util_gpu_pct = Narrow(d.utilization_gpu_pct);
  r.util_memory_pct = Narrow(d.utilization_memory_pct);
  r.temperature_c = Narrow(d.temperature_c);
  r.clock_sm_mhz = Narrow(d.clock_sm_mhz);
  r.clock_mem_mhz = Narrow(d.clock_mem_mhz);
  if (d.power_draw_mw) r.power_mw = *d.power_draw_mw;
  r.memory_used_bytes = d.memory_used_bytes;
  r.memory_total_bytes = d.memory_total_bytes;
  r.energy_mj = d.energy_mj;
  r.clocks_event_reasons = d.clocks_event_reasons;
  if (d.xid_errors) r.xid_errors = static_cast<std::uint16_t>(std::min<std::size_t>(d.xid_errors->size(), 65535));
  return r;
}

Sampler::Output Sampler::Take(double now_s, const GpuSnapshot& snapshot, const std::vector<lease::LeaseRecord>& leases,
                              const std::vector<std::vector<int>>& owners) {
  Output out;
  const auto ring_points = static_cast<std::size_t>(std::ceil(settings_.ring_s / std::max(settings_.interval_s, 0.001)));
  for (const GpuDevice& d : snapshot.devices) {
    if (d.uuid.empty()) continue;
    auto it = gpus_.find(d.uuid);
    if (it == gpus_.end()) {
      GpuHistory h{telemetry::GpuRing(ring_points), {}};
      for (double length : settings_.resolutions_s) h.downsamplers.emplace_back(length);
      it = gpus_.emplace(d.uuid, std::move(h)).first;
    }
    const telemetry::GpuPoint point{now_s, ReadingOf(d)};
    it->second.ring.Push(point);
    for (auto& ds : it->second.downsamplers)
      if (auto row = ds.Add(point)) out.rows.emplace_back(d.uuid, *row);
    if (d.xid_errors && !d.xid_errors->empty()) {
      xid_totals_[d.uuid] += d.xid_errors->size();
      last_xid_[d.uuid] = d.xid_errors->back();
    }
  }
  Meter(now_s, snapshot, leases, owners);
  // Leases gone since the last sample: their jobs ended (within one interval of now).
  for (auto it = live_.begin(); it != live_.end();) {
    if (it->second.last_seen_s == now_s) {
      ++it;
      continue;
    }
    telemetry::UsageRecord record = RecordOf(it->second, it->second.ending_s.value_or(now_s));
    ended_[it->first] = {now_s, record};
    out.finished.push_back(std::move(record));
    it = live_.erase(it);
  }
  std::erase_if(ended_, [&](const auto& entry) { return entry.second.first < now_s - kEndedKeptS; });
  out.anomalies = Detect(now_s, snapshot);  // over the live leases only
  latest_ = snapshot;
  latest_time_s_ = now_s;
  return out;
}

void Sampler::Meter(double now_s, const GpuSnapshot& snapshot, const std::vector<lease::LeaseRecord>& leases,
                    const std::vector<std::vector<int>>& owners) {
  for (std::size_t i = 0; i < leases.size(); ++i) {
    const lease::LeaseRecord& lease = leases[i];
    const std::vector<lease::LeaseGpuView> views = lease::ViewLease(snapshot, leases, i, owners);
    if (ended_.count(lease.name)) continue;  // recorded as it ended (EndUnsampled), released after
    auto it = live_.find(lease.name);
    if (it == live_.end()) {
      std::vector<double> shares;
      for (const auto& v : views) shares.push_back(v.share);
      it = live_.emplace(lease.name, LiveJob{lease, {}, telemetry::JobMeter(std::move(shares)), now_s}).first;
    }
    LiveJob& job = it->second;
    job.last_seen_s = now_s;
    job.gpus.clear();
    std::vector<telemetry::JobGpuObservation> observed;
    for (const auto& v : views) {
      std::optional<std::uint64_t> declared;
      for (const lease::LeasedGpu& g : lease.gpus)
        if (g.uuid == v.uuid) declared = g.mem_bytes;
      job.gpus.push_back({v.uuid, v.observed.memory_bytes, v.observed.util_pct, v.whole, v.foreign, declared});
      observed.push_back(v.observed);
    }
    job.meter.Observe(observed);
  }
}

telemetry::AnomalyChanges Sampler::Detect(double now_s, const GpuSnapshot& snapshot) {
  std::vector<telemetry::GpuState> gpus;
  for (const GpuDevice& d : snapshot.devices) {
    telemetry::GpuState g;
    g.uuid = d.uuid;
    g.index = d.pci_index;
    g.failed = d.failed();
    g.failure = d.error.value_or("");
    g.memory_used_bytes = d.memory_used_bytes;
    if (d.processes) {
      std::uint64_t sum = 0;
      bool known = true;
      for (const auto& p : *d.processes) {
        if (p.used_memory_bytes) sum += *p.used_memory_bytes;
        else known = false;
      }
      if (known) g.process_memory_bytes = sum;
    }
    g.clocks_event_reasons = d.clocks_event_reasons;
    if (d.xid_errors) g.xids = *d.xid_errors;
    gpus.push_back(std::move(g));
  }
  std::vector<telemetry::JobGpuState> jobs;
  for (const auto& [name, job] : live_)
    for (const LiveJobGpu& g : job.gpus) {
      const MigDevice* mig = nullptr;
      const GpuDevice* d = lease::DeviceOf(snapshot, g.uuid, &mig);
      jobs.push_back({job.lease.job_id, job.lease.user, name, g.uuid, d ? d->pci_index : 0u, g.whole, g.util_pct,
                      g.memory_bytes, g.declared_bytes, g.foreign, lease::JobText(job.lease)});
    }
  return detector_.Observe(now_s, gpus, jobs);
}

telemetry::UsageRecord Sampler::RecordOf(const LiveJob& job, double end_s) const {
  telemetry::UsageRecord r;
  r.job_id = job.lease.job_id;
  r.job_text = job.lease.job_text;  // "12_3" for an array task, checked on read (lease/records.cc)
  r.uid = job.lease.uid;
  r.user = job.lease.user;
  r.name = lease::LabelForLease(job.lease.label);  // a hand-written lease file may hold any label: stored bounded
  for (const auto& g : job.lease.gpus) {
    r.gpu_uuids.push_back(g.uuid);
    const MigDevice* mig = nullptr;
    if (const GpuDevice* d = lease::DeviceOf(latest_, g.uuid, &mig)) r.gpu_indices.push_back(d->pci_index);
  }
  if (r.gpu_indices.size() != r.gpu_uuids.size()) r.gpu_indices.clear();
  r.start_s = job.lease.started_s;
  r.end_s = std::max(end_s, r.start_s);
  std::optional<double> wait;
  if (job.lease.requested_s && *job.lease.requested_s <= r.start_s) wait = r.start_s - *job.lease.requested_s;
  r.usage = job.meter.Summary(r.start_s, r.end_s, wait);
  return r;
}

std::vector<std::pair<std::string, telemetry::HistoryRow>> Sampler::Flush() {
  std::vector<std::pair<std::string, telemetry::HistoryRow>> rows;
  for (auto& [uuid, h] : gpus_)
    for (auto& ds : h.downsamplers)
      if (auto row = ds.Flush()) rows.emplace_back(uuid, *row);
  return rows;
}

std::optional<telemetry::UsageRecord> Sampler::UsageOf(const std::string& lease_name, double now_s) const {
  if (auto it = live_.find(lease_name); it != live_.end()) return RecordOf(it->second, it->second.ending_s.value_or(now_s));
  if (auto it = ended_.find(lease_name); it != ended_.end()) return it->second.second;
  return std::nullopt;
}

bool Sampler::NoteEnding(const std::string& lease_name, std::uint32_t uid, double now_s) {
  auto it = live_.find(lease_name);
  if (it == live_.end() || (uid != 0 && uid != it->second.lease.uid)) return false;
  if (!it->second.ending_s) it->second.ending_s = now_s;
  return true;
}

std::optional<telemetry::UsageRecord> Sampler::EndUnsampled(const lease::LeaseRecord& lease, double now_s) {
  if (live_.count(lease.name) || ended_.count(lease.name)) return std::nullopt;
  std::vector<double> shares;  // a --mem share as its fraction of the GPU (whole where unknown)
  for (const lease::LeasedGpu& g : lease.gpus) {
    const MigDevice* mig = nullptr;
    const GpuDevice* d = lease::DeviceOf(latest_, g.uuid, &mig);
    const bool fraction = g.mem_bytes && d && !mig && d->memory_total_bytes && *d->memory_total_bytes > 0;
    shares.push_back(fraction ? std::min(1.0, static_cast<double>(*g.mem_bytes) / static_cast<double>(*d->memory_total_bytes)) : 1.0);
  }
  LiveJob job{lease, {}, telemetry::JobMeter(std::move(shares)), now_s, now_s};
  telemetry::UsageRecord record = RecordOf(job, now_s);
  ended_[lease.name] = {now_s, record};
  return record;
}

std::vector<telemetry::GpuPoint> Sampler::Points(const std::string& uuid, double since_s) const {
  auto it = gpus_.find(uuid);
  if (it == gpus_.end()) return {};
  return it->second.ring.Since(since_s);
}

std::map<std::string, sched::UsageRecord> OutsideLeaseUsage(const std::vector<lease::LeaseRecord>& leases,
                                                           const GpuSnapshot& snapshot, double now_s) {
  std::map<std::string, sched::UsageRecord> out;
  for (const lease::LeaseRecord& lease : leases) {
    if (!lease.parent.empty() || lease.job_id.empty() || std::isdigit(static_cast<unsigned char>(lease.job_id[0]))) continue;
    double gpus = 0;
    for (const lease::LeasedGpu& g : lease.gpus) {
      std::optional<std::uint64_t> total;
      for (const GpuDevice& d : snapshot.devices)
        if (d.uuid == g.uuid) total = d.memory_total_bytes;
      gpus += sched::GpuShareOfRequest(1, g.mem_bytes, total);
    }
    if (lease.every_gpu) gpus = static_cast<double>(snapshot.devices.size());  // unreadable, naming none: it holds them all
    out[lease.name] = {lease.user, std::min(lease.started_s, now_s), std::nullopt, gpus};
  }
  return out;
}

}  // namespace gpulane::daemon
