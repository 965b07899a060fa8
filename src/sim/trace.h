#pragma once
// Job traces for `gpulane simulate`: the project's own CSV and adapters for public cluster traces
// (msr-itp, philly, alibaba; each adapter's quirks are documented at ReadTrace), then the
// transformations that fit a trace from a cluster of thousands of GPUs onto one machine. Pure apart
// from reading the files; no clock.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "util/result.h"

namespace gpulane::sim {

/// One job of a trace.
struct Job {
  std::size_t id = 0;            ///< its place in the input (0-based, after the adapter's filtering)
  double submit_s = 0;           ///< submission time, seconds from the trace's start
  double duration_s = 0;         ///< how long it runs once started, seconds (>= 0)
  unsigned gpus = 1;             ///< GPUs wanted (>= 1)
  std::uint64_t mem_bytes = 0;   ///< 0: whole GPUs; else shares one GPU declaring this much memory (gpus == 1)
  unsigned user = 0;             ///< index into Trace::users
  std::optional<double> time_limit_s;  ///< stopped after this long; nullopt: no limit (end unknown to the scheduler)
};

/// A trace: jobs in submission order (ties: id), and what was done to it on the way.
struct Trace {
  std::vector<Job> jobs;
  std::vector<std::string> users;  ///< user names by index
  std::vector<std::string> notes;  ///< for people: "dropped 1,088 CPU-only pods (num_gpu 0)", ...
  double offered_load = 0;         ///< after the transformations: work / (machine GPUs x submission span)
};

/// The input formats.
enum class Format {
  kCsv,     ///< "csv": submit_s,duration_s,gpus,mem_bytes,user,time_limit_s (README, "Simulate")
  kMsrItp,  ///< "msr-itp": clusterNN.csv (job_id,submission_time,duration,num_gpu), or a folder of them
  kPhilly,  ///< "philly": philly_data_training.csv (u_id,user,gpu_num,...,interval,run_time,...)
  kAlibaba, ///< "alibaba": openb_pod_list_default.csv (name,...,num_gpu,gpu_milli,...,creation_time,...)
};

/// "csv", "msr-itp", "philly", "alibaba".
const char* FormatName(Format format);
std::optional<Format> ParseFormat(const std::string& name);

/// Reads `path` (a file; for msr-itp also a folder, whose cluster*.csv are merged) as `format`.
/// `gpu_mem_bytes` turns alibaba's fractional GPUs (gpu_milli < 1000) into declared memory.
/// Adapters:
///  - msr-itp: no user column (users are assigned by Transform); no job is shorter than ~600 s.
///  - philly: submission times are the running sum of `interval`; `wall_time` (0 everywhere) is
///    ignored; users are kept as "u<id>".
///  - alibaba: CPU-only pods (num_gpu 0) and pods never scheduled (empty scheduled_time) are
///    dropped; runtime is deletion_time - scheduled_time; pods created before the first
///    deletion_time in the file (alive when observation began, day 115) are dropped; pods still
///    alive at the end (deletion_time at its maximum) are kept with their observed, censored runtime.
/// Every drop is counted in Trace::notes. Errors: kIo (cannot read), kInvalidArgument (a line
/// that does not parse: file:line and what).
Result<Trace> ReadTrace(const std::string& path, Format format, std::uint64_t gpu_mem_bytes);

/// How to set time limits.
struct TimeLimitFrom {
  enum Kind { kInput, kDuration, kFactor, kNone } kind = kInput;
  double factor = 1;  ///< kFactor: limit = factor x duration (users overestimate: factor > 1)
};
/// "input", "duration", "factor:K" (K > 0), "none". Errors: kInvalidArgument.
Result<TimeLimitFrom> ParseTimeLimitFrom(const std::string& text);

/// What to do to a trace before it is replayed, in this order.
struct TransformOptions {
  unsigned machine_gpus = 8;               ///< the simulated machine's GPUs
  std::uint64_t gpu_mem_bytes = 80ULL << 30;  ///< memory of each simulated GPU, bytes
  std::optional<unsigned> max_gpus_per_job;  ///< larger jobs are clipped or dropped (default: machine_gpus)
  bool drop_oversize = false;              ///< true: drop jobs over max_gpus_per_job; false: clip them
  std::optional<std::size_t> limit_jobs;   ///< keep only the first N jobs (after drops and clipping)
  std::optional<unsigned> users;           ///< map users onto K (K >= 1); traces without users: K (default 8) by a hash of the job
  TimeLimitFrom time_limit;
  std::optional<double> load;              ///< scale inter-arrival times so the offered load is this (> 0)
};

/// Applies `options` to `trace`: oversize jobs, impossible ones (more memory than a GPU has),
/// the job limit, users, time limits, load, then shifts time so the first job arrives at 0 and
/// renumbers ids. Notes what it did. Errors: kInvalidArgument (nothing left to simulate).
Status Transform(Trace& trace, const TransformOptions& options);

/// A job's GPU use as a fraction of whole GPUs: gpus, or mem_bytes / gpu_mem_bytes when shared.
double GpuShare(const Job& job, std::uint64_t gpu_mem_bytes);

}  // namespace gpulane::sim
