// The daemon's connection caps, in-process (tests/support/inproc_daemon.h): one user opening
// connections without end is cut off at the per-uid cap while another user and root still get in,
// past the global cap only root's reserve is left, connections that close make room again, and the
// refusals are logged; the daemon raises its descriptor limit at its start. The connections go
// through Daemon::AdmitConnection, the check Accept makes of each peer's uid (ConnectCapped), with
// peers of any uid: no test users, no setpriv. Were
// DaemonConnections.OneUserFloodingConnectionsIsCappedWhileAnotherStillConnects through the binary;
// what the CLI says of a refused connection (one line, exit 10) stays there as
// DaemonConnections.OverTheConnectionCapTheCliSaysSoWithExit10.
#include <sys/resource.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "support/error_reply.h"
#include "support/inproc_daemon.h"
#include "support/text.h"

namespace gpulane::test {
namespace {

using nlohmann::json;

class DaemonInProcConnectionCaps : public InProcDaemonTest {
 protected:
  // A new connection of `peer` through the caps whose ping is answered: its end (-1, and a test
  // failure, when refused).
  int ConnectAndPing(const daemon::Peer& peer) {
    const int c = ConnectCapped(peer);
    if (Readable(c)) {  // refused: its error and close are there before anything is sent
      auto refusal = Read(c, 1);
      ADD_FAILURE() << "refused: " << (refusal ? refusal->dump() : std::string("closed"));
      return -1;
    }
    Send(c, FrameOf({{"op", "ping"}}));
    auto pong = Read(c, 30);
    if (!pong || !pong->value("ok", false)) {
      ADD_FAILURE() << "no pong: " << (pong ? pong->dump() : "nothing");
      return -1;
    }
    return c;
  }
  // A new connection of `peer` through the caps is refused with `part` in its one error line, then
  // closed (nothing sent on it: the daemon answers at once and closes).
  ::testing::AssertionResult Refused(const daemon::Peer& peer, const std::string& part) {
    const int c = ConnectCapped(peer);
    ::testing::AssertionResult error = IsErrorReply(Read(c, 30), "unavailable", part);
    if (!error) return error;
    if (!ClosedByDaemon(c)) return ::testing::AssertionFailure() << "refused but not closed";
    Disconnect(c);
    return ::testing::AssertionSuccess();
  }
};

// 20 connections in all, of which 2 (20 / 8) are root's alone: users share 18; 8 a user.
TEST_F(DaemonInProcConnectionCaps, OneUserFloodingConnectionsIsCappedWhileAnotherStillConnects) {
  settings_.max_connections = 20;
  settings_.max_connections_per_uid = 8;
  StartDaemon();
  CaptureLog();
  const daemon::Peer a = PeerOf(1001, "alice"), b = PeerOf(1002, "bob");
  std::vector<int> of_a, of_root;
  for (int i = 0; i < 8; ++i) {
    of_a.push_back(ConnectAndPing(a));
    ASSERT_GE(of_a.back(), 0) << "connection " << i + 1 << " of 8";
  }
  EXPECT_TRUE(Refused(a, "uid 1001 already has 8 connections"));
  EXPECT_GE(ConnectAndPing(b), 0) << "another user still connects";
  for (int i = 0; i < 9; ++i) {
    of_root.push_back(ConnectAndPing(Root()));
    ASSERT_GE(of_root.back(), 0) << "root's connection " << i + 1;
  }
  // 18 open: users are at the global cap (b is under its own), root is not.
  EXPECT_TRUE(Refused(b, "has 18 connections, its limit"));
  for (int i = 0; i < 2; ++i) EXPECT_GE(ConnectAndPing(Root()), 0) << "root's reserve, connection " << i + 1;
  EXPECT_TRUE(Refused(Root(), "has 20 connections, its limit"));
  // Connections that close make room again, once the daemon has read their close.
  for (int i = 0; i < 3; ++i) Disconnect(of_a[i]);
  Turn();
  const int root_ping = ConnectAndPing(Root());
  EXPECT_GE(root_ping, 0) << "root gets in once three of alice's have closed";
  Disconnect(root_ping);
  Turn();
  EXPECT_GE(ConnectAndPing(a), 0) << "and alice again, under her 8";
  const std::string log = Logged();
  EXPECT_TRUE(Contains(log, "refused a connection: uid 1001 over its limit of 8")) << log;
  EXPECT_TRUE(Contains(log, "refused a connection: over the limit of 18 connections")) << log;
  EXPECT_TRUE(Contains(log, "refused a connection: over the limit of 20 connections")) << log;
}

// Was the last check of the binary test: the daemon raises its soft RLIMIT_NOFILE to the hard
// limit at its start (here the test's own process's, restored after).
TEST_F(DaemonInProcConnectionCaps, TheDaemonRaisesItsDescriptorLimitToTheHardOne) {
  rlimit before{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &before), 0);
  if (before.rlim_max < 512 || before.rlim_max == RLIM_INFINITY) GTEST_SKIP() << "hard limit " << before.rlim_max;
  rlimit lowered = before;
  lowered.rlim_cur = 256;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &lowered), 0);
  StartDaemon();
  rlimit after{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &after), 0);
  EXPECT_EQ(after.rlim_cur, before.rlim_max) << "the soft limit raised from 256 to the hard one";
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &before), 0);
}

}  // namespace
}  // namespace gpulane::test
