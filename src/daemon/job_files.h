#pragma once
// The files through which the daemon and a job's supervisor hand the job over, in <state>/jobs/:
//   <id>.spec.json    the job (written by the daemon before the supervisor starts; 0600)
//   <id>.lock         held (flock) by the supervisor for its whole life: its liveness
//   <id>.status.json  what the supervisor last reported: waiting, running, done (written atomically)
//   <id>.exec         the exec mark: one byte, '0' when the supervisor creates it, overwritten with
//                     '1' by the job's forked child right before its execve (docs/security.md,
//                     "The supervisor window"): the evidence that the job's command may have started
//   <id>.reserve      space the supervisor sets aside while its job runs; when a full disk keeps it
//                     from recording the job's end, the end is written into it and it becomes the
//                     status file (WriteStatusReserved)
// They let a job outlive a daemon restart: the supervisor records the exit status even while no
// daemon runs, and a restarted daemon reads it back.
//
// Spec, status, removal, listing and the lock's probe go through os::FileSystem (os/file_system.h:
// the daemon's and the supervisor's os::Env::files; files in memory in a test). The reserve, its use
// for the end and the exec mark stay on POSIX calls: they are about a file's disk blocks and a
// descriptor the job's child inherits across its fork, which the FileSystem does not model.
#include <signal.h>
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "os/file_system.h"
#include "store/job.h"
#include "util/result.h"

namespace gpulane::daemon {

/// What a supervisor reports.
struct SupervisorStatus {
  std::string phase = "waiting";  ///< "waiting" (for GPUs), "running", "done"
  pid_t pid = 0;                  ///< the supervisor
  std::string reason;             ///< waiting: why; done: what went wrong, if anything
  std::vector<std::string> gpu_uuids;
  std::optional<double> start_time, end_time;
  std::optional<int> exit_code;
  bool timed_out = false;
  /// Stopped because its partition closed (partitions.NAME.ends); with `requeue` it goes back in
  /// line. `reason` says which partition and when.
  bool partition_stopped = false;
  /// Stopped because a waiting job needed its GPUs (submit --preemptible); with `requeue` it goes
  /// back in line. `reason` says for whom.
  bool preempted = false;
  bool requeue = false;
  bool interrupted = false;       ///< ended by a signal before the job started (cancel)
  bool start_failed = false;      ///< the command could not be started
  bool held = false;              ///< gave up its place in line on `gpulane hold`, never started
  store::JobLogs logs;            ///< running, done: the files the job's output goes to, once opened
  /// This supervisor's child marks its exec in <id>.exec, so "running" without that mark means the
  /// job's command never started. False in the status of a supervisor of an older gpulane, whose
  /// "running" always counts as started.
  bool marks_exec = false;
  /// running, done: what device isolation the job was given (Job::isolation; "" = not known yet).
  std::string isolation;
};

/// What the daemon does with a launched or running job whose supervisor holds no lock (it is gone,
/// or has not taken its lock yet), decided from the job's files alone (DecideLostSupervisor).
enum class LostSupervisorAction {
  kCollect,   ///< "done": record the outcome the supervisor wrote
  kFail,      ///< the job's command may have started: record it failed, never start it again
  kRequeue,   ///< the job's command never started: put it back in line at once
  kGrace,     ///< not reported, or waiting for GPUs: a lost launch, requeued once the launch grace is over
};

/// The decision for a job stored as `stored_running` (true: kRunning; false: kLaunching) whose
/// supervisor holds no lock, from its status file (`status`, nullopt when there is none) and its
/// exec mark (`exec_marked`: <id>.exec says '1', whatever the status says: the mark is flushed to
/// disk before the exec, a status is not). A lock nobody holds means no process of the
/// supervisor is left: neither the supervisor nor its forked child before the child's execve (the
/// child shares the lock until then), so nothing can write the mark any more.
LostSupervisorAction DecideLostSupervisor(const std::optional<SupervisorStatus>& status, bool exec_marked,
                                          bool stored_running);

/// The signal the daemon sends a supervisor that waits for GPUs when its job is held: leave the
/// line without starting the job. Ignored once the job runs (never forwarded to it).
inline int HoldSignal() { return SIGRTMIN + 1; }

class JobFiles {
 public:
  /// The files of job `id` in `dir`, read and written through `files`, which must outlive this.
  JobFiles(os::FileSystem& files, std::string dir, std::int64_t id) : files_(files), dir_(std::move(dir)), id_(id) {}
  std::string spec_path() const;
  std::string status_path() const;
  std::string lock_path() const;
  std::string exec_path() const;
  std::string reserve_path() const;

  /// Writes the spec (the whole job, with its environment: store::JobToStoredJson), mode 0600,
  /// durably.
  Status WriteSpec(const store::Job& job) const;
  /// Reads it back through the same codec (store::JobFromJson), also as earlier gpulane versions
  /// wrote it. Errors: kNotFound (no spec file); kInternal "the spec of job N is damaged: " and why
  /// (not JSON, the member the codec could not read, or another job's id).
  Result<store::Job> ReadSpec() const;
  /// Replaces the status atomically (temp file, rename); the final "done" status is also flushed to
  /// disk (fsync of file and folder). After a power loss a job whose "running" record was lost is
  /// queued again, as one that was interrupted.
  Status WriteStatus(const SupervisorStatus& status) const;
  /// Sets `bytes` of the state folder's space aside in <id>.reserve (allocated, not sparse), for
  /// WriteStatusReserved. Errors: kIo (the file is removed again).
  Status Reserve(std::uint64_t bytes) const;
  /// WriteStatus; when that fails and the reserve is there, writes the status into the reserve's
  /// own blocks (flushed) and renames it over the status file, so a job's end is recorded even when
  /// the folder filled up while the job ran, and no other writer can take the room meanwhile. The
  /// reserve is removed once the status is written either way.
  Status WriteStatusReserved(const SupervisorStatus& status) const;
  /// nullopt when there is none yet.
  std::optional<SupervisorStatus> ReadStatus() const;
  /// True while a supervisor holds the lock.
  bool SupervisorAlive() const;
  /// Creates (or resets) the exec mark with '0' and returns a descriptor open for writing
  /// (close-on-exec) through which the job's child writes '1' over that byte: overwriting a byte
  /// already written needs no new space, so a full disk cannot keep the mark from being written.
  /// Errors: kIo.
  Result<int> OpenExecMark() const;
  /// True when the exec mark says '1' (the job's child was about to exec, or did).
  bool ExecMarked() const;
  /// Removes all five files (those that cannot be removed are left).
  void Remove() const;
  /// Removes the status file alone (left when it cannot be removed).
  void RemoveStatus() const;

 private:
  os::FileSystem& files_;
  std::string dir_;
  std::int64_t id_;
};

/// The job id of a file name in the jobs folder ("12.status.json" -> 12), or nullopt.
std::optional<std::int64_t> JobIdOfFile(const std::string& name);
/// The ids of the jobs that have a file in `jobs_dir` (one listing of the folder through `files`);
/// nullopt when it cannot be read.
std::optional<std::set<std::int64_t>> JobIdsWithFiles(os::FileSystem& files, const std::string& jobs_dir);

}  // namespace gpulane::daemon
