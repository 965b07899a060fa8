// Attacks on the daemon's connections (issue 9, item 3): a client trickling a request a byte at a
// time, one user opening connections without end, clients holding large partial requests, and
// connections left open doing nothing. Each is cut off by a limit (DaemonSettings, shortened here
// through the GPULANE_DAEMON_* knobs) while everyone else goes on being served.
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <fmt/format.h>
#include <fstream>
#include <memory>
#include <sstream>
#include <vector>

#include "support/daemon_fixture.h"
#include "support/text.h"

namespace gpulane::test {
namespace {

using nlohmann::json;

double Seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

::testing::AssertionResult IsErrorReply(const std::optional<json>& reply, const std::string& code,
                                        const std::string& part) {
  if (!reply) return ::testing::AssertionFailure() << "no reply";
  if (reply->value("ok", true) == false && reply->value("code", "") == code && Contains(reply->value("error", ""), part) &&
      reply->value("error", "").find('\n') == std::string::npos)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "expected a " << code << " error containing '" << part << "', got "
                                       << reply->dump().substr(0, 400);
}

// A ping on `c` is answered.
::testing::AssertionResult Pings(RawConnection& c) {
  if (!c.connected()) return ::testing::AssertionFailure() << "not connected";
  if (!c.SendFrame(R"({"v":2,"op":"ping"})")) return ::testing::AssertionFailure() << "cannot send";
  auto pong = c.Read(30);
  if (pong && pong->value("ok", false)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "no pong: " << (pong ? pong->dump() : "nothing");
}

// A ping request of exactly `n` bytes (padded).
std::string PingOfSize(std::size_t n) {
  const std::string head = R"({"v":2,"op":"ping","pad":")", tail = "\"}";
  return head + std::string(n - head.size() - tail.size(), 'p') + tail;
}

// A request sent one byte every 100 ms (each wait is for the daemon's reply, which ends it): the
// read time-out counts from the first byte, so the trickle is cut at 1 s instead of lasting forever.
TEST(DaemonConnections, TricklingARequestOneByteAtATimeIsCutAtTheDeadline) {
  TestDaemon d({.daemon_env = {{"GPULANE_DAEMON_READ_TIMEOUT", "1s"}, {"GPULANE_DAEMON_TICK", "50ms"}}});
  RawConnection c(d.socket());
  const std::string frame = Frame(PingOfSize(200));
  const double start = Seconds();
  std::optional<json> reply;
  std::size_t sent = 0;
  while (!reply && sent < frame.size() && Seconds() - start < 20) {
    if (!c.Send(frame.substr(sent++, 1))) break;
    reply = c.Read(0.1);
  }
  const double waited = Seconds() - start;
  ASSERT_LT(sent, frame.size()) << "the whole request went through, a byte every 100 ms for " << waited << " s";
  EXPECT_TRUE(IsErrorReply(reply, "timeout", "from its first byte"));
  EXPECT_GE(waited, 1.0);
  EXPECT_LT(waited, 4.0) << "cut at the 1 s deadline, though a byte came every 100 ms";
  EXPECT_TRUE(c.ClosedByPeer(10));
  RawConnection other(d.socket());
  EXPECT_TRUE(Pings(other));
}

// One user opening connections beyond the per-uid cap is refused (one error line, then closed) while
// another user and root still connect; past the global cap only root gets in; and the daemon runs
// with its descriptor limit raised to the hard limit.
TEST(DaemonConnections, OneUserFloodingConnectionsIsCappedWhileAnotherStillConnects) {
  TestUser a, b;
  if (auto why = TwoTestUsers(&a, &b)) GTEST_SKIP() << *why;
  // 20 in all, of which 2 (20 / 8) are root's alone: users share 18.
  TestDaemon d({.system_mode = true,
                .daemon_env = {{"GPULANE_DAEMON_MAX_CONNECTIONS", "20"}, {"GPULANE_DAEMON_MAX_CONNECTIONS_PER_UID", "8"}}});
  std::vector<std::unique_ptr<RawConnection>> of_a, of_b, of_root;
  for (int i = 0; i < 8; ++i) {
    of_a.push_back(ConnectAs(d.socket(), a));
    ASSERT_TRUE(Pings(*of_a.back())) << "connection " << i + 1 << " of 8";
  }
  auto ninth = ConnectAs(d.socket(), a);
  ASSERT_TRUE(ninth->connected());
  ninth->SendFrame(R"({"v":2,"op":"ping"})");
  EXPECT_TRUE(IsErrorReply(ninth->Read(30), "unavailable", "already has 8 connections"));
  EXPECT_TRUE(ninth->ClosedByPeer(10));
  // The CLI says so in one line, exit 10.
  EXPECT_TRUE(IsGpulaneError(d.GpulaneAs(a, {"queue"}), 10, "connections"));
  of_b.push_back(ConnectAs(d.socket(), b));
  EXPECT_TRUE(Pings(*of_b.back())) << "another user still connects";
  for (int i = 0; i < 9; ++i) {
    of_root.push_back(std::make_unique<RawConnection>(d.socket()));
    ASSERT_TRUE(Pings(*of_root.back())) << "root's connection " << i + 1;
  }
  // 18 open: users are at the global cap, root is not.
  auto b2 = ConnectAs(d.socket(), b);
  b2->SendFrame(R"({"v":2,"op":"ping"})");
  EXPECT_TRUE(IsErrorReply(b2->Read(30), "unavailable", "has 18 connections, its limit"));
  for (int i = 0; i < 2; ++i) {
    of_root.push_back(std::make_unique<RawConnection>(d.socket()));
    ASSERT_TRUE(Pings(*of_root.back())) << "root's reserve, connection " << i + 1;
  }
  RawConnection over(d.socket());
  over.SendFrame(R"({"v":2,"op":"ping"})");
  EXPECT_TRUE(IsErrorReply(over.Read(30), "unavailable", "has 20 connections, its limit"));
  // Connections that close make room again.
  of_a.resize(5);
  // The daemon learns of the closes on its next turns: until then a new connection may still be
  // refused at the cap (a single ping right after was refused at times on a loaded machine).
  ASSERT_TRUE(Eventually([&] {
    RawConnection root_ping(d.socket());
    return Pings(root_ping);
  }, 10));
  auto again = ConnectAs(d.socket(), a);
  EXPECT_TRUE(Pings(*again));
  EXPECT_TRUE(Contains(d.Log(), "refused a connection: uid " + std::to_string(a.uid) + " over its limit of 8")) << d.Log();
  // RLIMIT_NOFILE raised to the hard limit.
  std::ifstream limits(fmt::format("/proc/{}/limits", d.pid()));
  std::string line, soft, hard;
  while (std::getline(limits, line))
    if (line.rfind("Max open files", 0) == 0) {
      std::istringstream words(line.substr(14));
      words >> soft >> hard;
    }
  EXPECT_FALSE(soft.empty());
  EXPECT_EQ(soft, hard) << "the daemon raises its soft descriptor limit to the hard one";
}

// Three clients each leave a large request half-sent: 5 + 4 + 4 MiB over a 12 MiB budget. The one
// holding the most is answered with an error and closed; the others finish and are answered.
TEST(DaemonConnections, PartialFramesOverTheMemoryBudgetDropTheLargest) {
  TestDaemon d({.daemon_env = {{"GPULANE_DAEMON_PARTIAL_BUDGET", "12MiB"}}});
  const std::string frame = Frame(PingOfSize(7u << 20));
  RawConnection largest(d.socket()), second(d.socket()), third(d.socket());
  ASSERT_TRUE(largest.Send(frame.substr(0, 5u << 20)));
  ASSERT_TRUE(second.Send(frame.substr(0, 4u << 20)));
  ASSERT_TRUE(d.Barrier());  // both read in full: 9 MiB held
  EXPECT_FALSE(largest.Readable()) << "under the budget nothing is dropped";
  ASSERT_TRUE(third.Send(frame.substr(0, 4u << 20)));  // 13 MiB
  EXPECT_TRUE(IsErrorReply(largest.Read(30), "unavailable", "over its budget of 12.0 MiB"));
  EXPECT_TRUE(largest.ClosedByPeer(10));
  ASSERT_TRUE(second.Send(frame.substr(4u << 20)));
  ASSERT_TRUE(third.Send(frame.substr(4u << 20)));
  for (RawConnection* c : {&second, &third}) {
    auto pong = c->Read(30);
    EXPECT_TRUE(pong && pong->value("ok", false)) << (pong ? pong->dump().substr(0, 200) : "no reply");
  }
  EXPECT_TRUE(Contains(d.Log(), "over the daemon's budget")) << d.Log();
}

// A connection that does nothing is closed after the idle time-out; one waiting for a job is not.
TEST(DaemonConnections, IdleConnectionsAreClosedButWaitingOnesAreNot) {
  TestDaemon d({.daemon_env = {{"GPULANE_DAEMON_IDLE_TIMEOUT", "1s"}, {"GPULANE_DAEMON_TICK", "50ms"}}});
  const std::int64_t held = d.Submit({"--hold", "--", "true"});
  RawConnection waiting(d.socket());
  ASSERT_TRUE(waiting.SendFrame(json{{"v", 2}, {"op", "wait"}, {"ids", {held}}}.dump()));
  RawConnection idle(d.socket());
  ASSERT_TRUE(Pings(idle));
  const double start = Seconds();
  EXPECT_TRUE(idle.ClosedByPeer(30));
  EXPECT_GE(Seconds() - start, 1.0);
  // The waiting connection has been idle longer, but it waits: still open, no reply yet.
  ASSERT_TRUE(d.Barrier());
  EXPECT_FALSE(waiting.Readable());
  ASSERT_EQ(d.Gpulane({"release", std::to_string(held)}).exit_code, 0);
  auto done = waiting.Read(30);
  ASSERT_TRUE(done) << "the wait is answered once the job ends";
  EXPECT_EQ((*done)["jobs"][0]["state"], "completed") << done->dump();
}

}  // namespace
}  // namespace gpulane::test
