#pragma once
// gpulane's settings, from TOML files (docs/config.md lists every key):
//   /etc/gpulane/config.toml                    the machine's settings (admins)
//   $XDG_CONFIG_HOME/gpulane/config.toml        a user's own preferences (~/.config/...)
//   $GPULANE_CONFIG                             a file named explicitly (replaces the user file)
// Later files override earlier ones, except keys that protect other users (lease_dir,
// memory_margin): those only the machine's file may set.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "util/result.h"
#include "util/week_window.h"

namespace gpulane {

/// One [partitions.NAME] table of the machine's file (sched/partition.h decides with it).
/// What happens to a partition's running jobs when it closes (partitions.NAME.ends).
enum class PartitionEnds {
  kNone,     ///< "none" (the default): they run on; the partition only starts nothing new
  kStop,     ///< "stop": SIGTERM, the kill grace, SIGKILL; the job ends (cancelled)
  kRequeue,  ///< "requeue": stopped as for kStop; a queued job goes back in line (`gpulane run`'s ends)
};

struct PartitionConfig {
  std::string name;
  std::vector<std::string> gpus;        ///< gpus: PCI-order indices ("0") or UUIDs, as written
  std::vector<WeekWindow> windows;      ///< windows: when it starts jobs; empty = always
  std::optional<double> max_time_limit_s;    ///< max_time_limit, seconds; also the time limit of a job without one
  std::optional<unsigned> max_gpus_per_user;  ///< max_gpus_per_user: GPUs one request may ask for in it
  PartitionEnds ends = PartitionEnds::kNone;  ///< ends: what its running jobs do when it closes
};

/// One set of limit values: the [limits] table, or one [limits.users.NAME] / [limits.groups.NAME]
/// (sched/user_limits.h resolves and applies them). Absent: no limit (or, in a user's or group's
/// table, the next level's value).
struct LimitsConfig {
  std::optional<unsigned> max_gpus;              ///< max_gpus: GPUs one user's jobs (run and queued) hold at once
  std::optional<std::size_t> max_queued;         ///< max_queued: one user's unfinished queued jobs (submit refuses more)
  std::optional<double> max_time_limit_s;        ///< max_time_limit: the longest --time-limit, seconds
  std::optional<double> default_time_limit_s;    ///< default_time_limit: the time limit of a job without one, seconds
  /// max_gpu_hours_per_day: GPU-hours one user's queued jobs may have used in the last 24 hours
  /// for another of them to start (a --mem job counts its fraction of the GPU, as fair share does).
  std::optional<double> max_gpu_hours_per_day;
};

struct Config {
  std::string lease_dir;                          ///< [lease] dir; "" = /run/gpulane/leases
  std::uint64_t memory_margin_bytes = 1ULL << 30; ///< [lease] memory_margin: kept free on shared GPUs
  double kill_grace_s = 10;                       ///< [run] kill_grace: SIGTERM..SIGKILL for leftovers
  double nvml_poll_s = 1;                         ///< [run] nvml_poll: how often waiters re-read NVML
  double stray_check_s = 5;                       ///< [run] stray_check: how often a running job is checked for processes on GPUs it did not lease (0: never)
  /// [run] isolate: "devices" (a job sees only its GPUs' device nodes, where jobs start as root:
  /// exec/device_isolation.h) or "off". Machine's file only.
  std::string isolate = "devices";
  bool isolate_required = false;                  ///< [run] isolate_required: a job that cannot be isolated fails to start (machine's file only)
  std::string admin_group;                        ///< [daemon] admin_group: may act on every job
  unsigned max_waiting_supervisors = 0;           ///< [daemon] max_waiting: queued jobs waiting for GPUs at once (0: 2 per GPU, at least 4)
  /// [daemon] show_commands: other users' command lines, working directories and log paths shown
  /// in `show`, `queue` and `usage` (never their environments); default hidden (docs/security.md,
  /// "Privacy"). Machine's file only.
  bool daemon_show_commands = false;
  /// [daemon] keep_finished: finished jobs are removed from the job store this long after they
  /// ended (seconds; 0: "forever", never). Machine's file only.
  double daemon_keep_finished_s = 30 * 86400;
  /// [daemon] history_min_free: the free space of the state folder's file system under which GPU
  /// history is not stored (daemon/history_room.h), as a size or a percentage of the file system;
  /// neither set: the larger of 256 MiB and 2 %. Machine's file only.
  std::optional<std::uint64_t> daemon_history_min_free_bytes;
  std::optional<double> daemon_history_min_free_pct;
  std::string daemon_mode = "auto";               ///< [daemon] mode: "auto", "system" or "user" (daemon/paths.h: SystemDaemonInstalled)
  std::vector<PartitionConfig> partitions;        ///< [partitions.NAME], in the file's order (machine's file only)
  std::string default_partition;                  ///< [sched] default_partition: for requests without --partition ("" = none)
  /// [sched] policy: "default", "easy", "fifo" or "firstfit" (sched::ParsePolicy; sched/policy.h
  /// says what each does). Machine's file only.
  std::string sched_policy = "default";
  /// [sched] max_reserve_idle: the longest a free GPU is held for a waiting job whose start
  /// nobody can predict (sched::kDefaultMaxReserveIdleS, 10 min), seconds; 0 .. 1 day.
  double max_reserve_idle_s = 600;
  /// [sched] max_unclaimed: a ticket granted GPUs that its holder does not take within this long
  /// loses its place in line (sched::kDefaultMaxUnclaimedS, 30 s; sched/unclaimed.h), seconds;
  /// 1 s .. 1 h.
  double max_unclaimed_s = 30;
  LimitsConfig limits;                                            ///< [limits]: everyone's (root has none)
  std::vector<std::pair<std::string, LimitsConfig>> user_limits;  ///< [limits.users.NAME], in the file's order
  std::vector<std::pair<std::string, LimitsConfig>> group_limits; ///< [limits.groups.NAME], in the file's order
  double fair_share_half_life_s = 86400;          ///< [sched] fair_share_half_life: past GPU use counts half after this long
  double priority_weight_fair_share = 1.0;        ///< [sched] priority_weight_fair_share (sched/fairshare.h)
  double priority_weight_age = 1.0;               ///< [sched] priority_weight_age
  /// [sched] max_preemptions_per_job: a preemptible job preempted this often runs its next attempt
  /// to its end, not preempted again (sched/preemption.h; 0: preemptible jobs are never preempted).
  unsigned max_preemptions_per_job = 3;
  /// [sched] max_preemptions_per_minute: while the machine's jobs were preempted this often in the
  /// last minute, no preemptible job is started (sched::LaunchLimits; 0: no bound).
  unsigned max_preemptions_per_minute = 30;
  double priority_max_age_s = 7 * 86400;          ///< [sched] priority_max_age: the age factor is 1 from this long in line
  std::map<std::string, double> shares;           ///< [shares]: "alice" or "@group" -> share (unlisted: 1)
  /// [telemetry] (the daemon's sampler, docs/config.md "Telemetry"; read by daemons only).
  bool telemetry_enabled = true;                  ///< telemetry.enabled: false: no sampler, no history
  double telemetry_interval_s = 1;                ///< telemetry.interval: every GPU is read this often (0.1 s .. 60 s)
  double telemetry_keep_10s_s = 86400;            ///< telemetry.keep_10s: 10-second history rows are kept this long
  double telemetry_keep_1m_s = 30 * 86400;        ///< telemetry.keep_1m: 1-minute rows
  double telemetry_keep_records_s = 365 * 86400;  ///< telemetry.keep_records: jobs' usage records and events
  /// telemetry.hpc_job_mapping_dir: where the sampler writes dcgm-exporter's job mapping files (one
  /// per GPU, named by NVML index, "<index>.<GPU instance>" for a MIG device, holding the ids of the
  /// jobs on it, one a line); "" = none.
  std::string telemetry_hpc_job_mapping_dir;
  /// [notify]: where submit --notify and run --notify send (docs/config.md "Notifications"); a
  /// user's own file sets them for her jobs.
  std::string notify_webhook;           ///< notify.webhook: http(s) URL
  std::string notify_format = "json";   ///< notify.format: "json" or "text"
  std::string notify_command;           ///< notify.command: run with /bin/sh -c as the job's user
  /// [anomaly]: the thresholds of the anomaly rules (telemetry/anomaly.h, docs/config.md "Anomalies").
  double anomaly_idle_util_pct = 5;
  double anomaly_idle_after_s = 600;
  double anomaly_stuck_util_pct = 99;
  double anomaly_stuck_after_s = 4 * 3600;
  double anomaly_leak_window_s = 1800;
  std::uint64_t anomaly_leak_min_growth_bytes = 1ULL << 30;
  std::uint64_t anomaly_ghost_min_bytes = 2ULL << 30;
  double anomaly_ghost_after_s = 120;
  double anomaly_throttle_after_s = 60;
  double anomaly_xid_clear_after_s = 600;
  std::string anomaly_idle_action = "warn";  ///< "warn", or "cancel" (after idle_cancel_after more)
  double anomaly_idle_cancel_after_s = 7200;
  /// anomaly.overuse_grace: a --mem job over its declaration plus lease.memory_margin is stopped
  /// after this long (telemetry/memory_guard.h); 0: warned only. Machine's file only.
  double anomaly_overuse_grace_s = 10;
  /// [web] (the daemon's gpulane-web: /metrics and the dashboard, docs/config.md "Web"; util/web_config.h).
  std::string web_listen = "127.0.0.1:9470";      ///< web.listen: "HOST:PORT", or "off"
  bool web_show_commands = false;                 ///< web.show_commands: command lines shown over HTTP
  std::vector<std::string> web_allowed_hosts;     ///< web.allowed_hosts: more Host header names answered
  std::vector<std::string> web_peers;             ///< web.peers: other servers' URLs shown beside this one
  /// [submit] and [slurm] (docs/slurm.md): where `gpulane submit` sends jobs and how to Slurm.
  std::string submit_backend = "local";           ///< submit.backend: "local" (the gpulane daemon) or "slurm" (sbatch)
  std::string slurm_gpus_option = "gres";         ///< slurm.gpus_option: "gres" (--gres=gpu:N) or "gpus" (--gpus=N)
  std::uint64_t slurm_shard_memory_bytes = 10ull << 30;  ///< slurm.shard_memory: GPU memory one shard stands for (--mem)
  double slurm_poll_interval_s = 5;               ///< slurm.poll_interval: squeue at most this often per user (1s..10m)
};

/// The names [sched] policy accepts, as sched::PolicyName spells them (a unit test checks the two
/// agree: util/ cannot include sched/).
inline constexpr const char* kSchedPolicyNames[] = {"default", "easy", "fifo", "firstfit"};

/// Loads the files above, once per process: the first call reads them, later calls return that
/// same result (main() calls it before any command runs, so every command sees one set of settings
/// and a broken file stops each of them alike). Errors: kInvalidArgument "<file>:<line>: <problem>"
/// when a file cannot be parsed, has an unknown key or a value of the wrong kind; a missing file is
/// not an error.
Result<Config> LoadConfig();

/// Loads one file on top of `config` (`trusted`: may set machine-only keys).
Status LoadConfigFile(const std::string& path, bool trusted, Config& config);

}  // namespace gpulane
