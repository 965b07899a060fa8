#pragma once
// Anomaly rules (issue 11, item 3), pure: fed one observation per sample, they say which
// anomalies start and which end. Each has a threshold in [anomaly] of the config (AnomalySettings)
// and a one-line message naming job, user, GPU and what to check.
//
//   idle        a leased GPU the job uses under idle_util_pct for idle_after_s
//   stuck       a job at >= stuck_util_pct with its memory unchanged for stuck_after_s
//   leak        a job's memory on a GPU grew steadily over leak_window_s, by leak_min_growth_bytes
//   ghost       memory used on a GPU that no listed process accounts for (ghost_min_bytes, ghost_after_s)
//   foreign     a process outside the lease on a GPU a job holds whole (seen in two samples in a row)
//   throttle    the GPU slowed to protect itself (thermal, hardware slowdown, power brake) for throttle_after_s
//   xid         NVML reported an Xid error on the GPU: the GPU is drained until xid_clear_after_s without one
//   gpu_lost    NVML reports the GPU failed (lost, needs a reset): drained while it does
//   overuse     a job sharing a GPU by --mem holds more there than it declared plus lease.memory_margin
//               (telemetry/memory_guard.h; raised at once, the job's own lifecycle stops it after
//               anomaly.overuse_grace)
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "telemetry/memory_guard.h"

namespace gpulane::telemetry {

/// [anomaly] of the config (docs/config.md).
struct AnomalySettings {
  double idle_util_pct = 5;
  double idle_after_s = 600;
  double stuck_util_pct = 99;
  double stuck_after_s = 4 * 3600;
  double leak_window_s = 1800;
  std::uint64_t leak_min_growth_bytes = 1ULL << 30;
  std::uint64_t ghost_min_bytes = 2ULL << 30;
  double ghost_after_s = 120;
  double throttle_after_s = 60;
  double xid_clear_after_s = 600;
  /// anomaly.idle_action = "cancel": a job whose GPU stays idle this long after its idle warning is
  /// cancelled; 0 (idle_action = "warn", the default): only warned about.
  double idle_cancel_after_s = 0;
  /// lease.memory_margin and anomaly.overuse_grace: the line of the overuse rule (its message says
  /// when the job is stopped).
  MemoryGuardSettings memory_guard;
};

/// One job's view of one of its GPUs at a sample.
struct JobGpuState {
  std::string job_id;   ///< "12", "r4121"
  std::string user;
  std::string lease;    ///< the lease's name: identifies the job while it lives
  std::string gpu_uuid;
  unsigned gpu_index = 0;
  bool whole = true;    ///< the job holds the GPU whole (a foreign process there is an anomaly)
  std::optional<double> util_pct;            ///< the job's utilisation there (JobGpuObservation)
  std::optional<std::uint64_t> memory_bytes; ///< its processes' memory there
  std::optional<std::uint64_t> declared_bytes; ///< its --mem there when it shares the GPU; nullopt: none
  std::vector<std::string> foreign;          ///< processes on it outside this lease: "bob's python (pid 12)"
  /// The job as people name it in messages: "12_3" for an array's task (lease::JobText); "" = job_id.
  std::string job_text;
};

/// One GPU at a sample.
struct GpuState {
  std::string uuid;
  unsigned index = 0;
  bool failed = false;
  std::string failure;                            ///< NVML's error name when failed
  std::optional<std::uint64_t> memory_used_bytes;
  /// Memory of the processes NVML lists on it; nullopt when the list or a figure is unknown.
  std::optional<std::uint64_t> process_memory_bytes;
  std::optional<std::uint64_t> clocks_event_reasons;
  std::vector<std::uint64_t> xids;                ///< raised since the last sample
};

/// An anomaly as it starts.
struct Anomaly {
  std::string key;       ///< identifies it while it lasts ("idle:<lease>:<uuid>")
  std::string kind;      ///< "idle", "stuck", "leak", "ghost", "foreign", "throttle", "xid", "gpu_lost", "overuse"
  std::string gpu_uuid;
  std::optional<unsigned> gpu_index;
  std::string job_id;    ///< "" when about the GPU alone
  std::string user;
  std::string message;   ///< one line for people
  bool drains = false;   ///< the GPU takes no new jobs while this lasts
};

/// A job to cancel because it stayed idle past its warning and the grace (idle_cancel_after_s).
struct IdleCancel {
  std::string job_id;    ///< the lease's: the job cancelled ("12", "r4121")
  std::string lease;     ///< the lease's name
  std::string user;
  std::string message;   ///< the reason, for the job's record and the event
  std::string job_text;  ///< the job as people name it ("12_3"), for the log and the event
};

/// What one sample changed.
struct AnomalyChanges {
  std::vector<Anomaly> started;
  std::vector<std::string> ended;  ///< keys of anomalies that are over
  std::vector<IdleCancel> cancels;
};

class AnomalyDetector {
 public:
  explicit AnomalyDetector(AnomalySettings settings) : s_(settings) {}
  /// One sample at `now_s`: every GPU and every live job's GPUs.
  AnomalyChanges Observe(double now_s, const std::vector<GpuState>& gpus, const std::vector<JobGpuState>& jobs);
  /// The anomalies going on now, by key.
  const std::map<std::string, Anomaly>& current() const { return current_; }
  /// UUIDs of the GPUs drained now (an ongoing xid or gpu_lost anomaly), with why.
  std::map<std::string, std::string> Drained() const;

 private:
  // A condition that must last `after_s` before it is an anomaly.
  struct Timer {
    std::optional<double> since_s;
  };
  struct JobGpuTrack {
    Timer idle, stuck;
    std::optional<std::uint64_t> stuck_memory;
    std::deque<std::pair<double, std::uint64_t>> memory;  ///< (time, bytes), one a minute at most, over the leak window
    std::set<std::string> foreign_seen;  ///< foreign processes of the previous sample (raised once seen twice)
    bool cancel_asked = false;           ///< its idle cancel was given once
    double seen_s = 0;
  };
  struct GpuTrack {
    Timer ghost, throttle;
    std::optional<double> last_xid_s;
    std::uint64_t last_xid = 0;
    double seen_s = 0;
  };
  void Raise(AnomalyChanges& changes, Anomaly a);
  void End(AnomalyChanges& changes, const std::string& key);
  // Sets or ends the anomaly `a` by whether `condition` has held for `after_s` (its timer `t`).
  void Hold(AnomalyChanges& changes, double now_s, Timer& t, bool condition, double after_s, const Anomaly& a);
  void ObserveGpu(AnomalyChanges& changes, double now_s, const GpuState& g);
  void ObserveJob(AnomalyChanges& changes, double now_s, const JobGpuState& j);
  /// Processes of others on a GPU the job holds whole, seen at two samples in a row; and their end.
  void ObserveForeign(AnomalyChanges& changes, const JobGpuState& j, JobGpuTrack& t, const Anomaly& base);

  AnomalySettings s_;
  std::map<std::string, Anomaly> current_;
  std::map<std::string, JobGpuTrack> jobs_;  ///< by "<lease>:<uuid>"
  std::map<std::string, GpuTrack> gpus_;     ///< by UUID
};

/// Whether memory `points` (time, bytes) grew steadily: rising from first to last by at least
/// `min_growth_bytes`, never falling back by more than 5 % of that growth between points, with a
/// least-squares slope fitting at least 80 % of the variance. Points must span most of the window.
bool GrowsSteadily(const std::deque<std::pair<double, std::uint64_t>>& points, std::uint64_t min_growth_bytes);

}  // namespace gpulane::telemetry
