#pragma once
// `gpulane report`: finished jobs' usage records summed by job, user, GPU or day. Pure.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "telemetry/job_usage.h"

namespace gpulane::telemetry {

/// A finished job's (or `gpulane run`'s) use of GPUs, as the daemon records it when its lease ends.
struct UsageRecord {
  std::string job_id;  ///< "12" (a queued job's or array task's own id), "r4121" (`gpulane run`: its pid)
  /// An array task as people name it ("12_3", its lease's job_text): what `report --by job` shows;
  /// "" for any other job (and for records stored before gpulane kept it): job_id names it.
  std::string job_text;
  std::uint32_t uid = 0;
  std::string user;
  std::string name;    ///< the job's name or command line, for people
  std::vector<std::string> gpu_uuids;
  std::vector<unsigned> gpu_indices;  ///< PCI-order indices of the same GPUs when it ran
  double start_s = 0;  ///< seconds since the epoch
  double end_s = 0;
  JobUsage usage;
};

/// The job as people name it: job_text, else job_id.
const std::string& JobText(const UsageRecord& r);

enum class ReportBy { kJob, kUser, kGpu, kDay };

/// "job", "user", "gpu", "day"; ParseReportBy is the inverse (nullopt for anything else).
const char* ReportByName(ReportBy by);
std::optional<ReportBy> ParseReportBy(const std::string& name);

/// One line of a report.
struct ReportRow {
  std::string key;            ///< the job id, user name, "0 GPU-9fb1..." (index and UUID) or "2026-12-03"
  std::uint64_t jobs = 0;
  double gpu_s = 0;
  double run_s = 0;           ///< summed run time of its jobs
  std::optional<double> energy_j;             ///< summed over the jobs that reported it
  std::optional<std::uint64_t> peak_memory_bytes;
  std::optional<double> mean_util_pct;        ///< weighted by GPU-seconds, over jobs with a figure
  std::optional<double> idle_fraction;        ///< the same weighting
  std::optional<double> mean_wait_s;          ///< over jobs with a known wait
};

/// Sums records by `by` as they come (a month's records are not held in memory at once).
class ReportBuilder {
 public:
  /// `day_of` as for Summarize.
  ReportBuilder(ReportBy by, std::function<std::string(double)> day_of);
  ~ReportBuilder();
  ReportBuilder(const ReportBuilder&) = delete;
  ReportBuilder& operator=(const ReportBuilder&) = delete;
  void Add(const UsageRecord& record);
  /// The rows, ordered as Summarize says.
  std::vector<ReportRow> Rows() const;

 private:
  struct State;
  ReportBy by_;
  std::function<std::string(double)> day_of_;
  State* state_;
};

/// `records` summed by `by`, the largest GPU-seconds first (by job: in end order; by day: in day
/// order). A job on several GPUs counts on each of them with its share (by gpu). `day_of` turns
/// seconds since the epoch into the day a job counts for (the local date it ended, "2026-12-03").
std::vector<ReportRow> Summarize(const std::vector<UsageRecord>& records, ReportBy by,
                                 const std::function<std::string(double)>& day_of);

}  // namespace gpulane::telemetry
