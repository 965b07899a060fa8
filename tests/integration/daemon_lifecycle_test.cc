// Starting and stopping the daemon: the client starts a per-user daemon by itself, a second daemon on
// the same state folder is refused (how `gpulane daemon` says so: one line, exit 10), SIGTERM stops
// the daemon but not the running jobs. A damaged database that stops the start is the daemon's
// decision, tested in-process: DaemonInProcStoreFaults.ADamagedDatabaseStopsTheStartWithAClearMessage;
// so is the rhythm of an idle daemon's loop (once a tick): DaemonInProcLoop.AnIdleDaemonWakesOnceATickNotFourTimesASecond.
#include <signal.h>

#include <gtest/gtest.h>

#include <filesystem>

#include "support/daemon_fixture.h"
#include "support/text.h"

namespace gpulane::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// `gpulane daemon --user` run to its end (30 s at most).
RunResult RunDaemon(const TestDaemon& d) {
  Child daemon({GpulaneBinary(), "daemon", "--user"}, d.env());
  auto r = daemon.Wait(30);
  if (!r) {
    daemon.Kill(SIGKILL);
    ADD_FAILURE() << "the daemon did not stop";
    return RunResult{};
  }
  return *r;
}

TEST(DaemonLifecycle, FirstClientCallStartsAUserDaemon) {
  TestDaemon d({.start = false});
  EXPECT_FALSE(fs::exists(d.socket()));
  const std::int64_t id = d.Submit({"--", "sh", "-c", "echo hi"});
  ASSERT_GT(id, 0);
  RunResult wait = d.Gpulane({"wait", Id(id)});
  EXPECT_EQ(wait.exit_code, 0) << wait.err;
  EXPECT_EQ(d.Gpulane({"logs", Id(id)}).out, "hi\n");
  json ping = d.Call({{"op", "ping"}});
  EXPECT_EQ(ping.value("mode", ""), "user") << ping.dump();
  EXPECT_TRUE(Contains(ReadFile(d.state_dir() / "daemon.log"), "started (user mode)"));
  // Later calls use that daemon instead of starting another.
  const std::int64_t second = d.Submit({"--", "true"});
  EXPECT_EQ(d.Call({{"op", "ping"}}).value("pid", -1), ping.value("pid", -2));
  EXPECT_EQ(second, id + 1);
}

TEST(DaemonLifecycle, SecondDaemonOnTheSameStateIsRefused) {
  TestDaemon d;
  RunResult second = RunDaemon(d);
  EXPECT_EQ(second.exit_code, 10) << second.err;
  EXPECT_TRUE(Contains(second.err, "another gpulane daemon")) << second.err;
  EXPECT_EQ(LineCount(second.err), 1) << second.err;
  EXPECT_EQ(d.Call({{"op", "ping"}}).value("pid", -1), d.pid()) << "the first one goes on";
}

TEST(DaemonLifecycle, SigtermStopsTheDaemonButNotRunningJobs) {
  TestDaemon d;
  const fs::path log = d.work() / "marks.log", gate = d.work() / "gate";
  const std::int64_t id = d.Submit(MarkedJob(log.string(), gate.string(), 4));
  ASSERT_TRUE(d.WaitForState(id, "running"));
  ASSERT_GT(d.pid(), 0);
  kill(d.pid(), SIGTERM);
  EXPECT_EQ(d.WaitForExit(30), 0);
  EXPECT_FALSE(fs::exists(d.socket())) << "the daemon removes its socket";
  EXPECT_TRUE(Contains(d.Log(), "stopped")) << d.Log();
  EXPECT_EQ(d.SupervisorPids().size(), 1u) << "the job's supervisor goes on";
  Touch(gate);
  ASSERT_TRUE(d.Start());
  RunResult wait = d.Gpulane({"wait", Id(id)});
  EXPECT_EQ(wait.exit_code, 4) << wait.out << wait.err;
  EXPECT_EQ(CountMarks(ReadMarks(log), "start", id), 1);
}

}  // namespace
}  // namespace gpulane::test
