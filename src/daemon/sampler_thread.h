#pragma once
// The daemon's sampler: one thread beside the event loop that reads every GPU each
// telemetry.interval (NVML with telemetry: energy, clocks, per-process utilisation, Xid events),
// joins the processes with the lease directory (lease::ProcessOwners), feeds Sampler
// (sampler.h) and stores what it gives in the history database. The loop never waits for it:
// questions about telemetry (history, usage, reports, metrics) are handed over like frames to the
// parse worker, answered by the thread between samples (SQLite queries included), and taken back
// when event_fd() is readable.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "daemon/sampler.h"
#include "gpu/backend.h"
#include "os/env.h"
#include "os/process_table.h"
#include "proto/requests.h"
#include "store/history_store.h"
#include "util/clock.h"

namespace gpulane::daemon {

/// The live leases (the lease directory in the daemon; a fixed list in tests): `all` of them for a
/// snapshot, or the one of a file `named` (nullopt: none live, or unreadable) for a job that ends.
struct LeaseSource {
  std::function<std::vector<lease::LeaseRecord>()> all;
  std::function<std::optional<lease::LeaseRecord>(const std::string&)> named;
};

class SamplerThread {
 public:
  /// An answer for connection (fd, serial).
  struct Answer {
    int fd = -1;
    std::uint64_t serial = 0;
    nlohmann::json reply;
  };
  /// Starts sampling at once. `backend` reads the GPUs (its own NVML handle: the loop keeps its
  /// own), `leases` lists the live leases, `history` stores rows, records and events (nullptr: kept
  /// in memory only), `env` its clock and process table (shared with the loop), `log` writes a
  /// line to the daemon's log.
  SamplerThread(SamplerSettings settings, std::unique_ptr<GpuBackend> backend, LeaseSource leases,
                std::unique_ptr<store::HistoryStore> history, const os::Env& env,
                std::function<void(const std::string&)> log);
  /// Stores the partly filled history buckets and joins the thread.
  ~SamplerThread();
  SamplerThread(const SamplerThread&) = delete;
  SamplerThread& operator=(const SamplerThread&) = delete;

  /// Readable (POLLIN) when Take has answers; -1 if eventfd failed (then questions are answered
  /// with an error at once).
  int event_fd() const { return event_fd_; }
  /// Queues question `request` (an op of docs/protocol.md "Telemetry", read by proto::ParseRequest)
  /// of connection (fd, serial). `extra` carries what only the loop knows (the job table's counts
  /// for "metrics", who asks).
  void Ask(int fd, std::uint64_t serial, proto::SamplerRequest request, nlohmann::json extra = {});
  /// The answers since the last call, in the order asked.
  std::vector<Answer> Take();
  /// Samples taken so far (for tests and `ping` statistics).
  std::uint64_t samples() const;
  /// What snapshots say of each GPU now (by UUID): why it is drained, and its anomalies' lines.
  struct Marks {
    std::map<std::string, std::string> drained;
    std::map<std::string, std::vector<std::string>> anomalies;
  };
  Marks CurrentMarks() const;
  /// Queued jobs to cancel because they stayed idle (anomaly.idle_action = "cancel"), by job id
  /// with the reason, since the last call (`gpulane run` jobs the thread stops itself).
  std::vector<telemetry::IdleCancel> TakeCancels();
  /// The GPU use of leases that are no daemon jobs (OutsideLeaseUsage): those that ended since the
  /// last call (end_s: the first sample that no longer saw them) and those live at the last sample.
  struct LeaseUsage {
    std::vector<sched::UsageRecord> ended, live;
  };
  LeaseUsage TakeLeaseUsage();
  /// While the state folder has too little free space for history (history_room.h): the warning
  /// line; "" while history is stored.
  std::string NoRoomForHistory() const;

 private:
  struct Question {
    int fd;
    std::uint64_t serial;
    proto::SamplerRequest request;
    nlohmann::json extra;
  };
  void Run();
  void SampleOnce();
  nlohmann::json AnswerOf(const Question& q);
  // One per question, chosen by AnswerOf's std::visit; `extra` as Ask's.
  nlohmann::json Respond(const proto::HistoryRequest& req, const nlohmann::json& extra);
  nlohmann::json Respond(const proto::ReportRequest& req, const nlohmann::json& extra);
  nlohmann::json Respond(const proto::UsageRequest& req, const nlohmann::json& extra);
  nlohmann::json Respond(const proto::TelemetryRequest& req, const nlohmann::json& extra);
  nlohmann::json Respond(const proto::MetricsRequest& req, const nlohmann::json& extra);
  nlohmann::json Respond(const proto::EventsRequest& req, const nlohmann::json& extra);
  /// Logs the anomalies that started and ended, stores them (when `keep`: history has room), and
  /// publishes the marks.
  void Record(double now_s, const telemetry::AnomalyChanges& changes, bool keep);
  void Prune(double now_s);
  /// Whether history may be written now: settings' disk_space looked at every kRoomCheckEveryS
  /// (between looks, the last answer); each change logged once.
  bool HistoryRoom(double now_s);
  void NoteEnding(const std::string& lease_name, std::uint32_t uid, double now_s);
  /// Stores the records NoteEnding made of unsampled leases (after the answers went out).
  void StoreEnded();
  std::vector<telemetry::UsageRecord> ended_unsampled_;
  static constexpr double kRoomCheckEveryS = 10;
  double next_room_check_s_ = 0;
  bool room_ = true;
  /// Writes the dcgm-exporter job mapping files that changed (telemetry.hpc_job_mapping_dir).
  void WriteJobMapping();

  Sampler sampler_;
  std::unique_ptr<GpuBackend> backend_;
  LeaseSource leases_;
  ProcessTable& processes_;
  std::unique_ptr<store::HistoryStore> history_;
  const Clock& clock_;
  std::function<void(const std::string&)> log_;
  bool read_once_ = false;       ///< a snapshot was read (later reads go one GPU after another)
  std::string last_error_;       ///< the last read or store failure logged (each new one is logged once)
  double next_prune_s_ = 0;
  std::vector<std::uint64_t> wait_buckets_;  ///< cumulative counts per kWaitBucketsS, +Inf last
  double wait_sum_s_ = 0;

  std::map<std::string, std::string> mapping_written_;  ///< job mapping files as last written, by name
  std::map<std::string, std::int64_t> event_ids_;  ///< stored event of each current anomaly, by key

  std::map<std::string, sched::UsageRecord> outside_live_;  ///< OutsideLeaseUsage at the last sample, by lease name

  mutable std::mutex mu_;
  LeaseUsage lease_usage_;  ///< under mu_: what TakeLeaseUsage hands over
  Marks marks_;
  std::string no_room_;  ///< under mu_: NoRoomForHistory
  std::vector<telemetry::IdleCancel> cancels_;
  std::condition_variable wake_;
  std::deque<Question> questions_;
  std::vector<Answer> answers_;
  std::uint64_t samples_ = 0;
  bool stop_ = false;
  int event_fd_ = -1;
  std::thread thread_;
};

}  // namespace gpulane::daemon
