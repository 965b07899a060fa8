// Hostile users against the shared lease directory and the per-user socket (issue 9, items 8-10),
// through the real binary: every lease and ticket file is written by some user, so what it says
// must not decide for another user (lease/lease_dir.h, "Threat model"); and a client must not tell
// a daemon that is neither root nor itself anything (daemon/paths.h).
//
// Each test is named after the attack it replays; each would fail before the fix (said in its
// comment) and shows a positive outcome after it, with no sleep to synchronise. The two-user parts
// need root (files and processes of another user: nobody, uid 65534) and are skipped otherwise.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <ctime>
#include <filesystem>
#include <fmt/format.h>

#include "integration/run_support.h"
#include "support/daemon_fixture.h"
#include "support/planted.h"

namespace gpulane::test {
namespace {

constexpr std::uint32_t kNobody = 65534;

// Whose a planted file is: another user's (nobody's) as root; else the test's own (still no root's:
// what a user may not vouch for holds for her own files too).
std::optional<std::uint32_t> Attacker() { return geteuid() == 0 ? std::optional(kNobody) : std::nullopt; }

// The id of the ticket `pid` (a waiting gpulane run) holds, "" when it holds none.
std::string TicketIdOf(const FakeMachine& machine, pid_t pid) {
  for (const json& t : LeaseDirRecords(machine, ".wait"))
    if (t.value("pid", 0) == pid) return t.value("id", "");
  return "";
}

json Request(json fields) {
  json r = {{"count", 1}, {"share_foreign", false}, {"order", "memory"}, {"priority", 0}, {"gpu_list", ""}};
  for (auto& [k, v] : fields.items()) r[k] = v;
  return r;
}

// A waiting run takes its decision from the ticket it holds, not from another file with its id.
// Before: the victim took the decision of the forged ticket (first in line by its priority), a
// share of GPU0 next to the foreign process there, and ran its exclusive job on GPU0 at once.
TEST(LeaseForgery, ATicketCopyingAWaitersIdDoesNotDecideForIt) {
  json state = IdleMachine(2);
  SleepProcess foreign;  // someone's work on GPU0, outside gpulane
  AddProcess(state["devices"][0], foreign.pid(), 10 * kGiB);
  FakeMachine machine(state);
  const Gate gate(machine.dir() / "gate");
  const fs::path log = machine.dir() / "jobs.log";
  std::vector<std::string> held = {"--gpus", "1", "--"};
  for (const auto& a : HeldJob("holder", log.string(), gate)) held.push_back(a);
  Child holder = StartRun(machine, held);
  ASSERT_TRUE(Eventually([&] { return CountEvents(log, "start") == 1; }, 30)) << holder.ErrSoFar();
  Child victim = StartRun(machine, {"-g", "1", "--", "printenv", "CUDA_VISIBLE_DEVICES"});
  ASSERT_TRUE(Eventually([&] { return SaysWaiting(victim); }, 30)) << victim.ErrSoFar();
  const std::string id = TicketIdOf(machine, victim.pid());
  ASSERT_FALSE(id.empty());

  const json forged = {{"id", id}, {"seq", 1}, {"pid", victim.pid()},
                       {"request", Request({{"priority", 1000}, {"mem_bytes", kGiB}, {"share_foreign", true},
                                            {"allowed_uuids", {state["devices"][0]["uuid"]}}})}};
  PlantedFile copy(machine.dir() / "leases" / "w00000000000000000001.forged01.wait", forged.dump(),
                   PlantedFile::Holder::kTest, Attacker());
  gate.Open();  // GPU1 frees up: the victim's own ticket gets it
  auto done = victim.Wait(60);
  ASSERT_TRUE(done) << victim.ErrSoFar();
  EXPECT_EQ(done->exit_code, 0) << done->err;
  EXPECT_EQ(done->out, "1\n") << "the victim ran on the GPU its own ticket was granted, not on the busy GPU0";
  ASSERT_TRUE(holder.Wait(60));
}

// The attack of a ticket that stands first in line by what it says: a priority only admins may
// give (through the system daemon) or a seq from long ago. Before: it held GPU0 for itself and the
// victim waited behind it forever ("held for an earlier request") while nobody used the GPU.
void ExpectTheVictimIsServedFirst(int forged_priority, std::uint64_t forged_seq) {
  FakeMachine machine(IdleMachine(1));
  const Gate gate(machine.dir() / "gate");
  const fs::path log = machine.dir() / "jobs.log";
  std::vector<std::string> held = {"--"};
  for (const auto& a : HeldJob("holder", log.string(), gate)) held.push_back(a);
  Child holder = StartRun(machine, held);
  ASSERT_TRUE(Eventually([&] { return CountEvents(log, "start") == 1; }, 30)) << holder.ErrSoFar();
  Child victim = StartRun(machine, {"--", "printenv", "CUDA_VISIBLE_DEVICES"});
  ASSERT_TRUE(Eventually([&] { return SaysWaiting(victim); }, 30)) << victim.ErrSoFar();

  const json forged = {{"id", "w00000000000000000001.forged02"}, {"seq", forged_seq}, {"pid", getpid()},
                       {"request", Request({{"priority", forged_priority}})}};
  PlantedFile ticket(machine.dir() / "leases" / "w00000000000000000001.forged02.wait", forged.dump(),
                     PlantedFile::Holder::kTest, Attacker());
  gate.Open();
  auto done = victim.Wait(60);
  ASSERT_TRUE(done) << "the victim still waits behind the forged ticket: " << LastStatus(victim);
  EXPECT_EQ(done->exit_code, 0) << done->err;
  EXPECT_EQ(done->out, "0\n");
  ASSERT_TRUE(holder.Wait(60));
}

TEST(LeaseForgery, AForgedHighPriorityTicketDoesNotJumpTheLine) {
  ExpectTheVictimIsServedFirst(1000, static_cast<std::uint64_t>(time(nullptr)) * 1000000000ULL);
}

TEST(LeaseForgery, AForgedEarlySeqTicketDoesNotJumpTheLine) { ExpectTheVictimIsServedFirst(0, 1); }

// A shared lease of GPU0 whose "pid" is an ancestor of the GPU process there (here the test, the
// parent of its sleep; on a real server sshd or a login shell, everybody's ancestor).
json SharedLeaseOfGpu0(const json& state, pid_t pid) {
  return {{"job_id", "r1"}, {"pid", pid}, {"pgid", 0}, {"command", "decoy"}, {"started_s", 1.0},
          {"gpus", {{{"uuid", state["devices"][0]["uuid"]}, {"mem_bytes", 2 * kGiB}}}}};
}

// Forged lease pid (item 9): another user's lease naming a common ancestor of this user's GPU
// process. Before: the process counted as that lease's, so GPU0, busy with it, was handed out
// to a shared request that does not share with foreign processes.
TEST(LeaseForgery, AForgedLeasePidDoesNotMakeAnotherUsersGpuProcessLeased) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root: a lease file of another user";
  json state = IdleMachine(1);
  SleepProcess mine;  // root's (the test's) work on GPU0
  AddProcess(state["devices"][0], mine.pid(), 10 * kGiB);
  FakeMachine machine(state);
  const fs::path leases = machine.dir() / "leases";
  {  // Control: root's own lease naming its own process's ancestor does own it.
    PlantedFile own = PlantLease(leases, SharedLeaseOfGpu0(state, getpid()));
    RunResult r = RunOn(machine, {"--no-wait", "--mem", "1GiB", "--", "printenv", "CUDA_VISIBLE_DEVICES"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
  }
  PlantedFile forged(leases / "r1.forged03.lease", SharedLeaseOfGpu0(state, getpid()).dump(), PlantedFile::Holder::kTest,
                     kNobody);
  RunResult r = RunOn(machine, {"--no-wait", "--mem", "1GiB", "--", "printenv", "CUDA_VISIBLE_DEVICES"});
  EXPECT_TRUE(IsError(r, 5, fmt::format("GPU0: in use by root's sleep (pid {})", mine.pid())));
}

// The same user's lease whose "pid" the process holding its lock does not vouch for (no
// descendant of it). Before: the pid written in the file decided, and the process was the lease's.
TEST(LeaseForgery, ALeasePidThatItsLockHolderDoesNotVouchForOwnsNothing) {
  json state = IdleMachine(1);
  SleepProcess mine;
  AddProcess(state["devices"][0], mine.pid(), 10 * kGiB);
  FakeMachine machine(state);
  const fs::path leases = machine.dir() / "leases";
  const std::vector<std::string> shared = {"--no-wait", "--mem", "1GiB", "--", "true"};
  {  // Control: held by the test itself, the process it names (itself) is vouched for.
    PlantedFile held(leases / "r1.control4.lease", SharedLeaseOfGpu0(state, getpid()).dump(), PlantedFile::Holder::kTest);
    RunResult r = RunOn(machine, shared);
    EXPECT_EQ(r.exit_code, 0) << r.err;
  }
  PlantedFile forged(leases / "r1.forged04.lease", SharedLeaseOfGpu0(state, getpid()).dump(), PlantedFile::Holder::kChild);
  RunResult r = RunOn(machine, shared);
  EXPECT_TRUE(IsError(r, 5, fmt::format("(pid {})", mine.pid()))) << "the sleep is foreign to the lease";
}

// ---- /tmp squatting (item 10) -------------------------------------------------------------------

// A process of another user listening on a socket (a fake daemon): reports how many bytes the
// first client to connect sent before it closed (0: nothing).
class FakeDaemon {
 public:
  FakeDaemon(const fs::path& socket, std::uint32_t uid) {
    int ready[2];
    if (pipe2(ready, O_CLOEXEC) != 0 || pipe2(report_, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
    const pid_t test = getpid();
    pid_ = fork();
    if (pid_ == 0) {
      if (setgid(uid) != 0 || setuid(uid) != 0) _exit(126);
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != test) _exit(1);
      sockaddr_un addr{};
      addr.sun_family = AF_UNIX;
      std::strncpy(addr.sun_path, socket.c_str(), sizeof addr.sun_path - 1);
      int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
      if (bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(s, 4) != 0) _exit(2);
      chmod(socket.c_str(), 0777);
      if (write(ready[1], "r", 1) != 1) _exit(3);
      int c = accept(s, nullptr, nullptr);
      char buf[65536];
      long n = c < 0 ? -1 : static_cast<long>(read(c, buf, sizeof buf));
      if (write(report_[1], &n, sizeof n) != sizeof n) _exit(4);
      _exit(0);
    }
    close(ready[1]);
    close(report_[1]);
    char r = 0;
    started_ = read(ready[0], &r, 1) == 1;
    close(ready[0]);
  }
  ~FakeDaemon() {
    close(report_[0]);
    KillAndReap(pid_);
  }
  bool started() const { return started_; }
  /// Bytes the first client sent; nullopt when none connected within `timeout_s`.
  std::optional<long> BytesReceived(double timeout_s) {
    pollfd p{report_[0], POLLIN, 0};
    long n = 0;
    if (poll(&p, 1, static_cast<int>(timeout_s * 1000)) != 1 || read(report_[0], &n, sizeof n) != sizeof n) return std::nullopt;
    return n;
  }

 private:
  pid_t pid_ = -1;
  int report_[2] = {-1, -1};
  bool started_ = false;
};

// A fake daemon of another user on the socket a client asks. Before: `submit` sent it the job with
// its environment (here a token), then waited for its reply.
TEST(TmpSquatting, AFakeDaemonOfAnotherUserIsToldNothing) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root: a process of another user";
  FakeMachine machine(IdleMachine(1));
  char tmpl[] = "/tmp/gpulane-squatted-XXXXXX";  // a folder nobody may write to, as /tmp/gpulane-<uid> would be
  const fs::path dir = mkdtemp(tmpl);
  ASSERT_EQ(chown(dir.c_str(), kNobody, kNobody), 0);
  ASSERT_EQ(chmod(dir.c_str(), 0755), 0);
  struct RemoveAtEnd {
    fs::path dir;
    ~RemoveAtEnd() { fs::remove_all(dir); }
  } remove{dir};
  const fs::path socket = dir / "gpulane.sock";
  FakeDaemon fake(socket, kNobody);
  ASSERT_TRUE(fake.started());
  RunResult r = RunGpulane({"submit", "--", "true"}, RunEnv(machine, {{"GPULANE_SOCKET", socket.string()},
                                                                      {"GPULANE_SYSTEM_DAEMON", "0"},
                                                                      {"SECRET_TOKEN", "hunter2"}}));
  EXPECT_TRUE(IsError(r, 7, fmt::format("the process listening on {} runs as nobody (uid {}), not as root or you",
                                        socket.string(), kNobody)));
  const std::optional<long> sent = fake.BytesReceived(30);
  ASSERT_TRUE(sent) << "the client never connected";
  EXPECT_EQ(*sent, 0) << "the client sent the fake daemon its request";
}

// /tmp/gpulane-<uid> made by another user first (or a symlink, or open to others): a client
// without XDG_RUNTIME_DIR refuses it before connecting. Before: it connected to whatever listened
// there and sent it the submission.
TEST(TmpSquatting, APreCreatedTmpFolderOfAnotherOwnerOrModeIsRefused) {
  if (!CanSwitchUsers()) GTEST_SKIP() << "needs root and setpriv to act as a test user";
  if (fs::exists("/run/gpulane/gpulane.sock")) GTEST_SKIP() << "a system daemon's socket exists here";
  std::string why;
  auto victim = EnsureTestUser("gpulane-test-a", &why);
  if (!victim) GTEST_SKIP() << why;
  TestDaemon d(DaemonOptions{.system_mode = true, .start = false});  // folders the test user may enter
  const fs::path dir = fmt::format("/tmp/gpulane-{}", victim->uid);
  fs::remove_all(dir);
  const Env no_runtime_dir = {{"XDG_RUNTIME_DIR", "\x01unset"}, {"GPULANE_SOCKET", "\x01unset"},
                              {"GPULANE_STATE_DIR", d.state_dir().string()}, {"GPULANE_SYSTEM_DAEMON", "0"}};
  auto submit = [&] { return d.GpulaneAs(*victim, {"submit", "--", "true"}, no_runtime_dir); };

  fs::create_directory(dir);
  ASSERT_EQ(chown(dir.c_str(), kNobody, kNobody), 0);
  ASSERT_EQ(chmod(dir.c_str(), 0777), 0);
  EXPECT_TRUE(IsError(submit(), 7, fmt::format("{} belongs to nobody (uid {}), not you", dir.string(), kNobody)));
  fs::remove_all(dir);

  fs::create_directory_symlink(d.dir(), dir);
  EXPECT_TRUE(IsError(submit(), 7, fmt::format("{} is a symbolic link", dir.string())));
  fs::remove(dir);

  fs::create_directory(dir);
  ASSERT_EQ(chown(dir.c_str(), victim->uid, victim->gid), 0);
  ASSERT_EQ(chmod(dir.c_str(), 0755), 0);
  EXPECT_TRUE(IsError(submit(), 7, fmt::format("{} has mode 0755, not 0700", dir.string())));
  fs::remove_all(dir);
  EXPECT_TRUE(d.UserDaemonPids().empty()) << "no daemon was started in a folder that is not the user's";
}

}  // namespace
}  // namespace gpulane::test
