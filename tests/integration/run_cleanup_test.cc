// `gpulane run` leaves nothing behind: a SIGKILLed gpulane (waiting or running) leaves no lease or
// place in line that blocks others, a lease lasts exactly as long as the job's processes, and what
// a job leaves running when its main process ends (also after setsid, also ignoring SIGTERM) is
// ended before gpulane returns.
#include <signal.h>

#include <gtest/gtest.h>

#include <algorithm>

#include "run_support.h"

namespace gpulane::test {
namespace {

// Whether pid still runs the program that `cmdline_part` names (guards against pid reuse).
bool StillRuns(pid_t pid, const std::string& cmdline_part) {
  if (!ProcessExists(pid)) return false;
  std::string cmdline = ReadFile(fmt::format("/proc/{}/cmdline", pid));
  std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
  return cmdline.empty() || Contains(cmdline, cmdline_part);  // empty: a zombie, not gone yet
}

pid_t CleanupReadPid(const fs::path& file) { return static_cast<pid_t>(std::stol(ReadFile(file))); }

// ---- gpulane killed -----------------------------------------------------------------------------

TEST(RunKilled, AWaitingRunKilledWithSigkillLeavesNoPlaceInLine) {
  FakeMachine machine(IdleMachine(1));
  const fs::path log = machine.dir() / "jobs.log";
  const Gate gate(machine.dir() / "gate");
  Child holder = StartRun(machine, Concat({"--"}, HeldJob("holder", log.string(), gate)));
  ASSERT_TRUE(Eventually([&] { return Started(log, "holder"); }, 30)) << holder.ErrSoFar();
  Child killed = StartRun(machine, Concat({"--"}, HeldJob("killed", log.string(), gate)));
  ASSERT_TRUE(Eventually([&] { return SaysWaiting(killed); }, 30)) << killed.ErrSoFar();
  Child next = StartRun(machine, Concat({"--"}, HeldJob("next", log.string(), gate)));
  ASSERT_TRUE(Eventually([&] { return SaysWaiting(next); }, 30)) << next.ErrSoFar();
  EXPECT_TRUE(Contains(LastStatus(next), "2nd in line")) << LastStatus(next);

  killed.Kill(SIGKILL);
  auto k = killed.Wait(30);
  ASSERT_TRUE(k);
  EXPECT_EQ(k->exit_code, 128 + SIGKILL);
  EXPECT_TRUE(Eventually([&] { return Contains(LastStatus(next), "1st in line"); }, 30)) << next.ErrSoFar();

  gate.Open();
  auto r = next.Wait(60);
  ASSERT_TRUE(r) << "the killed run's place in line still blocks: " << next.ErrSoFar();
  EXPECT_EQ(r->exit_code, 0) << r->err;
  EXPECT_TRUE(Started(log, "next"));
  EXPECT_FALSE(Started(log, "killed"));
  auto h = holder.Wait(60);
  ASSERT_TRUE(h);
  EXPECT_EQ(h->exit_code, 0);
  EXPECT_EQ(RunOn(machine, {"-q", "--no-wait", "--", "true"}).exit_code, 0) << "nothing stale blocks a later run";
}

// The lease lives as long as the job, not as long as gpulane: killing gpulane does not free the
// GPU while its job still runs, and the job's end does.
TEST(RunKilled, ARunningRunKilledWithSigkillKeepsTheLeaseUntilItsJobEnds) {
  FakeMachine machine(IdleMachine(1));
  const fs::path log = machine.dir() / "jobs.log", job_pid = machine.dir() / "job.pid";
  const Gate gate(machine.dir() / "gate");
  Child owner = StartRun(machine, {"--", "/bin/sh", "-c",
                                   R"(echo $$ > "$0.tmp"; mv "$0.tmp" "$0"; while [ ! -e "$1" ]; do sleep 0.02; done)",
                                   job_pid.string(), gate.path()});
  ASSERT_TRUE(Eventually([&] { return fs::exists(job_pid); }, 30)) << owner.ErrSoFar();
  const pid_t job = CleanupReadPid(job_pid);
  owner.Kill(SIGKILL);
  auto o = owner.Wait(30);
  ASSERT_TRUE(o);
  EXPECT_EQ(o->exit_code, 128 + SIGKILL);
  ASSERT_TRUE(ProcessExists(job)) << "the job goes on without gpulane";

  Child next = StartRun(machine, Concat({"--"}, HeldJob("next", log.string(), Gate(machine.dir() / "open"))));
  ASSERT_TRUE(Eventually([&] { return SaysWaiting(next); }, 30)) << next.ErrSoFar();
  EXPECT_TRUE(Contains(LastStatus(next), fmt::format("GPU0: leased by {} (job r{})", UserName(geteuid()), owner.pid())))
      << LastStatus(next);
  EXPECT_TRUE(IsError(RunOn(machine, {"--no-wait", "--", "true"}), 5, "leased by"));
  EXPECT_FALSE(Started(log, "next"));

  Gate(machine.dir() / "open").Open();
  gate.Open();  // the orphaned job ends
  auto r = next.Wait(60);
  ASSERT_TRUE(r) << "the GPU was not given back when the job ended: " << next.ErrSoFar();
  EXPECT_EQ(r->exit_code, 0) << r->err;
  EXPECT_TRUE(Started(log, "next"));
  EXPECT_EQ(RunOn(machine, {"-q", "--no-wait", "--", "true"}).exit_code, 0) << "no stale lease blocks a later run";
}

// The lease is held by every process of the job: with gpulane and the job's main process gone, a
// child the job left keeps it until it ends.
TEST(RunKilled, ALeaseLastsWhileAnyProcessOfTheJobRuns) {
  FakeMachine machine(IdleMachine(1));
  const fs::path child_pid = machine.dir() / "child.pid";
  const Gate gate(machine.dir() / "gate");
  // The main process exits at once; its child runs on (until SIGTERM, from gpulane's clean-up).
  Child owner = StartRun(machine, {"--kill-grace", "30s", "--", "/bin/sh", "-c",
                                   R"(sh -c 'trap "" TERM; echo $$ > "$0.tmp"; mv "$0.tmp" "$0"; )"
                                   R"(while [ ! -e "$1" ]; do sleep 0.02; done' "$0" "$1" & )"
                                   R"(while [ ! -e "$0" ]; do sleep 0.02; done; exit 0)",
                                   child_pid.string(), gate.path()});
  ASSERT_TRUE(Eventually([&] { return fs::exists(child_pid); }, 30)) << owner.ErrSoFar();
  owner.Kill(SIGKILL);  // gpulane gone, the main process gone: only the child holds the lease
  ASSERT_TRUE(owner.Wait(30));
  const pid_t leftover = CleanupReadPid(child_pid);
  ASSERT_TRUE(ProcessExists(leftover));
  EXPECT_TRUE(IsError(RunOn(machine, {"--no-wait", "--", "true"}), 5, "leased by"));
  gate.Open();
  EXPECT_TRUE(Eventually([&] { return RunOn(machine, {"-q", "--no-wait", "--", "true"}).exit_code == 0; }, 30));
}

// ---- What the job leaves behind -----------------------------------------------------------------

// The job's main process starts a grandchild that ignores SIGTERM and leaves the session with
// setsid, then exits 0. gpulane ends the grandchild (SIGKILL after the grace) before it returns.
TEST(RunCleanup, ASetsidChildIgnoringSigtermIsKilledBeforeGpulaneReturns) {
  FakeMachine machine(IdleMachine(1));
  const fs::path pid_file = machine.dir() / "escapee.pid";
  RunResult r = RunOn(machine, {"--kill-grace", "0.5s", "--", "/bin/sh", "-c",
                                R"(setsid sh -c 'trap "" TERM; echo $$ > "$0.tmp"; mv "$0.tmp" "$0"; exec sleep 300' "$0" & )"
                                R"(while [ ! -e "$0" ]; do sleep 0.02; done; exit 0)",
                                pid_file.string()});
  EXPECT_EQ(r.exit_code, 0) << "the main process's status: " << r.err;
  ASSERT_TRUE(fs::exists(pid_file)) << r.err;
  const pid_t escapee = CleanupReadPid(pid_file);
  EXPECT_FALSE(StillRuns(escapee, "sleep 300")) << "pid " << escapee << " survived gpulane";
  EXPECT_TRUE(Contains(r.err, "gpulane: ended ") && Contains(r.err, " the job left behind (") &&
              Contains(r.err, " needed SIGKILL)"))
      << r.err;
  EXPECT_EQ(RunOn(machine, {"-q", "--no-wait", "--", "true"}).exit_code, 0) << "and the GPU is free again";
}

TEST(RunCleanup, AGrandchildThatDoubleForkedIsFoundToo) {
  if (fs::exists("/usr/bin/python3") == false && fs::exists("/bin/python3") == false)
    GTEST_SKIP() << "no python3";
  FakeMachine machine(IdleMachine(1));
  const fs::path pid_file = machine.dir() / "orphan.pid";
  // Double fork: the grandchild's parent exits, so it is nobody's child in the job; setsid takes it
  // out of the job's process group and session; it ignores SIGTERM and SIGHUP.
  const char* script = R"(
import os, signal, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        with open(sys.argv[1] + ".tmp", "w") as f:
            f.write(str(os.getpid()))
        os.rename(sys.argv[1] + ".tmp", sys.argv[1])
        time.sleep(300)
    os._exit(0)
while not os.path.exists(sys.argv[1]):
    time.sleep(0.02)
sys.exit(4)
)";
  const std::string python = fs::exists("/usr/bin/python3") ? "/usr/bin/python3" : "/bin/python3";
  RunResult r = RunOn(machine, {"--kill-grace", "0.5s", "--", python, "-c", script, pid_file.string()});
  EXPECT_EQ(r.exit_code, 4) << r.err;
  ASSERT_TRUE(fs::exists(pid_file)) << r.err;
  const pid_t orphan = CleanupReadPid(pid_file);
  EXPECT_FALSE(StillRuns(orphan, "python")) << "pid " << orphan << " survived gpulane";
  EXPECT_TRUE(Contains(r.err, "needed SIGKILL")) << r.err;
}

// A leftover that obeys SIGTERM needs no SIGKILL (and no waiting out the grace period).
TEST(RunCleanup, ALeftoverThatObeysSigtermIsTerminated) {
  FakeMachine machine(IdleMachine(1));
  const fs::path pid_file = machine.dir() / "bg.pid";
  RunResult r = RunOn(machine, {"--kill-grace", "20s", "--", "/bin/sh", "-c",
                                R"(sh -c 'echo $$ > "$0.tmp"; mv "$0.tmp" "$0"; exec sleep 300' "$0" & )"
                                R"(while [ ! -e "$0" ]; do sleep 0.02; done; exit 0)",
                                pid_file.string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  ASSERT_TRUE(fs::exists(pid_file));
  EXPECT_FALSE(StillRuns(CleanupReadPid(pid_file), "sleep 300"));
  // (the count may include a short-lived helper of the shell's, such as its `mv`)
  EXPECT_TRUE(Contains(r.err, "gpulane: ended ") && Contains(r.err, " the job left behind\n")) << r.err;
  EXPECT_FALSE(Contains(r.err, "SIGKILL")) << r.err;

  // -q: the same clean-up, without the note.
  std::error_code ec;
  fs::remove(pid_file, ec);
  r = RunOn(machine, {"-q", "--kill-grace", "20s", "--", "/bin/sh", "-c",
                      R"(sh -c 'echo $$ > "$0.tmp"; mv "$0.tmp" "$0"; exec sleep 300' "$0" & )"
                      R"(while [ ! -e "$0" ]; do sleep 0.02; done; exit 0)",
                      pid_file.string()});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_TRUE(r.err.empty()) << r.err;
  ASSERT_TRUE(fs::exists(pid_file));
  EXPECT_FALSE(StillRuns(CleanupReadPid(pid_file), "sleep 300"));
}

// Killed by a signal, the main process's status still comes back after the clean-up.
TEST(RunCleanup, TheJobsStatusSurvivesTheCleanUp) {
  FakeMachine machine(IdleMachine(1));
  RunResult r = RunOn(machine, {"-q", "--kill-grace", "0.5s", "--", "/bin/sh", "-c",
                                R"(setsid sh -c 'trap "" TERM; exec sleep 300' & kill -KILL $$)"});
  EXPECT_EQ(r.exit_code, 128 + SIGKILL) << r.err;
}

}  // namespace
}  // namespace gpulane::test
