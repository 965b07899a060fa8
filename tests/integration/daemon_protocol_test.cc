// The daemon's wire protocol under bad input on its socket (malformed JSON on a connection that
// stays usable, oversized and truncated frames, half-closes, slow clients): each gets an error
// reply (or a clean close) and the daemon keeps serving. And commands with shell metacharacters,
// quotes and spaces run exactly as given. The refusals of requests that are whole frames (version,
// op, a member's type, array indices, deep nesting) are the daemon's decisions, tested in-process:
// tests/unit/daemon_inproc_protocol_test.cc.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fmt/format.h>

#include "support/daemon_fixture.h"
#include "support/text.h"

namespace gpulane::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

double Seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// An error reply: {"v":2,"ok":false,"error":"<one line containing part>","code":code}.
::testing::AssertionResult IsErrorReply(const std::optional<json>& reply, const std::string& code,
                                        const std::string& part) {
  if (!reply) return ::testing::AssertionFailure() << "no reply";
  const json& r = *reply;
  if (r.value("v", 0) == 2 && r.value("ok", true) == false && r.value("code", "") == code && r.contains("error") &&
      r["error"].is_string() && !r["error"].get<std::string>().empty() &&
      r["error"].get<std::string>().find('\n') == std::string::npos && Contains(r["error"], part))
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "expected an error reply with code " << code << " containing '" << part
                                       << "', got " << r.dump();
}

// The daemon still answers: a ping on a new connection, and a command through the CLI.
void ExpectServing(const TestDaemon& d) {
  json ping = d.Call({{"op", "ping"}});
  EXPECT_EQ(ping.value("ok", false), true) << ping.dump();
  EXPECT_EQ(ping.value("pid", -1), d.pid());
  RunResult q = d.Gpulane({"queue"});
  EXPECT_EQ(q.exit_code, 0) << q.err;
}

TEST(DaemonProtocol, OversizedFrameIsRefusedWithoutReadingIt) {
  TestDaemon d;
  RawConnection c(d.socket());
  // 9 MiB announced (the limit is 8 MiB); only a little of it sent.
  const std::uint32_t n = 9u << 20;
  std::string header = {static_cast<char>(n >> 24), static_cast<char>(n >> 16), static_cast<char>(n >> 8),
                        static_cast<char>(n)};
  ASSERT_TRUE(c.Send(header + std::string(1000, 'x')));
  EXPECT_TRUE(IsErrorReply(c.Read(10), "invalid_argument", "larger"));
  EXPECT_TRUE(c.ClosedByPeer(10)) << "the connection is closed after the refusal";
  // The largest length a header can give.
  RawConnection huge(d.socket());
  ASSERT_TRUE(huge.Send("\xff\xff\xff\xff"));
  EXPECT_TRUE(IsErrorReply(huge.Read(10), "invalid_argument", "larger"));
  ExpectServing(d);
}

TEST(DaemonProtocol, LargeRequestJustUnderTheLimitIsServed) {
  TestDaemon d;
  // A 7 MiB request is within the 8 MiB limit (a submission's environment has a limit of its own,
  // 1 MiB: daemon_amplification_test).
  json ping = {{"op", "ping"}, {"pad", std::string(7u << 20, 'b')}};
  json reply = d.Call(ping, 60);
  EXPECT_EQ(reply.value("ok", false), true) << reply.dump().substr(0, 300);
  ExpectServing(d);
}

TEST(DaemonProtocol, TruncatedFrameThenCloseIsDropped) {
  TestDaemon d;
  {
    RawConnection c(d.socket());
    std::string frame = Frame(R"({"v":2,"op":"ping"})");
    ASSERT_TRUE(c.Send(frame.substr(0, frame.size() / 2)));
  }  // closed half-way
  {
    RawConnection c(d.socket());
    ASSERT_TRUE(c.Send(std::string("\0\0", 2)));  // half a header
    c.ShutdownWrite();
    EXPECT_TRUE(c.ClosedByPeer(10)) << "the daemon closes its end too";
  }
  ExpectServing(d);
}

TEST(DaemonProtocol, RequestsBeforeAHalfCloseAreAnswered) {
  TestDaemon d;
  RawConnection c(d.socket());
  ASSERT_TRUE(c.Send(Frame(R"({"v":2,"op":"ping"})") + Frame(R"({"v":2,"op":"queue"})")));
  c.ShutdownWrite();  // as `printf ... | socat - UNIX:...` does
  auto pong = c.Read(10);
  ASSERT_TRUE(pong);
  EXPECT_EQ(pong->value("pid", -1), d.pid()) << pong->dump();
  auto queue = c.Read(10);
  ASSERT_TRUE(queue);
  EXPECT_TRUE(queue->value("ok", false) && (*queue)["jobs"].is_array()) << queue->dump();
  EXPECT_TRUE(c.ClosedByPeer(10));
  ExpectServing(d);
}

TEST(DaemonProtocol, TruncatedFrameTimesOutWithAnErrorReply) {
  // The read time-out (5 s by default) and the tick that checks it, shortened for the test.
  TestDaemon d({.daemon_env = {{"GPULANE_DAEMON_READ_TIMEOUT", "1s"}, {"GPULANE_DAEMON_TICK", "50ms"}}});
  RawConnection c(d.socket());
  std::string frame = Frame(R"({"v":2,"op":"ping"})");
  const double start = Seconds();
  ASSERT_TRUE(c.Send(frame.substr(0, frame.size() / 2)));
  // Meanwhile others are served.
  ExpectServing(d);
  auto reply = c.Read(30);
  const double waited = Seconds() - start;
  EXPECT_TRUE(IsErrorReply(reply, "timeout", "time"));
  EXPECT_GE(waited, 1.0) << "the read time-out is 1 s";
  EXPECT_LT(waited, 4.5) << "1 s, not the default 5 s";
  EXPECT_TRUE(c.ClosedByPeer(10));
  ExpectServing(d);
}

TEST(DaemonProtocol, ABadTimeoutKnobStopsTheDaemonWithExit2) {
  TestDaemon d({.start = false});
  Child daemon({GpulaneBinary(), "daemon", "--user"}, d.env({{"GPULANE_DAEMON_READ_TIMEOUT", "0"}}));
  auto r = daemon.Wait(30);
  ASSERT_TRUE(r) << "the daemon did not stop";
  EXPECT_EQ(r->exit_code, 2);
  EXPECT_TRUE(Contains(r->err, "GPULANE_DAEMON_READ_TIMEOUT=0: give a duration from 0.1 s to 600 s")) << r->err;
}

TEST(DaemonProtocol, ManySlowClientsDoNotBlockOthers) {
  TestDaemon d;
  std::vector<std::unique_ptr<RawConnection>> idle;
  for (int i = 0; i < 50; ++i) {
    idle.push_back(std::make_unique<RawConnection>(d.socket()));
    idle.back()->Send(std::string("\0\0\0", 3));
  }
  const double start = Seconds();
  json ping = d.Call({{"op", "ping"}});
  EXPECT_LT(Seconds() - start, 3) << "clients that send nothing more do not hold up the daemon";
  EXPECT_EQ(ping.value("ok", false), true) << ping.dump();
  ExpectServing(d);
}

// ---- Commands as given ------------------------------------------------------------------------

TEST(DaemonCommands, ShellMetacharactersQuotesAndSpacesReachTheJobVerbatim) {
  TestDaemon d;
  const std::vector<std::string> words = {"a b", "$HOME", "\"q\"", ";", "*", "'single'", "$(id -u)", "`id`",
                                          "back\\slash", "tab\there", "", "new\nline", "|&>x", "é ü ✓", "-n",
                                          "--", "%j %a"};
  std::vector<std::string> args = {"submit", "--", "printf", "[%s]\\n"};
  args.insert(args.end(), words.begin(), words.end());
  RunResult submit = d.Gpulane(args);
  ASSERT_EQ(submit.exit_code, 0) << submit.err;
  const std::string id = Lines(submit.out).at(0);
  ASSERT_EQ(d.Gpulane({"wait", id}).exit_code, 0);
  std::string expected;
  for (const auto& w : words) expected += "[" + w + "]\n";
  EXPECT_EQ(d.Gpulane({"logs", id}).out, expected);
  EXPECT_FALSE(fs::exists(d.work() / "x")) << "no shell ran the words";
  json shown = d.Show(std::stoll(id));
  std::vector<std::string> argv = {"printf", "[%s]\\n"};
  argv.insert(argv.end(), words.begin(), words.end());
  EXPECT_EQ(shown["spec"]["argv"], json(argv));
}

TEST(DaemonCommands, ShellCommandStringWithQuotesRunsAsWritten) {
  TestDaemon d;
  const std::string script = R"(for w in "a  b" 'c $d' e\ f; do echo "<$w>"; done; echo "$0|$1" )";
  RunResult submit = d.Gpulane({"submit", "--", "sh", "-c", script, "zero arg", "one; arg"});
  ASSERT_EQ(submit.exit_code, 0) << submit.err;
  const std::string id = Lines(submit.out).at(0);
  ASSERT_EQ(d.Gpulane({"wait", id}).exit_code, 0);
  EXPECT_EQ(d.Gpulane({"logs", id}).out, "<a  b>\n<c $d>\n<e f>\nzero arg|one; arg\n");
}

}  // namespace
}  // namespace gpulane::test
