// The daemon's connections under bad or greedy clients, in-process (tests/support/inproc_daemon.h):
// frames over the size limit, truncated frames, half-closes, clients that stop half-way through a
// header, a request trickled a byte at a time past the read time-out, partial requests over the
// memory budget, and idle connections. Each gets an error reply (or a clean close) and everyone
// else goes on being served. Were DaemonProtocol and DaemonConnections tests through the binary;
// the time-out knob end to end (GPULANE_DAEMON_READ_TIMEOUT on a real socket and the real clock)
// stays there as DaemonProtocol.TruncatedFrameTimesOutWithAnErrorReply, a bad knob's exit 2 as
// DaemonProtocol.ABadTimeoutKnobStopsTheDaemonWithExit2. The connection caps:
// daemon_inproc_connection_caps_test.cc.
#include <unistd.h>

#include <gtest/gtest.h>

#include "support/inproc_daemon.h"
#include "support/text.h"
#include "support/units.h"

namespace gpulane::test {
namespace {

using nlohmann::json;

// An error reply: {"v":2,"ok":false,"error":"<one line containing part>","code":code}.
::testing::AssertionResult IsV2ErrorReply(const std::optional<json>& reply, const std::string& code,
                                        const std::string& part) {
  if (!reply) return ::testing::AssertionFailure() << "no reply";
  const json& r = *reply;
  if (r.is_object() && r.value("v", 0) == 2 && r.value("ok", true) == false && r.value("code", "") == code &&
      r.contains("error") && r["error"].is_string() && !r["error"].get<std::string>().empty() &&
      r["error"].get<std::string>().find('\n') == std::string::npos && Contains(r["error"].get<std::string>(), part))
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "expected an error reply with code " << code << " containing '" << part
                                       << "', got " << r.dump().substr(0, 400);
}

// A ping request of exactly `n` bytes (padded).
std::string PingOfSize(std::size_t n) {
  const std::string head = R"({"v":2,"op":"ping","pad":")", tail = "\"}";
  return head + std::string(n - head.size() - tail.size(), 'p') + tail;
}

class DaemonInProcConnections : public InProcDaemonTest {
 protected:
  // The daemon still answers: a ping and a queue on new connections.
  void ExpectServing() {
    json ping = Call(Root(), {{"op", "ping"}});
    EXPECT_EQ(ping.value("ok", false), true) << ping.dump();
    EXPECT_EQ(ping.value("pid", -1), getpid());
    EXPECT_TRUE(Queue(Root()).is_array());
  }
};

// Was DaemonProtocol.OversizedFrameIsRefusedWithoutReadingIt: 9 MiB announced (the limit is 8 MiB)
// and a little of it sent; the largest length a header can give.
TEST_F(DaemonInProcConnections, OversizedFrameIsRefusedWithoutReadingIt) {
  StartDaemon();
  const int c = Connect(Root());
  const std::uint32_t n = 9u << 20;
  const std::string header = {static_cast<char>(n >> 24), static_cast<char>(n >> 16), static_cast<char>(n >> 8),
                              static_cast<char>(n)};
  Send(c, header + std::string(1000, 'x'));
  EXPECT_TRUE(IsV2ErrorReply(Read(c, 10), "invalid_argument", "larger"));
  EXPECT_TRUE(ClosedByDaemon(c)) << "the connection is closed after the refusal";
  const int huge = Connect(Root());
  Send(huge, "\xff\xff\xff\xff");
  EXPECT_TRUE(IsV2ErrorReply(Read(huge, 10), "invalid_argument", "larger"));
  EXPECT_TRUE(ClosedByDaemon(huge));
  ExpectServing();
}

// Was DaemonProtocol.LargeRequestJustUnderTheLimitIsServed: 7 MiB is within the 8 MiB limit (a
// submission's environment has a limit of its own, 1 MiB: DaemonInProcBulk).
TEST_F(DaemonInProcConnections, LargeRequestJustUnderTheLimitIsServed) {
  StartDaemon();
  json reply = Call(Root(), {{"op", "ping"}, {"pad", std::string(7 * kMiB, 'b')}});
  EXPECT_EQ(reply.value("ok", false), true) << reply.dump().substr(0, 300);
  ExpectServing();
}

// Was DaemonProtocol.TruncatedFrameThenCloseIsDropped: half a frame then a close, half a header
// then a half-close; nothing is answered, the daemon closes its end too.
TEST_F(DaemonInProcConnections, TruncatedFrameThenCloseIsDropped) {
  StartDaemon();
  const int gone = Connect(Root());
  const std::string frame = RawFrame(R"({"v":2,"op":"ping"})");
  Send(gone, frame.substr(0, frame.size() / 2));
  Turn();
  Disconnect(gone);
  const int half = Connect(Root());
  Send(half, std::string("\0\0", 2));
  ShutdownWrite(half);
  EXPECT_TRUE(ClosedByDaemon(half)) << "the daemon closes its end too";
  EXPECT_FALSE(ReadPayload(half, 0).has_value()) << "a truncated request is not answered";
  ExpectServing();
}

// Was DaemonProtocol.RequestsBeforeAHalfCloseAreAnswered: two requests, then the client's write
// side shut (as `printf ... | socat - UNIX:...` does): both answered, then the connection closed.
// Also when the requests are 64 KiB in all, the daemon's read buffer, so that it reads them and
// the end of the stream in one go.
TEST_F(DaemonInProcConnections, RequestsBeforeAHalfCloseAreAnswered) {
  StartDaemon();
  const std::string queue_frame = RawFrame(R"({"v":2,"op":"queue"})");
  for (const std::string& ping_frame :
       {RawFrame(R"({"v":2,"op":"ping"})"), RawFrame(PingOfSize(65536 - 4 - queue_frame.size()))}) {
    const int c = Connect(Root());
    Send(c, ping_frame + queue_frame);
    ShutdownWrite(c);
    auto pong = Read(c, 10);
    ASSERT_TRUE(pong) << "the ping of " << ping_frame.size() << " bytes was not answered";
    EXPECT_EQ(pong->value("pid", -1), getpid()) << pong->dump();
    auto queue = Read(c, 10);
    ASSERT_TRUE(queue);
    EXPECT_TRUE(queue->value("ok", false) && (*queue)["jobs"].is_array()) << queue->dump();
    EXPECT_TRUE(ClosedByDaemon(c));
  }
  ExpectServing();
}

// Was DaemonProtocol.ManySlowClientsDoNotBlockOthers: fifty clients each stopped three bytes into
// a header; a ping on a new connection is answered at once (no tick, the clock not moved).
TEST_F(DaemonInProcConnections, ManySlowClientsDoNotBlockOthers) {
  StartDaemon();
  std::vector<int> slow;
  for (int i = 0; i < 50; ++i) {
    slow.push_back(Connect(Root()));
    Send(slow.back(), std::string("\0\0\0", 3));
  }
  Turn();
  const int c = Connect(Root());
  Send(c, RawFrame(R"({"v":2,"op":"ping"})"));
  auto pong = Read(c, 10);
  ASSERT_TRUE(pong) << "clients that send nothing more hold up the daemon";
  EXPECT_EQ(pong->value("ok", false), true) << pong->dump();
  for (int fd : slow) EXPECT_FALSE(Readable(fd)) << "a slow client is neither answered nor closed before its time-out";
  ExpectServing();
}

// Was DaemonConnections.TricklingARequestOneByteAtATimeIsCutAtTheDeadline: a request sent a byte
// every 100 ms (the FakeClock moved by that much a byte). The read time-out counts from the first
// byte, so the trickle is cut at 1 s instead of lasting forever.
TEST_F(DaemonInProcConnections, TricklingARequestOneByteAtATimeIsCutAtTheDeadline) {
  settings_.read_timeout_s = 1;
  settings_.tick_s = 0.05;
  StartDaemon();
  const int c = Connect(Root());
  const std::string frame = RawFrame(PingOfSize(200));
  std::size_t sent = 0;
  while (sent < frame.size() && !Readable(c)) {
    Send(c, frame.substr(sent++, 1));
    clock_.Advance(0.1);
    Turn(1);
  }
  const double waited_s = 0.1 * static_cast<double>(sent - 1);  // from the first byte's read to the reply
  ASSERT_LT(sent, frame.size()) << "the whole request went through, a byte every 100 ms for " << waited_s << " s";
  EXPECT_TRUE(IsV2ErrorReply(Read(c, 10), "timeout", "from its first byte"));
  EXPECT_GE(waited_s, 1.0 - 1e-9);
  EXPECT_LE(waited_s, 1.2 + 1e-9) << "cut at the 1 s deadline, though a byte came every 100 ms";
  EXPECT_TRUE(ClosedByDaemon(c));
  ExpectServing();
}

// Was DaemonConnections.PartialFramesOverTheMemoryBudgetDropTheLargest: three clients each leave a
// large request half-sent, 5 + 4 + 4 MiB over a 12 MiB budget. The one holding the most is answered
// with an error and closed; the others finish and are answered.
TEST_F(DaemonInProcConnections, PartialFramesOverTheMemoryBudgetDropTheLargest) {
  settings_.partial_budget_bytes = 12 * kMiB;
  StartDaemon();
  CaptureLog();
  const std::string frame = RawFrame(PingOfSize(7 * kMiB));
  const int largest = Connect(Root()), second = Connect(Root()), third = Connect(Root());
  Send(largest, frame.substr(0, 5 * kMiB));
  Send(second, frame.substr(0, 4 * kMiB));
  Turn(5);  // both read in full: 9 MiB held
  EXPECT_FALSE(Readable(largest)) << "under the budget nothing is dropped";
  EXPECT_FALSE(Readable(second));
  Send(third, frame.substr(0, 4 * kMiB));  // 13 MiB
  Turn(5);
  EXPECT_TRUE(IsV2ErrorReply(Read(largest, 10), "unavailable", "over its budget of 12.0 MiB"));
  EXPECT_TRUE(ClosedByDaemon(largest));
  Send(second, frame.substr(4 * kMiB));
  Send(third, frame.substr(4 * kMiB));
  for (int c : {second, third}) {
    auto pong = Read(c, 30);
    EXPECT_TRUE(pong && pong->value("ok", false)) << (pong ? pong->dump().substr(0, 200) : "no reply");
  }
  EXPECT_TRUE(Contains(Logged(), "over the daemon's budget"));
}

// Was DaemonConnections.IdleConnectionsAreClosedButWaitingOnesAreNot: a connection that does nothing
// is closed after the idle time-out (1 s on the FakeClock); one waiting for a job is not, however
// long it waits, and is answered once the job ends.
TEST_F(DaemonInProcConnections, IdleConnectionsAreClosedButWaitingOnesAreNot) {
  settings_.idle_timeout_s = 1;
  settings_.tick_s = 0.05;
  StartDaemon();
  const std::int64_t held = SubmitOne({.hold = true});
  const int waiting = Connect(Root());
  Send(waiting, FrameOf({{"op", "wait"}, {"ids", {held}}}));
  const int idle = Connect(Root());
  Send(idle, FrameOf({{"op", "ping"}}));
  auto pong = Read(idle, 10);
  ASSERT_TRUE(pong && pong->value("ok", false));
  clock_.Advance(0.5);
  Turn();
  EXPECT_FALSE(Readable(idle)) << "closed before its idle time-out";
  clock_.Advance(0.6);
  Turn();
  EXPECT_TRUE(ClosedByDaemon(idle, 5)) << "an idle connection is closed after 1 s";
  clock_.Advance(10);
  Turn();
  EXPECT_FALSE(Readable(waiting)) << "a waiting connection is neither answered nor closed while its job waits";
  ASSERT_TRUE(Control(Root(), "release", {held}).value("ok", false));
  RunToEnd(held, 0);
  auto done = Read(waiting, 10);
  ASSERT_TRUE(done) << "the wait is answered once the job ends";
  EXPECT_EQ((*done)["jobs"][0]["state"], "completed") << done->dump();
}

}  // namespace
}  // namespace gpulane::test
