// Hostile users against the shared lease directory (issue 9, items 8 and 9), through the real
// binary: every lease and ticket file is written by some user, so what it says must not decide for
// another user (lease/lease_dir.h, "Threat model").
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

}  // namespace
}  // namespace gpulane::test
