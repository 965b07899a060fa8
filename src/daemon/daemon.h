#pragma once
// The gpulane daemon: a durable multi-user job queue. It accepts requests on a Unix socket
// (proto/wire.h; identity from SO_PEERCRED only), keeps jobs in SQLite (store/), and starts one
// supervisor process per job that may run next (daemon/supervisor.h); supervisors wait in the same
// lease line as `gpulane run`, so queued jobs and ad-hoc runs never collide. The daemon learns of
// supervisors' progress through their status files (inotify), so a restart loses nothing.
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "daemon/job_files.h"
#include "daemon/paths.h"
#include "gpu/backend.h"
#include "proto/wire.h"
#include "store/job_store.h"
#include "util/config.h"

namespace gpulane::daemon {

/// Who is asking (from SO_PEERCRED).
struct Peer {
  std::uint32_t uid = 0;
  std::uint32_t gid = 0;
  pid_t pid = 0;
  std::string user;
  bool admin = false;  ///< root or a member of daemon.admin_group
};

struct QueueStream;  // daemon/queue_stream.h

/// One client connection.
struct Connection {
  int fd = -1;
  Peer peer;
  proto::FrameReader reader{proto::kMaxRequestBytes};
  std::string out;                 ///< bytes not yet written
  double last_read_s = 0;          ///< monotonic seconds of the last byte received
  bool close_after_write = false;
  /// A streamed reply being sent (queue_stream.h); requests behind it wait until it is done.
  std::shared_ptr<QueueStream> stream;
};

class Daemon {
 public:
  Daemon(DaemonPaths paths, Config config);
  ~Daemon();
  /// Runs until SIGTERM/SIGINT. Returns the process exit code; prints the reason on stderr when it
  /// cannot start (another daemon running, damaged database, no NVIDIA driver).
  int Run();

 private:
  // Start-up (daemon.cc).
  Status Setup();
  Status OpenSocket();
  void Recover();
  // Event loop (server.cc).
  void Loop();
  void Accept();
  void ReadFrom(Connection& c);
  void WriteTo(Connection& c);
  void Reply(Connection& c, const nlohmann::json& response);
  void CloseConnection(int fd);
  // Requests (handlers.cc).
  void HandleRequest(Connection& c, const std::string& payload);
  nlohmann::json HandleSubmit(const Peer& peer, const nlohmann::json& req, std::vector<store::Job>* jobs);
  nlohmann::json HandleQueue(const Peer& peer, const nlohmann::json& req);
  /// A queue request with "stream": answers the header, then PumpStream sends the text part by part.
  void StartQueueStream(Connection& c, const nlohmann::json& req);
  /// Appends the stream's next part to c.out once the last one is nearly written; at the end the
  /// closing empty frame, and then handles the requests that came in behind it.
  void PumpStream(Connection& c);
  nlohmann::json HandleSnapshot(const nlohmann::json& req);
  nlohmann::json HandleShow(const Peer& peer, const nlohmann::json& req);
  nlohmann::json HandleCancel(const Peer& peer, const nlohmann::json& req);
  nlohmann::json HandleHold(const Peer& peer, const nlohmann::json& req, bool hold);
  nlohmann::json HandleLogs(const Peer& peer, const nlohmann::json& req);
  bool HandleWait(Connection& c, const nlohmann::json& req);
  void CommitSubmissions();
  nlohmann::json JobForClient(const store::Job& job, bool with_env) const;
  std::vector<unsigned> GpuIndices(const store::Job& job) const;
  // Jobs (jobs.cc).
  void LaunchEligible();
  void Launch(store::Job& job);
  void ImportStatus(std::int64_t id);
  void CheckSupervisors();
  /// Ends a job: records it (unless the caller has stored it already, `stored`), answers for it
  /// from now on, and forgets it.
  void Finish(store::Job& job, store::JobState state, std::optional<int> exit_code, const std::string& reason,
              std::optional<double> end_time, bool stored = false);
  void MarkDirty(const store::Job& job) { dirty_.insert(job.id); }
  void FlushDirty();
  void AnswerWaiters();
  std::optional<store::Job> FindJob(std::int64_t id);
  /// The state of one array task ("12_3": ref.task set), nullopt when there is no such task (handlers.cc).
  std::optional<store::JobState> TaskState(const store::JobRef& ref);
  bool CanAct(const Peer& peer, const store::Job& job) const { return peer.admin || peer.uid == job.uid; }
  void Log(const std::string& message) const;

  DaemonPaths paths_;
  Config config_;
  std::string jobs_dir_;
  std::string self_exe_;
  std::unique_ptr<store::JobStore> store_;
  std::unique_ptr<GpuBackend> backend_;
  unsigned gpu_count_ = 0;
  GpuSnapshot gpu_identity_;  ///< the GPUs as read at start-up: UUIDs, memory, modes (submissions are checked against them)
  std::map<std::string, unsigned> gpu_index_;           ///< UUID -> PCI-order index, for people
  int lock_fd_ = -1, listen_fd_ = -1, signal_fd_ = -1, watch_fd_ = -1;
  std::map<int, Connection> connections_;
  std::map<std::int64_t, store::Job> active_;           ///< every unfinished job
  std::map<std::int64_t, store::JobState> finished_;    ///< end states seen (for --after), cached
  std::set<std::int64_t> cancel_requested_;
  std::set<std::int64_t> hold_requested_;   ///< held while their supervisor waits for GPUs
  std::map<std::int64_t, double> launched_at_;          ///< when each launching job's supervisor was started
  std::set<std::int64_t> dirty_;                        ///< jobs whose changes are not yet in the store
  struct PendingSubmit {
    int fd;
    std::vector<store::Job> jobs;
    bool array;
  };
  std::vector<PendingSubmit> submits_;                  ///< acknowledged after the group commit
  struct Waiter {
    int fd;
    std::vector<std::int64_t> ids;
    nlohmann::json failed;  ///< the ids of the request that named no job (answered with the jobs)
  };
  std::vector<Waiter> waiters_;
  bool stop_ = false;
  bool schedule_needed_ = true;  ///< something changed that may let a queued job start
};

/// Entry point of `gpulane daemon`: `user_mode` picks the per-user paths. Returns the exit code.
int RunDaemon(bool user_mode);

}  // namespace gpulane::daemon
