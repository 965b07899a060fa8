#pragma once
// What the daemon does with each GPU sample (issue 11): keeps the last hour of every GPU in
// memory, turns samples into history rows at each stored resolution, meters every live lease's use
// of its GPUs (the `gpulane run` ones too: they are in the same lease directory), and hands out a
// usage record for each lease that has ended. Single-threaded and clock-free: the sampler thread
// (sampler_thread.h) reads NVML, the lease directory and /proc and calls Take with the time;
// tests call it with made-up snapshots and times.
#include <functional>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "daemon/history_room.h"
#include "gpu/types.h"
#include "lease/records.h"
#include "sched/fairshare.h"
#include "telemetry/anomaly.h"
#include "telemetry/history.h"
#include "telemetry/job_usage.h"
#include "telemetry/report.h"

namespace gpulane::daemon {

/// [telemetry] of the machine's config (docs/config.md).
struct SamplerSettings {
  double interval_s = 1;                           ///< telemetry.interval: how often every GPU is read
  double ring_s = 3600;                            ///< full-rate history kept in memory
  std::vector<double> resolutions_s = {10, 60};    ///< stored history rows' lengths
  std::vector<double> keep_s = {86400, 30 * 86400};  ///< how long rows of each resolution are kept
  double records_keep_s = 365 * 86400;             ///< usage records and events
  telemetry::AnomalySettings anomaly;              ///< [anomaly]
  std::string hpc_job_mapping_dir;                 ///< telemetry.hpc_job_mapping_dir ("" = none)
  /// The state folder's free space (history_room.h), looked at before history is written; unset:
  /// always room. `state_dir` names the folder in the warning.
  std::function<Result<DiskSpace>()> disk_space;
  HistoryFloor history_floor;  ///< daemon.history_min_free (default: max(256 MiB, 2 %))
  std::string state_dir;
};

/// One job's GPU as the last sample saw it (for metrics): the job's memory and utilisation there.
struct LiveJobGpu {
  std::string uuid;
  std::optional<std::uint64_t> memory_bytes;
  std::optional<double> util_pct;
  bool whole = true;                 ///< held whole (not a --mem share, not a MIG device)
  std::vector<std::string> foreign;  ///< processes on it outside the job: "bob's python (pid 12)"
  std::optional<std::uint64_t> declared_bytes;  ///< its lease's --mem there (nullopt: none)
};

/// A live lease as the sampler meters it.
struct LiveJob {
  lease::LeaseRecord lease;
  std::vector<LiveJobGpu> gpus;
  telemetry::JobMeter meter;
  double last_seen_s = 0;
  /// When its owner said it ends (Sampler::NoteEnding): its record ends there, not at the sample
  /// that finds it gone.
  std::optional<double> ending_s;
};

/// The GPU use of the live leases of `leases` that are no daemon jobs (`gpulane run`: "r<pid>",
/// Python lease(): "p<pid>"; a daemon job's id starts with a digit) and not nested in a job (its
/// parent's lease counts its GPUs already), by lease name: the lease's user, its start, no end,
/// and its GPUs as whole GPUs (a --mem share as mem / the GPU's memory in `snapshot`; a whole GPU
/// when that memory is unknown; an unreadable lease naming no GPU as every GPU). The start is the lease's, but no later than `now_s` (seconds since
/// the epoch): a lease file that says it starts later is its owner's word, and must not hide her
/// use. For fair share (JobTable::AddLeaseUsage).
std::map<std::string, sched::UsageRecord> OutsideLeaseUsage(const std::vector<lease::LeaseRecord>& leases,
                                                           const GpuSnapshot& snapshot, double now_s);

class Sampler {
 public:
  explicit Sampler(SamplerSettings settings) : settings_(std::move(settings)) {}

  /// What a sample produced for the store.
  struct Output {
    std::vector<std::pair<std::string, telemetry::HistoryRow>> rows;  ///< finished buckets, by GPU UUID
    std::vector<telemetry::UsageRecord> finished;                     ///< leases that ended since the last sample
    telemetry::AnomalyChanges anomalies;                              ///< anomalies that started or ended
  };
  /// Takes the sample of `snapshot` (processes annotated) at `now_s` (seconds since the epoch),
  /// with the live `leases` and `owners` (lease::ProcessOwners of the same snapshot and leases).
  Output Take(double now_s, const GpuSnapshot& snapshot, const std::vector<lease::LeaseRecord>& leases,
              const std::vector<std::vector<int>>& owners);
  /// The rows of the buckets being filled (at shutdown).
  std::vector<std::pair<std::string, telemetry::HistoryRow>> Flush();

  /// The usage of the lease named `lease_name` so far (live), or as it ended (kept a while after).
  std::optional<telemetry::UsageRecord> UsageOf(const std::string& lease_name, double now_s) const;
  /// Live lease `lease_name` ends at `now_s` (its owner says so, just before releasing it): false
  /// when it is not live, or `uid` (the asker's; 0 is root) is not its owner's.
  bool NoteEnding(const std::string& lease_name, std::uint32_t uid, double now_s);
  /// `lease` ends at `now_s` before any sample saw it (a job shorter than one interval): its
  /// record (its start, end, GPUs and GPU-seconds; no sampled figure: those are unknown, not 0),
  /// kept as an ended lease's, so UsageOf finds it and a sample that still sees the lease does not
  /// meter it again. nullopt when it was sampled or has ended already.
  std::optional<telemetry::UsageRecord> EndUnsampled(const lease::LeaseRecord& lease, double now_s);
  /// GPU `uuid`'s points at full rate since `since_s` (the last ring_s seconds at most).
  std::vector<telemetry::GpuPoint> Points(const std::string& uuid, double since_s) const;
  /// The last snapshot taken (no devices before the first).
  const GpuSnapshot& latest() const { return latest_; }
  double latest_time_s() const { return latest_time_s_; }
  /// Every live lease, by name.
  const std::map<std::string, LiveJob>& live() const { return live_; }
  /// Xid errors seen per GPU UUID since the daemon started.
  const std::map<std::string, std::uint64_t>& xid_totals() const { return xid_totals_; }
  /// The last Xid seen per GPU UUID.
  const std::map<std::string, std::uint64_t>& last_xid() const { return last_xid_; }
  const SamplerSettings& settings() const { return settings_; }
  /// The anomalies going on now.
  const telemetry::AnomalyDetector& anomalies() const { return detector_; }

 private:
  struct GpuHistory {
    telemetry::GpuRing ring;
    std::vector<telemetry::Downsampler> downsamplers;
  };
  void Meter(double now_s, const GpuSnapshot& snapshot, const std::vector<lease::LeaseRecord>& leases,
             const std::vector<std::vector<int>>& owners);
  telemetry::UsageRecord RecordOf(const LiveJob& job, double end_s) const;

  /// Feeds the anomaly rules what this sample saw.
  telemetry::AnomalyChanges Detect(double now_s, const GpuSnapshot& snapshot);

  SamplerSettings settings_;
  telemetry::AnomalyDetector detector_{settings_.anomaly};
  std::map<std::string, GpuHistory> gpus_;  ///< by UUID
  std::map<std::string, LiveJob> live_;     ///< by lease name
  std::map<std::string, std::pair<double, telemetry::UsageRecord>> ended_;  ///< lease name -> (ended at, record)
  std::map<std::string, std::uint64_t> xid_totals_, last_xid_;
  GpuSnapshot latest_;
  double latest_time_s_ = 0;
};

/// dcgm-exporter's HPC job mapping (its --hpc-job-mapping-dir): for every GPU of `snapshot` a file
/// name (its NVML index; "<index>.<GPU instance id>" for a MIG device) and its content, the ids of
/// the jobs of `live` on it, one a line ("" when none).
std::map<std::string, std::string> JobMappingFiles(const GpuSnapshot& snapshot, const std::map<std::string, LiveJob>& live);

/// The compact reading of `device` (telemetry/sample.h).
telemetry::GpuReading ReadingOf(const GpuDevice& device);

}  // namespace gpulane::daemon
