#pragma once
// A gpulane daemon in the test's own process (issue 25, item 6): the real daemon::Daemon on a
// temporary state folder with its real SQLite store, fake GPUs, a FakeClock and a launcher that
// records which supervisors it was asked to start. The test drives it from its own thread: a
// request goes in through one end of a socketpair with the peer the test chooses (any user, no
// login needed), and the daemon's loop is turned (Daemon::Step, never waiting) until the reply is
// there. The test plays each job's supervisor as `gpulane _supervise` would: it takes the job's
// lock and writes its status file, which the daemon reads on its inotify event the next turn. No
// sleep, no gpulane binary, no NVML. Built into unit_tests only (it links the core library).
#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "daemon/daemon.h"
#include "daemon/job_files.h"
#include "lease/lease_dir.h"
#include "lease/records.h"
#include "proto/wire.h"
#include "store/job.h"
#include "util/clock.h"
#include "support/fixed_gpus.h"
#include "support/recording_spawner.h"

namespace gpulane::test {

/// `n` idle GPUs of 80 GiB each, nothing running on them, NVML order = PCI order.
GpuSnapshot IdleSnapshot(unsigned n);

/// A client of the daemon as its socket's SO_PEERCRED would name it.
daemon::Peer PeerOf(std::uint32_t uid, const std::string& user, bool admin = false);
/// root (an admin).
daemon::Peer Root();

/// What `gpulane submit` would send, in the fields tests vary.
struct Submission {
  std::vector<std::string> argv = {"true"};
  unsigned gpus = 1;
  std::string name;
  int priority = 0;
  int retries = 0;
  bool hold = false;
  std::vector<std::int64_t> after_ok, after_any;
  std::vector<int> array;  ///< task indices; empty: one job
  std::optional<double> time_limit_s;
  sched::Preemptible preemptible = sched::Preemptible::kNo;
  std::vector<std::string> env = {"PATH=/usr/bin:/bin"};  ///< the submitter's environment
};

class InProcDaemonTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  // ---- the daemon -------------------------------------------------------------------------------
  /// Starts a daemon on the state folder (a second one after Crash or Restart: the same folder).
  void StartDaemon();
  /// The same, but a daemon that refuses to start is no test failure: its Start's status (the
  /// line `gpulane daemon` would print), and no daemon is left.
  Status TryStartDaemon();
  /// Stops it as SIGTERM does (Daemon::Stop), then starts a new one on the same folder.
  void Restart();
  /// Ends it without its clean stop, as a kill -9 would leave the folder (supervisors' locks and
  /// status files stay; the socket file too).
  void Crash();
  /// `turns` turns of the loop, none of them waiting.
  void Turn(int turns = 3);
  /// The request's reply (the loop turned until it is there; a failed assertion after 60 s). A
  /// request larger than the socket's buffer is written on as the daemon reads it.
  nlohmann::json Call(const daemon::Peer& peer, nlohmann::json request);
  /// A streamed reply ("stream" in the request): its header, and in *body the parts up to its
  /// empty frame, joined.
  nlohmann::json CallStreamed(const daemon::Peer& peer, nlohmann::json request, std::string* body);
  /// One frame whose payload is `payload` as it is (no "v" added: any bytes a client could send);
  /// the reply.
  nlohmann::json CallRaw(const daemon::Peer& peer, const std::string& payload);

  // ---- connections of the test's own (several at once, requests pipelined) ----------------------
  /// A new connection of `peer` to the daemon: the test's end of it.
  int Connect(const daemon::Peer& peer);
  /// The same through the connection caps, as Daemon::Accept takes one (AdmitConnection, then
  /// AddConnection): a refused one's end holds the daemon's error reply, then its close.
  int ConnectCapped(const daemon::Peer& peer);
  /// Writes `bytes` on the test's end `fd`, turning the loop while the socket's buffer is full
  /// (replies that come meanwhile are kept for Read).
  void Send(int fd, const std::string& bytes);
  /// The next reply frame's payload on `fd`, the loop turned until it is there; nullopt (no test
  /// failure) when the daemon closed the connection or none came in `timeout_s`.
  std::optional<std::string> ReadPayload(int fd, double timeout_s = 60);
  /// The same, parsed (null when not JSON).
  std::optional<nlohmann::json> Read(int fd, double timeout_s = 60);
  /// Whether something of a reply (or the daemon's close) is there on `fd` now; the loop is not
  /// turned.
  bool Readable(int fd);
  /// Closes the test's end, as a client that goes away does.
  void Disconnect(int fd);
  /// Shuts the test's end for writing, as a client that has sent all it will send does (`printf
  /// ... | socat - UNIX:...`): it can still read the replies.
  void ShutdownWrite(int fd);
  /// Whether the daemon closes `fd` (its replies read and kept for Read), the loop turned until it
  /// does or `timeout_s` (real seconds) passed; the clock is not moved.
  bool ClosedByDaemon(int fd, double timeout_s = 10);
  /// A request as a client frames it ("v" added).
  static std::string FrameOf(nlohmann::json request);
  /// One frame of `payload` as it is.
  static std::string RawFrame(const std::string& payload);

  // ---- what a user does and sees ------------------------------------------------------------------
  /// Submits as `peer`; the ids of the reply (the job's, or the array's tasks'), or none when
  /// refused (the reply then in *refused).
  std::vector<std::int64_t> Submit(const daemon::Peer& peer, const Submission& s, nlohmann::json* refused = nullptr);
  /// The submit request Submit sends for `s` (for a test that edits the spec as a client could).
  nlohmann::json SubmitRequest(const Submission& s) const;
  std::int64_t SubmitOne(const Submission& s = {}) { auto ids = Submit(Root(), s); return ids.empty() ? 0 : ids.front(); }
  /// cancel, hold or release of `ids` by `peer`: the reply.
  nlohmann::json Control(const daemon::Peer& peer, const std::string& op, const std::vector<std::int64_t>& ids);
  /// The job's state as `gpulane show --json` gives it ("" when show refuses).
  std::string State(std::int64_t id);
  /// show's whole job object (of an array's id, that of its task 0, whose id it is).
  nlohmann::json ShowJob(std::int64_t id);
  /// The job's state as stored in jobs.db, read through a second connection to the file ("" when
  /// it has no row): what survives a crash.
  std::string StoredState(std::int64_t id);
  /// `gpulane queue --json` as `peer`, with the request's other fields (all, user, limit) from
  /// `fields`: the reply's jobs (null, and a test failure, when refused).
  nlohmann::json Queue(const daemon::Peer& peer, const nlohmann::json& fields = nlohmann::json::object());

  // ---- the sampler (config_.telemetry_enabled set before StartDaemon) ------------------------
  /// Turns the loop (asking the sampler "telemetry") until the sampler's latest sample is one
  /// taken at clock_'s time now (a failed assertion after 10 s): what gpus_ and the lease
  /// directory held then is in it, and the daemon has taken what the sampler handed over (idle
  /// cancels, `gpulane run` leases' use). A sampler takes its first sample as it starts: after
  /// StartDaemon or Restart, this waits for it. The FakeClock only.
  void WaitForSample();
  /// Moves clock_ one telemetry.interval on and waits for the sample taken then (WaitForSample).
  void SampleNow() {
    clock_.Advance(config_.telemetry_interval_s);
    WaitForSample();
  }
  /// Plays a lease's owner (a job's supervisor, `gpulane run`): creates a live lease file for
  /// `record` in the daemon's lease directory, its lock held by this process. Unless `record` says
  /// otherwise: its pid this process's, started now; its owner (uid, user) is this process's, as
  /// for any lease file. The file's name; held until ReleaseLease or the test's end.
  std::string HoldLease(lease::LeaseRecord record);
  /// Lets go of lease `name` as its owner does at its job's end (the file removed, its lock gone).
  void ReleaseLease(const std::string& name);
  /// The "usage" reply for `fields` ({"job_id": "12"}, or {"lease": name, "ending": true} as the
  /// lease's owner asks as its job ends) asked by `peer`.
  nlohmann::json Usage(const nlohmann::json& fields, const daemon::Peer& peer = Root());

  // ---- the daemon's log -------------------------------------------------------------------------
  /// From now on, what the daemon writes to its log (stderr) is kept for Logged() (gtest's capture).
  void CaptureLog();
  /// What it logged since CaptureLog (or the last Logged); the capture goes on.
  std::string Logged();

  // ---- the supervisors ------------------------------------------------------------------------
  /// Ids the daemon asked the launcher to start, in order (over every daemon of the test).
  const std::vector<std::int64_t>& Launched() const { return launched_; }
  /// The signals the daemon sent job `id`'s supervisor, in order (a cancel's SIGTERM, a hold's).
  std::vector<int> SignalsTo(std::int64_t id) const;
  /// Plays job `id`'s supervisor waiting in the lease line: takes its lock and reports "waiting"
  /// with `reason` (what `gpulane _supervise` writes before its job has its GPUs).
  void Waiting(std::int64_t id, const std::string& reason);
  /// Plays job `id`'s supervisor: takes its lock and reports it running on `gpu_uuids`.
  void Running(std::int64_t id, std::vector<std::string> gpu_uuids = {});
  /// Reports it done with `exit_code` (and what `edit` changes of that status: timed out, say) and
  /// lets go of its lock.
  void Done(std::int64_t id, int exit_code, const std::function<void(daemon::SupervisorStatus&)>& edit = {});
  /// Lets go of its lock without a word, as a supervisor killed with SIGKILL does.
  void Vanish(std::int64_t id);
  /// Running, Done and the turns that read them.
  void RunToEnd(std::int64_t id, int exit_code) {
    Running(id);
    Done(id, exit_code);
    Turn();
  }

  std::filesystem::path dir_;
  FakeClock clock_;
  /// Set before StartDaemon: the daemon reads the real clocks instead of clock_ (for the tests of
  /// how long its loop's turns take, whose parts are cut by a time budget and whose ticks are
  /// real seconds apart).
  bool real_clock_ = false;
  SystemClock system_clock_;
  ProcfsProcessTable processes_;  ///< the real /proc, as the daemon's own (os/env.h)
  RecordingSpawner spawner_;      ///< starts nothing (the launcher records supervisors; no gpulane-web)
  /// The machine's GPUs: gpu_count_ idle ones (IdleSnapshot) unless the test set others before
  /// the first StartDaemon; a test changes them whenever it likes (gpus_.Edit, RaiseXid), and a
  /// restarted daemon finds them as they are.
  LiveGpus gpus_;
  /// The daemon's parts' history store (opened with telemetry on): the real one at the path it is
  /// given, unless a test sets another before StartDaemon.
  std::function<Result<std::unique_ptr<store::HistoryStore>>(const std::string& path)> open_history_ =
      [](const std::string& path) { return store::HistoryStore::Open(path); };
  os::SystemFileSystem files_;   ///< the real files: the job store beside them is a real SQLite file
  os::Env env_{clock_, processes_, spawner_, gpus_, files_};
  os::Env real_env_{system_clock_, processes_, spawner_, gpus_, files_};
  Config config_;
  daemon::DaemonSettings settings_;
  unsigned gpu_count_ = 2;
  daemon::DaemonPaths paths_;
  std::unique_ptr<daemon::Daemon> daemon_;
  std::vector<std::int64_t> launched_;
  std::vector<std::pair<std::int64_t, int>> signalled_;  ///< (job id, signal), every daemon of the test
  std::map<std::int64_t, int> locks_;  ///< job id -> the lock descriptor this test holds as its supervisor
  std::unique_ptr<lease::LeaseDir> lease_dir_;     ///< HoldLease's (its descriptor is the files')
  std::map<std::string, lease::HeldFile> leases_;  ///< HoldLease's files, by name
  sigset_t saved_mask_{};
  bool capturing_log_ = false;

 private:
  struct Client {
    proto::FrameReader reader{std::size_t{1} << 30};
    bool closed = false;  ///< the daemon closed its end
  };
  std::map<int, Client> clients_;  ///< the test's ends of Connect's connections
  /// Reads what is there on `fd` into its reader (never waits).
  void Drain(int fd);
  /// Sends `request` as `peer` and turns the loop until its reply's frames are there.
  std::vector<std::string> Exchange(const daemon::Peer& peer, const std::string& bytes, bool streamed);
};

}  // namespace gpulane::test
