// The daemon's wire protocol through the binary, end to end: a request that stops half-way is cut
// at the read time-out set by GPULANE_DAEMON_READ_TIMEOUT on a real socket and the real clock while
// others are served, and a bad value of that knob stops `gpulane daemon` with exit 2. And commands
// with shell metacharacters, quotes and spaces run exactly as given. The refusals of requests that
// are whole frames (version, op, a member's type, array indices, deep nesting, malformed JSON) and
// what is about frames and connections (frames over the limit, truncated frames, half-closes,
// slow clients) are the daemon's decisions, tested in-process: tests/unit/daemon_inproc_protocol_test.cc
// and daemon_inproc_connections_test.cc.
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

double ProtocolSeconds() {
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

TEST(DaemonProtocol, TruncatedFrameTimesOutWithAnErrorReply) {
  // The read time-out (5 s by default) and the tick that checks it, shortened for the test.
  TestDaemon d({.daemon_env = {{"GPULANE_DAEMON_READ_TIMEOUT", "1s"}, {"GPULANE_DAEMON_TICK", "50ms"}}});
  RawConnection c(d.socket());
  std::string frame = Frame(R"({"v":2,"op":"ping"})");
  const double start = ProtocolSeconds();
  ASSERT_TRUE(c.Send(frame.substr(0, frame.size() / 2)));
  // Meanwhile others are served.
  ExpectServing(d);
  auto reply = c.Read(30);
  const double waited = ProtocolSeconds() - start;
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
