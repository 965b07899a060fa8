// Limits without holes (issue 23, item 9): a time limit holds for every lease, also when the
// lease's own side is gone. Before: after `kill -9` of one's own `gpulane run`, its job ran 35 s
// against a 20 s limits.default_time_limit and kept its lease, and `gpulane _lease` (the Python
// package's lease()) had no time limit at all. Now the lease's own side stops its job at the limit
// (`run`, supervisors, `_lease`), and the daemon stops any lease still alive past its limit, its
// kill grace and a slack (daemon/time_limit_watch.h). Short limits (seconds); every wait is on
// observable state with a deadline. Needs root and setpriv for the second user; skipped otherwise.
#include <signal.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include <fmt/format.h>
#include <unistd.h>

#include "support/daemon_fixture.h"
#include "support/text.h"

namespace gpulane::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

double NowS() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

// A live process that is not a zombie (a reaped or dead-but-unreaped job counts as ended).
bool Running(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const auto close = text.rfind(')');
  return close != std::string::npos && close + 2 < text.size() && text[close + 2] != 'Z';
}

// The lease files of the lease directory (their JSON), live or not.
std::vector<json> Leases(const TestDaemon& d) {
  std::vector<json> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(d.dir() / "leases", ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() < 6 || name.substr(name.size() - 6) != ".lease") continue;
    auto j = json::parse(ReadFile(e.path()), nullptr, false);
    if (!j.is_discarded()) out.push_back(std::move(j));
  }
  return out;
}

pid_t ReadPid(const fs::path& path) {
  const std::string text = ReadFile(path);
  return text.empty() ? 0 : static_cast<pid_t>(std::stol(text));
}

// The users' commands read no config file: [limits] is the machine's (the daemon's file here).
const Env kNoConfig = {{"GPULANE_CONFIG", "\x01unset"}};

class LimitHoles : public ::testing::Test {
 protected:
  // A system daemon ticking every 0.1 s with `limits`, a one-second kill grace.
  void Start(const std::string& limits) {
    if (auto why = TwoTestUsers(&a_, &b_)) GTEST_SKIP() << *why;
    DaemonOptions options;
    options.system_mode = true;
    options.config = limits + "[run]\nkill_grace = \"1s\"\n";
    options.daemon_env = {{"GPULANE_DAEMON_TICK", "0.1"}};
    d_ = std::make_unique<TestDaemon>(options);
  }
  TestUser a_, b_;
  std::unique_ptr<TestDaemon> d_;
};

TEST_F(LimitHoles, KillNineOfOnesOwnRunDoesNotLetItsJobOutliveItsTimeLimit) {
  Start("");
  const fs::path pidfile = d_->UserDir(a_) / "job.pid";
  Child run = d_->StartGpulaneAs(a_, {"run", "-g", "1", "--time-limit", "3s", "--", "sh", "-c", "echo $$ > " + pidfile.string() + "; exec sleep 60"},
                                 kNoConfig);
  ASSERT_TRUE(Eventually([&] { return ReadPid(pidfile) > 0 && !Leases(*d_).empty(); }, 20)) << run.ErrSoFar();
  const pid_t job = ReadPid(pidfile);
  const double started_s = Leases(*d_).front().value("started_s", 0.0);
  EXPECT_EQ(Leases(*d_).front().value("time_limit_s", 0.0), 3.0) << "run's lease carries its limit";
  run.Kill(SIGKILL);  // the owner side is gone before its limit: nothing of it stops the job now
  ASSERT_TRUE(run.Wait(10));
  ASSERT_TRUE(Running(job)) << "the job outlives its gpulane run";
  // limit 3 s + grace 1 s + slack 3 s, then SIGTERM (sleep ends on it): about 7 s after the start.
  ASSERT_TRUE(Eventually([&] { return !Running(job) && Leases(*d_).empty(); }, 20))
      << "the job still runs (or its lease lives) " << NowS() - started_s << " s after its start; daemon log:\n"
      << d_->Log();
  const double ended_after_s = NowS() - started_s;
  EXPECT_GE(ended_after_s, 3.0) << "not before its limit";
  EXPECT_LT(ended_after_s, 15.0) << "limit + grace + slack + a tick, with room for a loaded machine";
  EXPECT_TRUE(Contains(d_->Log(), "past its time limit of 3.0 s (--time-limit)")) << d_->Log();
  // The GPU is free again: another user's --no-wait run gets it.
  RunResult other = d_->GpulaneAs(b_, {"run", "-g", "2", "--no-wait", "--", "true"}, kNoConfig);
  EXPECT_EQ(other.exit_code, 0) << other.err;
}

TEST_F(LimitHoles, ALeaseWrittenWithoutATimeLimitIsStoppedAtTheOwnersDefaultTimeLimit) {
  // The client reads no config (the machine's [limits] are in the daemon's file here, which a user
  // may not use as her own): its lease says no time limit at all, as a lease written by hand would.
  // The daemon applies the owner's default_time_limit.
  Start("[limits]\ndefault_time_limit = \"3s\"\n");
  const fs::path pidfile = d_->UserDir(a_) / "job.pid";
  Child run = d_->StartGpulaneAs(a_, {"run", "-g", "1", "--", "sh", "-c", "echo $$ > " + pidfile.string() + "; exec sleep 60"},
                                 kNoConfig);
  ASSERT_TRUE(Eventually([&] { return ReadPid(pidfile) > 0 && !Leases(*d_).empty(); }, 20)) << run.ErrSoFar();
  const pid_t job = ReadPid(pidfile);
  EXPECT_FALSE(Leases(*d_).front().contains("time_limit_s")) << Leases(*d_).front().dump();
  ASSERT_TRUE(Eventually([&] { return !Running(job) && Leases(*d_).empty(); }, 20)) << d_->Log();
  EXPECT_TRUE(Contains(d_->Log(), "past its time limit of 3.0 s (limits.default_time_limit)")) << d_->Log();
  auto ended = run.Wait(10);
  ASSERT_TRUE(ended);
  EXPECT_NE(ended->exit_code, 0) << "its job was stopped";
}

// `gpulane _lease` as the Python package runs it: a parent process of the user's (here a shell,
// started as her through setpriv) starts it with a pipe on stdin and goes on while the lease lives.
Child StartLeasingShell(const TestDaemon& d, const TestUser& user, const fs::path& pidfile, const std::string& options) {
  std::string setpriv = "/usr/bin/setpriv";
  if (access(setpriv.c_str(), X_OK) != 0) setpriv = "/bin/setpriv";
  return Child({setpriv, fmt::format("--reuid={}", user.uid), fmt::format("--regid={}", user.gid), "--clear-groups", "--",
                "/bin/sh", "-c",
                "echo $$ > " + pidfile.string() + "; sleep 60 | " + GpulaneBinary() + " _lease -g 1 " + options + "; sleep 60"},
               d.env(kNoConfig));
}

// The pid of the `gpulane _lease` child of `parent`, 0 when there is none.
pid_t LeaseChildOf(pid_t parent) {
  const std::string children = ReadFile(fmt::format("/proc/{}/task/{}/children", parent, parent));
  std::istringstream words(children);
  for (long pid = 0; words >> pid;)
    if (Contains(ReadFile(fmt::format("/proc/{}/cmdline", pid)), "_lease")) return static_cast<pid_t>(pid);
  return 0;
}

TEST_F(LimitHoles, ThePythonPackagesLeaseStopsItsProcessAtItsTimeLimit) {
  Start("");
  const fs::path pidfile = d_->UserDir(a_) / "parent.pid";
  Child parent = StartLeasingShell(*d_, a_, pidfile, "--time-limit 2s");
  ASSERT_TRUE(Eventually([&] { return ReadPid(pidfile) > 0 && !Leases(*d_).empty(); }, 20)) << parent.ErrSoFar();
  const double started_s = Leases(*d_).front().value("started_s", 0.0);
  EXPECT_EQ(Leases(*d_).front().value("time_limit_s", 0.0), 2.0) << "the lease carries its limit";
  auto ended = parent.Wait(20);
  ASSERT_TRUE(ended) << "the leasing process still runs " << NowS() - started_s << " s after the lease's start";
  EXPECT_TRUE(Eventually([&] { return Leases(*d_).empty(); }, 5));
  EXPECT_TRUE(Eventually([&] { return Contains(parent.ErrSoFar(), "gpulane: the lease's time limit of 2.0 s is over: its process (pid "); }, 5))
      << parent.ErrSoFar();
  EXPECT_FALSE(Contains(d_->Log(), "time limit: ")) << "its own side stopped it, not the daemon: " << d_->Log();
  EXPECT_GE(NowS() - started_s, 2.0);
}

TEST_F(LimitHoles, AStoppedPythonPackageLeaseIsEndedByTheDaemonAtTheDefaultTimeLimit) {
  Start("[limits]\ndefault_time_limit = \"2s\"\n");
  const fs::path pidfile = d_->UserDir(a_) / "parent.pid";
  Child parent = StartLeasingShell(*d_, a_, pidfile, "");
  ASSERT_TRUE(Eventually([&] { return ReadPid(pidfile) > 0 && !Leases(*d_).empty(); }, 20)) << parent.ErrSoFar();
  // Its holder (`gpulane _lease`) stopped, as SIGSTOP or Ctrl-Z would: it enforces nothing now.
  const pid_t holder = LeaseChildOf(ReadPid(pidfile));
  ASSERT_GT(holder, 0);
  kill(holder, SIGSTOP);
  auto ended = parent.Wait(20);
  ASSERT_TRUE(ended) << "the leasing process still runs; daemon log:\n" << d_->Log();
  EXPECT_TRUE(Eventually([&] { return Leases(*d_).empty() && !Running(holder); }, 10)) << d_->Log();
  EXPECT_TRUE(Contains(d_->Log(), "past its time limit of 2.0 s (limits.default_time_limit)")) << d_->Log();
}

}  // namespace
}  // namespace gpulane::test
