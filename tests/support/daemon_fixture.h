#pragma once
// Test support for the daemon tests (tests/integration/daemon_*_test.cc): a gpulane daemon run as a
// background Child against a FakeMachine, clients run in a working folder of the test, a raw
// connection to the daemon's socket for protocol tests, test users for the two-user tests, and a
// clean-up that ends the daemon, every supervisor it started and every job (supervisors are
// detached, so they are found by their command line and the jobs by a tag in their environment).
#include <sys/types.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/harness.h"

namespace gpulane::test {

/// `n` idle H200s cloned from the recorded one (nothing in use), NVML order = PCI order.
nlohmann::json IdleGpus(unsigned n);

/// A gpulane error as users see it: exit `code`, nothing on stdout, exactly one line on stderr,
/// "gpulane: error: ...", containing `part`.
::testing::AssertionResult IsGpulaneError(const RunResult& r, int code, const std::string& part);

/// A job (argv) that appends "start <job id> <epoch seconds> <CUDA_VISIBLE_DEVICES>" to `log`, waits
/// until the file `gate` exists (when given) or `sleep_s` passed, appends the same "end" line and
/// exits with `exit_code`. Each line is one O_APPEND write.
std::vector<std::string> MarkedJob(const std::string& log, const std::string& gate = "", int exit_code = 0,
                                   double sleep_s = 0);

/// One line of a MarkedJob log.
struct Mark {
  std::string kind;  ///< "start" or "end"
  std::int64_t id = 0;
  double time = 0;
  std::string gpus;  ///< CUDA_VISIBLE_DEVICES
};
std::vector<Mark> ReadMarks(const std::filesystem::path& log);
/// How many marks of `kind` job `id` left.
int CountMarks(const std::vector<Mark>& marks, const std::string& kind, std::int64_t id);

/// Creates the file `path` (a gate for MarkedJob).
void Touch(const std::filesystem::path& path);

/// A login of this machine that tests act as (created by EnsureTestUser).
struct TestUser {
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;
};

/// Running as root with setpriv available (the two-user tests skip otherwise).
bool CanSwitchUsers();
/// A non-root user named `name`, created (useradd, no home, no group of its own) when missing;
/// nullopt (with the reason in *why) when that is not possible.
std::optional<TestUser> EnsureTestUser(const std::string& name, std::string* why);
/// The two users the two-user tests act as (gpulane-test-a and -b, through setpriv as root): fills
/// *a and *b, or returns why the test is skipped (not root, no setpriv, no user could be made).
std::optional<std::string> TwoTestUsers(TestUser* a, TestUser* b);

struct DaemonOptions {
  /// The fake NVML state; default: two idle H200s.
  std::optional<nlohmann::json> state;
  /// A system-mode daemon (`gpulane daemon` as root, not --user); the test folders are opened
  /// (0755, the lease folder 1777) so that other users reach the socket.
  bool system_mode = false;
  /// Contents of the config file (GPULANE_CONFIG) the daemon and clients read. Without a
  /// [telemetry] table, "[telemetry] enabled = false" is added (no sampler, no usage lines in logs);
  /// without a [web] table, "[web] listen = \"off\"" (no gpulane-web).
  std::string config;
  /// Start the daemon in the constructor (and wait until it answers).
  bool start = true;
  /// Extra environment of the daemon alone (not of clients), e.g. the test knobs
  /// GPULANE_DAEMON_REQUEUE_GRACE, GPULANE_DAEMON_READ_TIMEOUT, GPULANE_DAEMON_TICK (docs/config.md).
  Env daemon_env;
};

/// One framed connection to the daemon's socket, speaking the wire protocol byte by byte.
class RawConnection {
 public:
  explicit RawConnection(const std::string& socket_path);
  /// Takes over a connected socket (the server's end, for a test that plays the daemon).
  explicit RawConnection(int connected_fd) : fd_(connected_fd) {}
  ~RawConnection();
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;
  bool connected() const { return fd_ >= 0; }
  /// Sends bytes as they are; false when the daemon has closed the connection.
  bool Send(const std::string& bytes);
  /// Sends one frame (4-byte big-endian length + payload).
  bool SendFrame(const std::string& payload);
  /// Reads one reply frame within `timeout_s`; nullopt on time-out, close or a reply that is not JSON.
  std::optional<nlohmann::json> Read(double timeout_s);
  /// Reads one frame's payload as it is (a part of a streamed reply); nullopt on time-out or close.
  std::optional<std::string> ReadPayload(double timeout_s);
  /// True when the daemon closes the connection within `timeout_s` (any bytes before are dropped).
  bool ClosedByPeer(double timeout_s);
  /// Half-closes the sending side.
  void ShutdownWrite();
  /// True when a reply (or the daemon's close) is there to be read now; never waits.
  bool Readable();

 private:
  int fd_ = -1;
  std::string buffer_;
};

/// A connection to `socket_path` made by a child process running as `user` (so that the daemon's
/// SO_PEERCRED says that user), handed to this process; not connected() when that failed.
std::unique_ptr<RawConnection> ConnectAs(const std::string& socket_path, const TestUser& user);

/// A frame: the 4-byte big-endian length of `payload`, then `payload`.
std::string Frame(const std::string& payload);

class TestDaemon {
 public:
  explicit TestDaemon(DaemonOptions options = {});
  ~TestDaemon();
  TestDaemon(const TestDaemon&) = delete;
  TestDaemon& operator=(const TestDaemon&) = delete;

  /// Starts the daemon and waits (up to 30 s) until it answers a ping; false (and a test failure)
  /// when it does not.
  bool Start();
  /// kill -9 of the daemon; returns once it is reaped. Supervisors and jobs go on.
  void Kill9();
  /// Waits up to `timeout_s` for the daemon to end by itself; its exit code, or nullopt.
  std::optional<int> WaitForExit(double timeout_s);
  /// The daemon's pid (from its ping), -1 when not started.
  pid_t pid() const;
  /// What the daemon has written to stderr (its log) so far, across restarts.
  std::string Log() const;

  FakeMachine& machine() { return *machine_; }
  const std::filesystem::path& dir() const { return machine_->dir(); }
  /// The working folder of submissions (jobs write their logs and marks there).
  std::filesystem::path work() const { return dir() / "work"; }
  std::filesystem::path state_dir() const { return dir() / "state"; }
  std::string socket() const { return (dir() / "gpulane.sock").string(); }
  /// The client environment: the machine, the socket and state folder, the config file, the tag.
  Env env(const Env& extra = {}) const;

  /// `gpulane ARGS...` run in `cwd` (default work()) to the end.
  RunResult Gpulane(const std::vector<std::string>& args, const Env& extra = {}, double timeout_s = 60,
                    const std::string& cwd = "") const;
  /// The same as `user` (setpriv), in that user's folder work()/<name>.
  RunResult GpulaneAs(const TestUser& user, const std::vector<std::string>& args, const Env& extra = {},
                      double timeout_s = 60) const;
  /// The same in the background.
  Child StartGpulaneAs(const TestUser& user, const std::vector<std::string>& args, const Env& extra = {}) const;
  /// `gpulane ARGS...` in the background, in work().
  Child StartGpulane(const std::vector<std::string>& args, const Env& extra = {}) const;
  /// A folder work()/<name> owned by `user` (created on first use).
  std::filesystem::path UserDir(const TestUser& user) const;

  /// `gpulane submit ARGS...`: the job id it printed, or -1 (and a test failure).
  std::int64_t Submit(const std::vector<std::string>& args, const Env& extra = {}) const;
  /// `gpulane queue --json ARGS...` (an empty array, and a test failure, when it fails).
  nlohmann::json Queue(const std::vector<std::string>& args = {}) const;
  /// `gpulane show --json ID`: job ID (for an array's id, which shows every task, its first task);
  /// null, and a test failure, when it fails.
  nlohmann::json Show(std::int64_t id) const;
  /// The state of job number `id` through the socket ("" when the daemon does not know it).
  std::string State(std::int64_t id) const;
  /// Waits until the job is in `state` (through the socket, every 20 ms).
  bool WaitForState(std::int64_t id, const std::string& state, double timeout_s = 30) const;
  /// True once job `id`'s reason (show) contains `part`, within `timeout_s` (polled, as WaitForState).
  bool WaitForReason(std::int64_t id, const std::string& part, double timeout_s = 30) const;

  /// One request straight over the socket ("v": 2 added when the request has no "v"). The reply, or
  /// {"transport_error": "..."} when none came within `timeout_s`.
  nlohmann::json Call(nlohmann::json request, double timeout_s = 30) const;
  /// A submit request for `argv` run in work() with this process's environment plus `env`.
  nlohmann::json SubmitRequest(const std::vector<std::string>& argv, bool hold = false,
                               const std::vector<std::string>& env = {}) const;

  /// A round trip through the daemon (a ping on a new connection). Every request sent to it in
  /// full before has been read and handled when this returns, and the daemon has since run a whole
  /// turn of its loop (launches, answers to waiters, replies written): it accepts connections in
  /// order and reads all readable ones in each turn. False (and a test failure) without a reply.
  bool Barrier() const;
  /// Submits a job that needs every GPU and waits until it has run to its end. Jobs are launched
  /// in line order and take GPUs in line order, so once it has run, every job queued (or
  /// released) before it that could start has started and ended: a positive event that proves
  /// the daemon had its chance to start a job that must not start. Only when no earlier job waits
  /// for GPUs it never gets. False (and a test failure) when it did not complete.
  bool RunJobNeedingEveryGpu() const;
  /// Pids of live processes of this test's jobs: tagged ones that are not gpulane (daemon,
  /// supervisors, clients).
  std::vector<pid_t> JobPids() const;

  /// Pids of live supervisors of this daemon (`gpulane _supervise <state>/jobs ...`).
  std::vector<pid_t> SupervisorPids() const;
  /// Pids of live processes started for this test (daemon, supervisors, clients, jobs).
  std::vector<pid_t> TaggedPids() const;
  /// Pids of live `gpulane daemon --user` processes started for this test (by the fixture or a client).
  std::vector<pid_t> UserDaemonPids() const;
  /// Ends the daemon, every supervisor and every job of this test (SIGKILL).
  void KillEverything();

 private:
  DaemonOptions options_;
  std::unique_ptr<FakeMachine> machine_;
  std::string tag_;
  std::vector<std::unique_ptr<Child>> daemons_;  ///< every daemon started (the last one is current)
  pid_t pid_ = -1;
};

/// `gpulane submit --array INDICES ARGS...`: the array's id (its first task's job id), or -1 and a
/// failure.
inline std::int64_t SubmitArray(const TestDaemon& d, const std::string& indices, std::vector<std::string> args) {
  args.insert(args.begin(), {"submit", "--array", indices});
  RunResult r = d.Gpulane(args);
  if (r.exit_code != 0) {
    ADD_FAILURE() << "gpulane submit --array " << indices << " failed: exit " << r.exit_code << ": " << r.err;
    return -1;
  }
  return std::stoll(r.out);
}

}  // namespace gpulane::test
