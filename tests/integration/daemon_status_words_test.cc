// `gpulane daemon status` says only what is true (a new user's findings): a per-user daemon whose
// gpulane-web has no port yet was shown "not listening yet on 127.0.0.1:0" (port 0: a port the
// kernel has not picked yet), and a stopped daemon with no jobs in its state was said to be
// started by `gpulane queue`, which starts it only while its state holds jobs.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>

#include "support/daemon_fixture.h"
#include "support/harness.h"
#include "support/text.h"

namespace gpulane::test {
namespace {

namespace fs = std::filesystem;

// No daemon, nothing in its state: `queue` does not start it (the daemon still does not answer
// after it), and status names `submit`, which does.
TEST(DaemonStatusWords, AStoppedDaemonWithNoJobsIsStartedBySubmitNotQueue) {
  FakeMachine machine(IdleGpus(1));
  const Env env = machine.env();
  RunResult queue = RunGpulane({"queue"}, env);
  ASSERT_EQ(queue.exit_code, 0) << queue.err;
  RunResult status = RunGpulane({"daemon", "status"}, env);
  EXPECT_EQ(status.exit_code, 10) << "gpulane queue started no daemon: " << status.out;
  EXPECT_TRUE(Contains(status.out, "start:     gpulane submit starts it (its state holds no jobs, so no other command does)"))
      << status.out;
  EXPECT_FALSE(Contains(status.out, "(gpulane queue) starts it")) << status.out;
}

// A per-user daemon whose gpulane-web has not reported a port (here one that never does: a
// stand-in beside a copy of gpulane) on the default "127.0.0.1:0": status says it serves no web
// port yet, never "127.0.0.1:0" as if that were an address.
TEST(DaemonStatusWords, ADashboardWithoutAPortYetIsNotShownAsPortZero) {
  FakeMachine machine(IdleGpus(1));
  const fs::path bin = machine.dir() / "bin";
  fs::create_directories(bin);
  fs::copy_file(GpulaneBinary(), bin / "gpulane");
  {
    std::ofstream web(bin / "gpulane-web");
    web << "#!/bin/sh\nexec sleep 600\n";
  }
  fs::permissions(bin / "gpulane-web", fs::perms::owner_all);
  const fs::path config = machine.dir() / "config.toml";
  std::ofstream(config) << "[telemetry]\nenabled = false\n[web]\nlisten = \"127.0.0.1:0\"\n";
  Env env = machine.env();
  env["GPULANE_CONFIG"] = config.string();
  Child daemon({(bin / "gpulane").string(), "daemon", "--user"}, env);
  RunResult status;
  ASSERT_TRUE(Eventually([&] {
    status = RunGpulane({"daemon", "status"}, env);
    return status.exit_code == 0;
  }, 30)) << status.out << status.err << daemon.ErrSoFar();
  EXPECT_TRUE(Contains(status.out, "dashboard: not serving a web port yet (gpulane-web gets one on 127.0.0.1 from the "
                                   "kernel once it listens; the daemon's log says why it has not)\n"))
      << status.out;
  EXPECT_FALSE(Contains(status.out, "127.0.0.1:0")) << status.out;
  daemon.Kill(SIGTERM);
  EXPECT_TRUE(daemon.Wait(30).has_value()) << "the daemon stops on SIGTERM";
}

}  // namespace
}  // namespace gpulane::test
