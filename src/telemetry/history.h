#pragma once
// GPU history: the last hour at the full rate in memory (GpuRing), and rows over longer buckets
// (10 s, 1 min: Downsampler) that the daemon stores in SQLite so that history survives a restart.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "telemetry/sample.h"

namespace gpulane::telemetry {

/// The newest `capacity` points of one GPU, oldest first; older ones are overwritten.
class GpuRing {
 public:
  explicit GpuRing(std::size_t capacity) : capacity_(capacity ? capacity : 1) {}
  void Push(const GpuPoint& point);
  std::size_t size() const { return points_.size(); }
  /// Every kept point with time_s >= since_s, oldest first.
  std::vector<GpuPoint> Since(double since_s) const;
  /// The newest point, or nullopt when empty.
  std::optional<GpuPoint> Latest() const;

 private:
  std::size_t capacity_;
  std::vector<GpuPoint> points_;  ///< a circle once full; next_ is the oldest
  std::size_t next_ = 0;
};

/// One GPU over one bucket of time: what the stored history holds per row. Means are over the
/// samples that reported the field; a field no sample reported is absent.
struct HistoryRow {
  double start_s = 0;   ///< the bucket's start (a multiple of its length)
  double length_s = 0;  ///< 10, 60, ...
  std::uint32_t samples = 0;
  std::optional<double> util_gpu_mean_pct;
  std::optional<double> util_gpu_max_pct;
  std::optional<double> util_memory_mean_pct;
  std::optional<double> memory_used_mean_bytes;
  std::optional<double> memory_used_max_bytes;
  std::optional<double> power_mean_mw;
  std::optional<double> temperature_max_c;
  std::optional<double> clock_sm_mean_mhz;
  std::optional<std::uint64_t> energy_mj;  ///< the counter's last reading in the bucket
  std::uint64_t clocks_event_reasons = 0;  ///< every bit seen in the bucket
  std::uint32_t xid_errors = 0;
  std::uint32_t failed_samples = 0;
};

/// Turns one GPU's points into HistoryRows of `length_s` seconds (buckets aligned to multiples of
/// it). Points must come in time order.
class Downsampler {
 public:
  explicit Downsampler(double length_s) : length_s_(length_s > 0 ? length_s : 1) {}
  /// Adds a point; returns the previous bucket's row when `point` starts a new bucket.
  std::optional<HistoryRow> Add(const GpuPoint& point);
  /// The row of the bucket being filled (nullopt when empty), which is then emptied.
  std::optional<HistoryRow> Flush();

 private:
  struct Mean {
    double sum = 0, max = 0;
    std::uint32_t n = 0;
    void Add(double v) {
      sum += v;
      max = n ? (v > max ? v : max) : v;
      ++n;
    }
    std::optional<double> mean() const { return n ? std::optional<double>(sum / n) : std::nullopt; }
    std::optional<double> maximum() const { return n ? std::optional<double>(max) : std::nullopt; }
  };
  double length_s_;
  std::optional<double> bucket_s_;  ///< start of the bucket being filled
  std::uint32_t samples_ = 0, failed_ = 0, xids_ = 0;
  Mean util_, util_mem_, mem_, power_, temp_, clock_;
  std::optional<std::uint64_t> energy_;
  std::uint64_t reasons_ = 0;
};

}  // namespace gpulane::telemetry
