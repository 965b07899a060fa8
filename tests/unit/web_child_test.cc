// The daemon's gpulane-web supervision (daemon/web_child.h), on a stand-in program: what it logs
// when its child ends, and the back-off before each restart (1 s, doubling to 60 s; back to 1 s
// after a run of a minute or more).
#include "daemon/web_child.h"
#include "support/fixed_gpus.h"
#include "support/recording_spawner.h"

#include <sys/wait.h>

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gpulane::daemon {
namespace {

struct Logged {
  std::vector<std::string> lines;
  std::function<void(const std::string&)> fn() {
    return [this](const std::string& line) { lines.push_back(line); };
  }
  bool Has(const std::string& part) const {
    for (const auto& l : lines)
      if (l.find(part) != std::string::npos) return true;
    return false;
  }
};

// Stop's wait for a child that ignores SIGTERM is timed on the real clock: the children here end.
const os::SystemEnv real_os;
const os::Env& env = real_os.env();

// A child that exits with status 3 at once, as the daemon would see it: reaped, then Reaped().
int ReapOne(WebChild& child, double now_s) {
  int status = 0;
  const pid_t pid = child.pid();
  EXPECT_EQ(waitpid(pid, &status, 0), pid);
  child.Reaped(pid, status, now_s);
  return status;
}

TEST(WebChild, EndsAreLoggedAndRestartsBackOff) {
  Logged log;
  WebChildSpec spec;
  spec.exe = "/bin/sh";
  spec.argv = {"sh", "-c", "exit 3"};
  WebChild child(spec, env, log.fn());
  child.Start(100);
  ASSERT_GT(child.pid(), 0);
  EXPECT_TRUE(log.Has("started gpulane-web (pid ")) << log.lines.back();
  ReapOne(child, 100.5);
  EXPECT_EQ(child.pid(), -1);
  EXPECT_TRUE(log.Has("exited with status 3; starting it again in 1 s")) << log.lines.back();
  child.Tick(101.4);
  EXPECT_EQ(child.pid(), -1) << "not before its back-off";
  child.Tick(101.5);
  ASSERT_GT(child.pid(), 0) << "restarted once the back-off passed";
  ReapOne(child, 102);
  EXPECT_TRUE(log.Has("starting it again in 2 s")) << log.lines.back();
  child.Tick(104);
  ASSERT_GT(child.pid(), 0);
  ReapOne(child, 104.1);
  EXPECT_TRUE(log.Has("starting it again in 4 s")) << log.lines.back();
  child.Tick(108.1);
  ASSERT_GT(child.pid(), 0);
  ReapOne(child, 108.1 + 61);  // it ran over a minute: back to 1 s
  EXPECT_EQ(log.lines.back().find("starting it again in 1 s") != std::string::npos, true) << log.lines.back();
}

TEST(WebChild, StopEndsARunningChildAndReapsIt) {
  Logged log;
  WebChildSpec spec;
  spec.exe = "/bin/sleep";
  spec.argv = {"sleep", "600"};
  WebChild child(spec, env, log.fn());
  child.Start(0);
  const pid_t pid = child.pid();
  ASSERT_GT(pid, 0);
  child.Stop();
  EXPECT_EQ(child.pid(), -1);
  EXPECT_EQ(waitpid(pid, nullptr, WNOHANG), -1) << "already reaped";
  child.Tick(1000);
  EXPECT_EQ(child.pid(), -1) << "a stopped child is not started again";
}

// gpulane-web is started by the spawner of the daemon's Env (os/spawn.h), never by a fork of the
// daemon's own: one that starts nothing leaves no child, and the failure is logged and retried.
TEST(WebChild, ItIsStartedThroughTheEnvsSpawnerAndAFailedStartIsRetried) {
  Logged log;
  test::RecordingSpawner spawner;
  ProcfsProcessTable processes;
  test::NoGpus gpus;
  WebChildSpec spec;
  spec.exe = "/bin/sleep";
  spec.argv = {"sleep", "600"};
  WebChild child(spec, os::Env{env.clock, processes, spawner, gpus, env.files}, log.fn());
  child.Start(100);
  EXPECT_EQ(spawner.starts, 1);
  EXPECT_EQ(child.pid(), -1) << "a child runs: WebChild started it by itself";
  EXPECT_TRUE(log.Has("cannot start gpulane-web: fork: not in this test (RecordingSpawner); trying again in 1 s"))
      << (log.lines.empty() ? "" : log.lines.back());
  child.Tick(101);
  EXPECT_EQ(spawner.starts, 2) << "tried again after the back-off";
}

TEST(WebChild, OffOrMissingBinaryStartsNothing) {
  Logged log;
  Config config;
  config.web_listen = "off";
  EXPECT_EQ(MakeWebChild(config, DaemonPaths{"/tmp/s.sock", "/tmp/state", false}, "/nonexistent/gpulane", {}, env, log.fn()), nullptr);
  EXPECT_TRUE(log.lines.empty());
  config.web_listen = "127.0.0.1:9470";
  EXPECT_EQ(MakeWebChild(config, DaemonPaths{"/tmp/s.sock", "/tmp/state", false}, "/nonexistent/gpulane", {}, env, log.fn()), nullptr);
  EXPECT_TRUE(log.Has("/nonexistent/gpulane-web is missing")) << (log.lines.empty() ? "" : log.lines.back());
}

}  // namespace
}  // namespace gpulane::daemon
