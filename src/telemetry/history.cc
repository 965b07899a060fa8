#include "telemetry/history.h"

#include <cmath>
#include <string>
#include <utility>

namespace gpulane::telemetry {

std::string ThrottleReasonNames(std::uint64_t bits) {
  static constexpr std::pair<std::uint64_t, const char*> kNames[] = {
      {0x08, "hw slowdown"}, {0x20, "sw thermal slowdown"}, {0x40, "hw thermal slowdown"}, {0x80, "power brake"}};
  std::string out;
  for (const auto& [bit, name] : kNames) {
    if (!(bits & bit)) continue;
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out;
}

void GpuRing::Push(const GpuPoint& point) {
  if (points_.size() < capacity_) {
    points_.push_back(point);
    return;
  }
  points_[next_] = point;
  next_ = (next_ + 1) % capacity_;
}

std::vector<GpuPoint> GpuRing::Since(double since_s) const {
  std::vector<GpuPoint> out;
  out.reserve(points_.size());
  for (std::size_t k = 0; k < points_.size(); ++k) {
    const GpuPoint& p = points_[(next_ + k) % points_.size()];
    if (p.time_s >= since_s) out.push_back(p);
  }
  return out;
}

std::optional<GpuPoint> GpuRing::Latest() const {
  if (points_.empty()) return std::nullopt;
  return points_[(next_ + points_.size() - 1) % points_.size()];
}

std::optional<HistoryRow> Downsampler::Add(const GpuPoint& point) {
  const double bucket = std::floor(point.time_s / length_s_) * length_s_;
  std::optional<HistoryRow> done;
  if (bucket_s_ && bucket != *bucket_s_) done = Flush();
  bucket_s_ = bucket;
  const GpuReading& r = point.reading;
  ++samples_;
  if (r.failed) ++failed_;
  xids_ += r.xid_errors;
  if (r.util_gpu_pct) util_.Add(*r.util_gpu_pct);
  if (r.util_memory_pct) util_mem_.Add(*r.util_memory_pct);
  if (r.memory_used_bytes) mem_.Add(static_cast<double>(*r.memory_used_bytes));
  if (r.power_mw) power_.Add(*r.power_mw);
  if (r.temperature_c) temp_.Add(*r.temperature_c);
  if (r.clock_sm_mhz) clock_.Add(*r.clock_sm_mhz);
  if (r.energy_mj) energy_ = r.energy_mj;
  if (r.clocks_event_reasons) reasons_ |= *r.clocks_event_reasons;
  return done;
}

std::optional<HistoryRow> Downsampler::Flush() {
  if (!bucket_s_ || samples_ == 0) return std::nullopt;
  HistoryRow row;
  row.start_s = *bucket_s_;
  row.length_s = length_s_;
  row.samples = samples_;
  row.util_gpu_mean_pct = util_.mean();
  row.util_gpu_max_pct = util_.maximum();
  row.util_memory_mean_pct = util_mem_.mean();
  row.memory_used_mean_bytes = mem_.mean();
  row.memory_used_max_bytes = mem_.maximum();
  row.power_mean_mw = power_.mean();
  row.temperature_max_c = temp_.maximum();
  row.clock_sm_mean_mhz = clock_.mean();
  row.energy_mj = energy_;
  row.clocks_event_reasons = reasons_;
  row.xid_errors = xids_;
  row.failed_samples = failed_;
  *this = Downsampler(length_s_);
  return row;
}

}  // namespace gpulane::telemetry
