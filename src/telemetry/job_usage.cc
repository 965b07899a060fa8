#include "telemetry/job_usage.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "util/units.h"

namespace gpulane::telemetry {

void JobMeter::Observe(const std::vector<JobGpuObservation>& gpus) {
  ++samples_;
  const std::size_t n = shares_.size();
  if (first_energy_.size() < n) {
    first_energy_.resize(n);
    last_energy_.resize(n);
    energy_mj_.resize(n, 0);
  }
  std::uint64_t memory = 0;
  bool memory_known = n > 0;
  for (std::size_t i = 0; i < n; ++i) {
    const JobGpuObservation* o = i < gpus.size() ? &gpus[i] : nullptr;
    if (o && o->util_pct) {
      const double u = std::clamp(*o->util_pct, 0.0, 100.0);
      ++util_histogram_[static_cast<std::size_t>(std::lround(u))];
      util_sum_ += u;
      ++util_n_;
    }
    if (o && o->memory_bytes) memory += *o->memory_bytes;
    else memory_known = false;
    if (!o || !o->energy_mj) {
      energy_unknown_ = true;
      continue;
    }
    const std::uint64_t e = *o->energy_mj;
    if (!first_energy_[i]) first_energy_[i] = e;
    // A counter that went back (the driver reloaded) counts on from its new value.
    if (last_energy_[i] && e >= *last_energy_[i]) energy_mj_[i] += static_cast<double>(e - *last_energy_[i]);
    last_energy_[i] = e;
  }
  if (memory_known) {
    peak_memory_ = std::max(peak_memory_.value_or(0), memory);
    memory_sum_ += static_cast<double>(memory);
    ++memory_n_;
  }
}

JobUsage JobMeter::Summary(double start_s, double end_s, std::optional<double> wait_s) const {
  JobUsage u;
  u.run_s = std::max(0.0, end_s - start_s);
  u.wait_s = wait_s;
  for (double share : shares_) u.gpus += share;
  u.gpu_s = u.gpus * u.run_s;
  u.samples = samples_;
  if (!energy_unknown_ && samples_ >= 2 && !shares_.empty()) {
    double mj = 0;
    for (std::size_t i = 0; i < shares_.size() && i < energy_mj_.size(); ++i) mj += energy_mj_[i] * shares_[i];
    u.energy_j = mj / 1000.0;
  }
  u.peak_memory_bytes = peak_memory_;
  if (memory_n_) u.mean_memory_bytes = memory_sum_ / static_cast<double>(memory_n_);
  if (util_n_) {
    u.mean_util_pct = util_sum_ / static_cast<double>(util_n_);
    // The 10th percentile: the smallest percent with at least a tenth of the pairs at or under it.
    const std::uint64_t rank = (util_n_ + 9) / 10;
    std::uint64_t seen = 0, idle = 0;
    for (std::size_t pct = 0; pct < util_histogram_.size(); ++pct) {
      if (static_cast<double>(pct) < kIdleUtilPct) idle += util_histogram_[pct];
      seen += util_histogram_[pct];
      if (!u.p10_util_pct && seen >= rank) u.p10_util_pct = static_cast<double>(pct);
    }
    u.idle_fraction = static_cast<double>(idle) / static_cast<double>(util_n_);
  }
  return u;
}

std::string UsageLine(const std::string& job_id, const JobUsage& u) {
  const bool whole = std::abs(u.gpus - std::round(u.gpus)) < 1e-9;
  std::string gpus = whole ? fmt::format("{:.0f} GPU{}", u.gpus, u.gpus == 1 ? "" : "s")
                           : fmt::format("{:.2f} of a GPU", u.gpus);
  const double gpu_h = u.gpu_s / 3600;
  std::string line = fmt::format("job {} used {} for {}, {} GPU-h", job_id, gpus, FormatSeconds(u.run_s),
                                 gpu_h >= 0.1 || gpu_h == 0 ? fmt::format("{:.1f}", gpu_h) : fmt::format("{:.3f}", gpu_h));
  if (u.energy_j) {
    const double kwh = *u.energy_j / 3.6e6;
    const double wh = *u.energy_j / 3600;
    if (kwh >= 0.1) line += fmt::format(", {:.1f} kWh", kwh);
    else if (wh >= 0.1) line += fmt::format(", {:.1f} Wh", wh);
    else line += fmt::format(", {:.0f} J", *u.energy_j);
  }
  if (u.peak_memory_bytes) line += fmt::format(", peak {}", FormatBytes(*u.peak_memory_bytes));
  if (u.mean_util_pct) line += fmt::format(", mean util {:.0f} %", *u.mean_util_pct);
  if (u.idle_fraction && *u.idle_fraction >= 0.005) line += fmt::format(", idle {:.0f} %", *u.idle_fraction * 100);
  return line;
}

}  // namespace gpulane::telemetry
