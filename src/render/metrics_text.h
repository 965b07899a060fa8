#pragma once
// The Prometheus text exposition (format 0.0.4) of /metrics (issue 11, item 5): dcgm-exporter's
// metric names, units and labels where dcgm-exporter has them (so existing dashboards work), and
// gpulane's own (jobs, queue waits, leases and per-job use, which dcgm-exporter cannot attribute).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gpu/types.h"
#include "telemetry/sample.h"

namespace gpulane::render {

/// One job's use of one GPU at the last sample.
struct MetricsJobGpu {
  std::string job_id;
  std::string user;
  std::string gpu_uuid;
  std::optional<std::uint64_t> memory_bytes;
  std::optional<double> util_pct;
};

/// Everything /metrics shows.
struct MetricsInput {
  std::string hostname;
  std::vector<GpuDevice> gpus;  ///< identity (index, UUID, bus ID, minor, name) of each GPU
  std::map<std::string, telemetry::GpuReading> readings;  ///< the last sample, by UUID (absent: never sampled)
  std::map<std::string, std::uint64_t> xid_totals;        ///< Xid errors since the daemon started, by UUID
  std::map<std::string, std::uint64_t> last_xid;          ///< the last Xid seen, by UUID (DCGM_FI_DEV_XID_ERRORS)
  std::vector<MetricsJobGpu> jobs;
  std::map<std::string, std::uint64_t> jobs_by_state;     ///< queued jobs by state name
  std::vector<double> wait_bounds_s;                      ///< histogram bucket bounds (le), ascending
  std::vector<std::uint64_t> wait_counts;                 ///< cumulative counts per bound, then +Inf
  double wait_sum_s = 0;
  std::uint64_t samples = 0;
};

/// The exposition text. Absent readings make no sample line (never a 0 for "unknown").
std::string MetricsText(const MetricsInput& in);

/// A label value escaped for the text format (backslash, double quote, line feed).
std::string EscapeLabel(const std::string& value);

}  // namespace gpulane::render
