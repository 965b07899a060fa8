// Which daemon a command talks to, as a user would check: with a system daemon installed but down,
// commands wait a moment for it and then fail with exit 10 instead of starting a private per-user
// daemon; without one and with an empty state, reading commands answer "empty" or "no job" and only
// submit starts the per-user daemon (a state with jobs: tests/integration/user_daemon_test.cc);
// wait and logs -f outlive a daemon restart; status and pick never wait for a down system daemon.
#include <dirent.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fmt/format.h>
#include <sstream>

#include "daemon/paths.h"
#include "support/daemon_fixture.h"
#include "support/text.h"

namespace gpulane::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Clients of an installed system daemon give up on it after 0.2 s instead of 5 s.
const Env kQuickGiveUp = {{"GPULANE_SYSTEM_DAEMON_WAIT", "0.2"}};

constexpr const char* kSystemDown = "the gpulane system daemon is not running";

// No client started a per-user daemon: nothing listens on the socket, no state folder (a per-user
// daemon's start creates it and its daemon.log before anything else), no `gpulane daemon --user`.
::testing::AssertionResult NoDaemonStarted(const TestDaemon& d) {
  if (fs::exists(d.socket())) return ::testing::AssertionFailure() << d.socket() << " exists";
  if (fs::exists(d.state_dir())) return ::testing::AssertionFailure() << d.state_dir() << " exists";
  if (!d.UserDaemonPids().empty()) return ::testing::AssertionFailure() << "a gpulane daemon --user runs";
  return ::testing::AssertionSuccess();
}

// True when process `pid` holds a connected Unix socket (the client side of a call to the daemon).
bool HoldsAConnectedSocket(pid_t pid) {
  std::vector<std::string> inodes;
  const std::string fd_dir = fmt::format("/proc/{}/fd", pid);
  if (DIR* d = opendir(fd_dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::error_code ec;
      const std::string target = fs::read_symlink(fd_dir + "/" + e->d_name, ec).string();
      if (!ec && target.rfind("socket:[", 0) == 0) inodes.push_back(target.substr(8, target.size() - 9));
    }
    closedir(d);
  }
  // /proc/net/unix: "Num RefCount Protocol Flags Type St Inode Path"; St 03 is connected.
  for (const auto& line : Lines(ReadFile("/proc/net/unix"))) {
    std::istringstream words(line);
    std::string num, refs, protocol, flags, type, state, inode;
    words >> num >> refs >> protocol >> flags >> type >> state >> inode;
    if (state == "03" && std::find(inodes.begin(), inodes.end(), inode) != inodes.end()) return true;
  }
  return false;
}

// The command name of process `pid` ("" once it is gone).
std::string CommandName(pid_t pid) {
  auto lines = Lines(ReadFile(fmt::format("/proc/{}/comm", pid)));
  return lines.empty() ? "" : lines.front();
}

// ---- a system daemon installed but down -------------------------------------------------------

TEST(DaemonDiscovery, SubmitWithTheSystemDaemonDownFailsWithExit10AndStartsNoDaemon) {
  TestDaemon d({.system_mode = true, .start = false});
  RunResult r = d.Gpulane({"submit", "--", "true"}, kQuickGiveUp);
  EXPECT_TRUE(IsGpulaneError(r, 10, kSystemDown));
  EXPECT_TRUE(Contains(r.err, "no answer on " + d.socket())) << r.err;
  // The fix named is one this machine has: systemctl only where a gpulane unit is installed.
  if (daemon::SystemUnitInstalled()) EXPECT_TRUE(Contains(r.err, "'systemctl start gpulane'")) << r.err;
  else EXPECT_TRUE(Contains(r.err, "GPULANE_SYSTEM_DAEMON=1 gpulane daemon") && !Contains(r.err, "systemctl")) << r.err;
  EXPECT_TRUE(NoDaemonStarted(d));
}

TEST(DaemonDiscovery, ReadingCommandsWithTheSystemDaemonDownFailWithExit10AndStartNoDaemon) {
  TestDaemon d({.system_mode = true, .start = false});
  for (std::vector<std::string> args : {std::vector<std::string>{"queue"}, {"queue", "--json"}, {"show", "12"},
                                        {"wait", "12"}, {"logs", "12"}, {"logs", "-f", "12"}, {"cancel", "12"},
                                        {"hold", "12"}, {"release", "12"}}) {
    RunResult r = d.Gpulane(args, kQuickGiveUp);
    EXPECT_TRUE(IsGpulaneError(r, 10, kSystemDown)) << "gpulane " << args.front() << " " << args.back();
  }
  EXPECT_TRUE(NoDaemonStarted(d));
}

TEST(DaemonDiscovery, DaemonModeSystemInTheMachinesConfigMeansTheSystemDaemon) {
  if (geteuid() != 0) GTEST_SKIP() << "daemon.mode is read from root's own file only (the test's GPULANE_CONFIG)";
  TestDaemon d({.config = "[daemon]\nmode = \"system\"\n", .start = false});
  Env env = kQuickGiveUp;
  env["GPULANE_SYSTEM_DAEMON"] = "\x01unset";
  EXPECT_TRUE(IsGpulaneError(d.Gpulane({"submit", "--", "true"}, env), 10, kSystemDown));
  EXPECT_TRUE(NoDaemonStarted(d));
}

TEST(DaemonDiscovery, TheSystemSocketNamedInGpulaneSocketNeverGetsAPerUserDaemon) {
  TestDaemon d({.start = false});
  if (RawConnection("/run/gpulane/gpulane.sock").connected()) GTEST_SKIP() << "a system daemon runs on this machine";
  const bool socket_was_there = fs::exists("/run/gpulane/gpulane.sock");
  Env env = kQuickGiveUp;
  env["GPULANE_SOCKET"] = "/run/gpulane/gpulane.sock";  // GPULANE_SYSTEM_DAEMON stays 0
  EXPECT_TRUE(IsGpulaneError(d.Gpulane({"submit", "--", "true"}, env), 10, kSystemDown));
  EXPECT_TRUE(NoDaemonStarted(d));
  const bool socket_is_there = fs::exists("/run/gpulane/gpulane.sock");
  EXPECT_EQ(socket_is_there, socket_was_there) << "a client made a daemon listen on the system socket";
  if (socket_is_there && !socket_was_there) {  // the daemon that made it ended with the test (its tag)
    d.KillEverything();
    fs::remove("/run/gpulane/gpulane.sock");
  }
}

TEST(DaemonDiscovery, StatusAndPickDoNotWaitForADownSystemDaemon) {
  TestDaemon d({.system_mode = true, .start = false});
  // Were they to wait for the daemon, they would wait ten minutes: the 20 s limits below end them.
  const Env patient = {{"GPULANE_SYSTEM_DAEMON_WAIT", "600"}};
  RunResult status = d.Gpulane({"status", "--json"}, patient, 20);
  EXPECT_EQ(status.exit_code, 0) << status.err;
  EXPECT_EQ(json::parse(status.out, nullptr, false)["gpus"].size(), 2u) << status.out;
  RunResult pick = d.Gpulane({"pick", "--share-foreign", "-n", "2"}, patient, 20);
  EXPECT_EQ(pick.exit_code, 0) << pick.err;
  EXPECT_EQ(pick.out, "0,1\n");
  EXPECT_TRUE(NoDaemonStarted(d));
}

// ---- a system daemon installed and restarting -------------------------------------------------

TEST(DaemonDiscovery, ClientsStartedWhileTheSystemDaemonIsDownAreServedOnceItIsBack) {
  TestDaemon d({.system_mode = true});
  const std::int64_t before = d.Submit({"--hold", "--", "true"});
  ASSERT_GT(before, 0);
  d.Kill9();  // its socket file stays, nobody answers: a crash, systemd restarts it in 2 s
  const Env patient = {{"GPULANE_SYSTEM_DAEMON_WAIT", "60"}};
  Child submit = d.StartGpulane({"submit", "--", "true"}, patient);
  Child queue = d.StartGpulane({"queue", "--json"}, patient);
  // Both run gpulane itself by now; the daemon takes far longer to start than they need to reach
  // their first try.
  ASSERT_TRUE(Eventually([&] { return CommandName(submit.pid()) == "gpulane" && CommandName(queue.pid()) == "gpulane"; }));
  EXPECT_FALSE(submit.Wait(0)) << "submit gave up: " << submit.ErrSoFar();
  EXPECT_FALSE(queue.Wait(0)) << "queue gave up: " << queue.ErrSoFar();
  ASSERT_TRUE(d.Start()) << "a client took the socket for a daemon of its own";
  auto s = submit.Wait(30);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->exit_code, 0) << s->err;
  EXPECT_EQ(s->err, "");
  EXPECT_EQ(s->out, Id(before + 1) + "\n") << "served by the system daemon, whose ids go on";
  auto q = queue.Wait(30);
  ASSERT_TRUE(q);
  EXPECT_EQ(q->exit_code, 0) << q->err;
  json jobs = json::parse(q->out, nullptr, false);
  ASSERT_TRUE(jobs.is_array() && !jobs.empty()) << q->out;
  EXPECT_EQ(jobs[0]["id"], before);
  EXPECT_EQ(d.Call({{"op", "ping"}}).value("mode", ""), "system");
  EXPECT_TRUE(d.UserDaemonPids().empty());
}

// `wait` and `logs -f` connected to the daemon when it is killed finish once it is back: the
// system daemon comes back by systemd (the test's Start here), and they start none while it is
// away; a per-user daemon is started again by them (its state holds their job), once.
void WaitAndFollowOutliveTheDaemon(bool system_mode) {
  TestDaemon d({.system_mode = system_mode});
  const fs::path gate = d.work() / "gate";
  const std::int64_t id = d.Submit({"--", "sh", "-c", "echo first; while [ ! -e \"$0\" ]; do sleep 0.05; done; echo second",
                                    gate.string()});
  ASSERT_GT(id, 0);
  Child wait = d.StartGpulane({"wait", Id(id)}, kQuickGiveUp);
  ASSERT_TRUE(Eventually([&] { return HoldsAConnectedSocket(wait.pid()); }, 30)) << wait.ErrSoFar();
  Child follow = d.StartGpulane({"logs", "-f", Id(id)}, kQuickGiveUp);
  ASSERT_TRUE(Eventually([&] { return follow.OutSoFar() == "first\n"; }, 30)) << follow.ErrSoFar();
  d.Kill9();
  if (system_mode) {
    // Each has found no daemon at least once since (that is when the old client started its own).
    const std::string waiting = "went away; waiting up to 10 minutes for it to come back";
    ASSERT_TRUE(Eventually([&] { return Contains(wait.ErrSoFar(), waiting) && Contains(follow.ErrSoFar(), waiting); }, 30))
        << wait.ErrSoFar() << follow.ErrSoFar();
    EXPECT_FALSE(fs::exists(d.state_dir() / "daemon.log")) << "a client started a per-user daemon";
    EXPECT_TRUE(d.UserDaemonPids().empty());
    EXPECT_FALSE(RawConnection(d.socket()).connected()) << "something answers on the socket";
    ASSERT_TRUE(d.Start());  // systemd
  } else {
    ASSERT_TRUE(Eventually([&] { return RawConnection(d.socket()).connected(); }, 30)) << wait.ErrSoFar() << follow.ErrSoFar();
  }
  Touch(gate);
  auto w = wait.Wait(30);
  ASSERT_TRUE(w) << "wait did not end with the job";
  EXPECT_EQ(w->exit_code, 0) << w->err;
  EXPECT_EQ(w->out, Id(id) + " completed 0\n");
  EXPECT_EQ(LineCount(w->err), system_mode ? 1 : LineCount(w->err)) << w->err;
  EXPECT_LE(LineCount(w->err), 1) << w->err;
  auto f = follow.Wait(30);
  ASSERT_TRUE(f) << "logs -f did not end with the job";
  EXPECT_EQ(f->exit_code, 0) << f->err;
  EXPECT_EQ(f->out, "first\nsecond\n");
  if (!system_mode) {  // whichever of the two found it gone first started it
    EXPECT_TRUE(Contains(w->err + f->err, "your gpulane daemon was not running; started it again")) << w->err << f->err;
  }
  EXPECT_TRUE(d.UserDaemonPids().size() == (system_mode ? 0u : 1u)) << "one daemon: the test's, or the one they started";
}

TEST(DaemonDiscovery, WaitAndLogsFollowOutliveASystemDaemonRestartWithoutStartingADaemon) {
  WaitAndFollowOutliveTheDaemon(true);
}

TEST(DaemonDiscovery, WaitAndLogsFollowStartTheirKilledPerUserDaemonAgainOnce) {
  WaitAndFollowOutliveTheDaemon(false);
}

// ---- no system daemon installed ---------------------------------------------------------------

TEST(DaemonDiscovery, WithoutAnyDaemonQueueIsEmptyJobsAreUnknownAndOnlySubmitStartsOne) {
  TestDaemon d({.start = false});
  RunResult table = d.Gpulane({"queue"});
  EXPECT_EQ(table.exit_code, 0) << table.err;
  EXPECT_EQ(table.err, "");
  ASSERT_EQ(LineCount(table.out), 1) << table.out;
  for (const char* column : {"ID", "USER", "NAME", "GPUS", "STATE", "AGE"}) EXPECT_TRUE(Contains(table.out, column)) << table.out;
  RunResult as_json = d.Gpulane({"queue", "--json"});
  EXPECT_EQ(as_json.exit_code, 0) << as_json.err;
  EXPECT_EQ(as_json.out, "[]\n");
  EXPECT_EQ(d.Gpulane({"queue", "--all"}).out, table.out);
  for (std::vector<std::string> args : {std::vector<std::string>{"show", "12"}, {"wait", "12"}, {"logs", "12"},
                                        {"logs", "-f", "12"}, {"cancel", "12"}, {"hold", "12"}, {"release", "12"}}) {
    EXPECT_TRUE(IsGpulaneError(d.Gpulane(args), 8, "no job 12: no gpulane daemon is running"))
        << "gpulane " << args.front() << " " << args.back();
  }
  EXPECT_TRUE(IsGpulaneError(d.Gpulane({"cancel", "--name", "train"}), 8,
                             "no queued or running job matches --name train: no gpulane daemon is running"));
  EXPECT_TRUE(NoDaemonStarted(d));

  const std::int64_t id = d.Submit({"--", "true"});
  ASSERT_GT(id, 0);
  EXPECT_EQ(d.Call({{"op", "ping"}}).value("mode", ""), "user");
  EXPECT_EQ(d.Gpulane({"wait", Id(id)}).exit_code, 0);
  // Counted once the job has ended: while the daemon starts its supervisor, the forked child has
  // the daemon's command line until it execs.
  EXPECT_EQ(d.UserDaemonPids().size(), 1u);
}

}  // namespace
}  // namespace gpulane::test
