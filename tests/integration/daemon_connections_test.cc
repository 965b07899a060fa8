// Attacks on the daemon's connections (issue 9, item 3) through the binary: what the CLI says of a
// connection the daemon refuses at its cap (one line, exit 10). The caps (per uid, in all, root's
// reserve), the raised descriptor limit, a request trickled a byte at a time past the read
// time-out, partial requests over the memory budget and idle connections are the daemon's
// decisions, tested in-process: tests/unit/daemon_inproc_connection_caps_test.cc and
// daemon_inproc_connections_test.cc.
#include <unistd.h>

#include <gtest/gtest.h>

#include <memory>

#include "support/daemon_fixture.h"
#include "support/text.h"

namespace gpulane::test {
namespace {

// A ping on `c` is answered.
::testing::AssertionResult Pings(RawConnection& c) {
  if (!c.connected()) return ::testing::AssertionFailure() << "not connected";
  if (!c.SendFrame(R"({"v":2,"op":"ping"})")) return ::testing::AssertionFailure() << "cannot send";
  auto pong = c.Read(30);
  if (pong && pong->value("ok", false)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "no pong: " << (pong ? pong->dump() : "nothing");
}

// A refused connection as the user sees it: the CLI says so in one line and exits 10. With
// GPULANE_DAEMON_MAX_CONNECTIONS at 1 (no root reserve: 1 / 8 is 0), the test's one open connection
// fills the daemon, whoever runs the CLI. The caps themselves (per uid, in all, root's reserve, the
// room made by closes, the log lines, the raised RLIMIT_NOFILE) are the daemon's decisions, tested
// in-process with peers of any uid: DaemonInProcConnectionCaps.
TEST(DaemonConnections, OverTheConnectionCapTheCliSaysSoWithExit10) {
  TestDaemon d({.daemon_env = {{"GPULANE_DAEMON_MAX_CONNECTIONS", "1"}}});
  // The fixture's own check that the daemon is up may still hold the one place until the daemon
  // has read its close.
  std::unique_ptr<RawConnection> held;
  ASSERT_TRUE(Eventually([&] {
    held = std::make_unique<RawConnection>(d.socket());
    return static_cast<bool>(Pings(*held));
  }, 10));
  EXPECT_TRUE(IsGpulaneError(d.Gpulane({"queue"}), 10, "connections"));
  EXPECT_TRUE(Contains(d.Log(), "refused a connection: over the limit of 1 connections")) << d.Log();
}

}  // namespace
}  // namespace gpulane::test
