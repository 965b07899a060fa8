#pragma once
// The figures a replay is judged by, from its outcomes. Pure.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "sim/simulator.h"
#include "sim/trace.h"

namespace gpulane::sim {

/// Bounded slowdown's bound: runtimes shorter than this count as this long, seconds.
inline constexpr double kSlowdownBoundS = 10;
/// A job that waited longer than this is starved, seconds (24 h).
inline constexpr double kStarvedWaitS = 24 * 3600;

/// Summary of one replay. Times in seconds. Percentiles are nearest-rank (the smallest value with
/// at least p % of the values at or below it).
struct Metrics {
  std::size_t jobs = 0;
  double utilisation = 0;     ///< GPU-seconds used (shares as fractions) / (GPUs x makespan), 0..1
  double wait_mean_s = 0, wait_median_s = 0, wait_p95_s = 0, wait_p99_s = 0;  ///< start - submit
  std::size_t whole_jobs = 0;  ///< jobs asking for whole GPUs (Job::mem_bytes 0)
  double whole_wait_mean_s = 0, whole_wait_p99_s = 0;    ///< their waits
  double shared_wait_mean_s = 0, shared_wait_p99_s = 0;  ///< the other jobs' (shares) waits
  double jct_mean_s = 0, jct_p99_s = 0;  ///< job completion time: end - submit
  double bsld_mean = 0;       ///< mean of max(1, (wait + run) / max(run, kSlowdownBoundS))
  double makespan_s = 0;      ///< last end - first submission
  double jain = 1;            ///< Jain's index over users' mean bounded slowdowns: (sum x)^2 / (n sum x^2), 1/n..1
  std::size_t users = 0;      ///< users with jobs
  std::size_t starved = 0;    ///< jobs that waited > kStarvedWaitS
  std::size_t timed_out = 0;  ///< jobs stopped at their time limit
};

/// The figures for `jobs` and their `outcomes` (same order) on `gpus` GPUs of `gpu_mem_bytes`.
Metrics ComputeMetrics(const std::vector<Job>& jobs, const std::vector<Outcome>& outcomes, unsigned gpus,
                       std::uint64_t gpu_mem_bytes);

/// Nearest-rank percentile `p` (0 < p <= 100) of `values` (sorted ascending); 0 when empty.
double Percentile(const std::vector<double>& sorted, double p);

/// Jain's fairness index of `values`: (sum x)^2 / (n sum x^2); 1 when empty or all zero.
double JainIndex(const std::vector<double>& values);

}  // namespace gpulane::sim
