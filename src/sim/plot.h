#pragma once
// Plots comparing policies on one replay (`gpulane simulate --plot FILE.html`): a self-contained
// HTML page with inline SVG (no script, nothing fetched), so it opens anywhere and can be
// committed next to the results table. Two charts: the CDF of job waits (log time axis) and GPU
// utilisation over time, one line per policy. Pure: the page is returned as a string.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "sim/simulator.h"
#include "sim/trace.h"

namespace gpulane::sim {

/// One policy's replay of the trace: its name and one Outcome per job (Simulate's result).
struct PolicySeries {
  std::string name;
  std::vector<Outcome> outcomes;
};

/// The empirical CDF of the waits (start - submit, seconds) of `jobs` under `outcomes`: points
/// (wait_s, fraction of jobs that waited at most that long), one per distinct wait, ascending; at
/// most `max_points` (evenly spaced in rank, the last point always kept). Empty for no jobs.
std::vector<std::pair<double, double>> WaitCdf(const std::vector<Job>& jobs, const std::vector<Outcome>& outcomes,
                                               std::size_t max_points = 400);

/// GPU utilisation over time: `bins` equal bins from the first submission to the last end, each
/// the fraction of `gpus` busy on average in it (a --mem share counts as its fraction of
/// `gpu_mem_bytes`, as in ComputeMetrics). `*bin_s` gets the bins' width in seconds. Empty for no
/// jobs.
std::vector<double> UtilisationOverTime(const std::vector<Job>& jobs, const std::vector<Outcome>& outcomes, unsigned gpus,
                                        std::uint64_t gpu_mem_bytes, std::size_t bins, double* bin_s);

/// The HTML page: `title` (escaped), then both charts with a legend of `runs` by name.
std::string PlotHtml(const std::string& title, const std::vector<Job>& jobs, const std::vector<PolicySeries>& runs,
                     unsigned gpus, std::uint64_t gpu_mem_bytes);

}  // namespace gpulane::sim
