#pragma once
// Per-job accounting (issue 11, item 2): what a job used of its GPUs, from the samples taken while
// it ran. Pure: the daemon's sampler (or `gpulane run` without a daemon) feeds a JobMeter one
// observation per sample; the summary is computed at any time.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace gpulane::telemetry {

/// One GPU of a job at one sample.
struct JobGpuObservation {
  /// The job's utilisation of this GPU, percent: the sum of its processes' SM shares where NVML
  /// reports them per process, else the GPU's utilisation when the job holds the GPU whole; absent
  /// otherwise (a shared GPU without per-process figures: the GPU's figure is others' work too).
  std::optional<double> util_pct;
  /// GPU memory of the job's processes on this GPU; absent when NVML does not report it.
  std::optional<std::uint64_t> memory_bytes;
  /// The GPU's energy counter (mJ since the driver loaded); absent when not reported.
  std::optional<std::uint64_t> energy_mj;
};

/// What a job used. GPU-seconds and run time come from its start and end; the rest from samples
/// (absent when no sample reported it).
struct JobUsage {
  double run_s = 0;
  std::optional<double> wait_s;        ///< from submission (or the run's request) to the start
  double gpus = 0;                     ///< GPUs held: a --mem share counts as its fraction
  double gpu_s = 0;                    ///< gpus x run_s
  /// Energy of its GPUs between the first and the last sample, joules; a shared GPU's energy
  /// counts in proportion to the job's share of it.
  std::optional<double> energy_j;
  std::optional<std::uint64_t> peak_memory_bytes;  ///< largest sum over its GPUs in one sample
  std::optional<double> mean_memory_bytes;
  std::optional<double> mean_util_pct;  ///< over every (sample, GPU) with a figure
  std::optional<double> p10_util_pct;   ///< 10th percentile of the same
  std::optional<double> idle_fraction;  ///< share of the same under kIdleUtilPct
  std::uint64_t samples = 0;
};

/// Utilisation under this counts as idle (issue 11: "share of time under 5 %").
inline constexpr double kIdleUtilPct = 5;

/// Accumulates a job's observations in constant memory (a histogram of utilisation).
class JobMeter {
 public:
  /// `shares`: per GPU of the job, the fraction of it the job holds (1 whole; a --mem share
  /// mem / total), in the order of every later Observe.
  explicit JobMeter(std::vector<double> shares) : shares_(std::move(shares)) {}
  /// One sample: `gpus` in the order of the shares (extra entries ignored, missing ones unknown).
  void Observe(const std::vector<JobGpuObservation>& gpus);
  /// The usage of a job that ran from `start_s` to `end_s` (seconds on one clock), `wait_s` before.
  JobUsage Summary(double start_s, double end_s, std::optional<double> wait_s) const;
  std::uint64_t samples() const { return samples_; }

 private:
  std::vector<double> shares_;
  std::uint64_t samples_ = 0;
  std::array<std::uint64_t, 101> util_histogram_{};  ///< (sample, GPU) pairs by whole percent
  double util_sum_ = 0;
  std::uint64_t util_n_ = 0;
  std::optional<std::uint64_t> peak_memory_;
  double memory_sum_ = 0;
  std::uint64_t memory_n_ = 0;
  std::vector<std::optional<std::uint64_t>> first_energy_, last_energy_;  ///< per GPU
  std::vector<double> energy_mj_;  ///< per GPU: counted so far (a counter that went back: from there)
  bool energy_unknown_ = false;
};

/// "job 12 used 2 GPUs for 1h 02m, 2.1 GPU-h, 1.4 kWh, peak 61.2 GiB, mean util 87 %, idle 3 %":
/// the line written at the end of a job's log (without "gpulane: "); fields without a figure are
/// left out.
std::string UsageLine(const std::string& job_id, const JobUsage& usage);

}  // namespace gpulane::telemetry
