// The daemon's wire protocol under bad input (malformed, wrong version, missing or unknown op,
// oversized and truncated frames): each gets an error reply (or a clean close) and the daemon keeps
// serving. And commands with shell metacharacters, quotes and spaces run exactly as given.
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

TEST(DaemonProtocol, MalformedJsonGetsAnErrorAndTheConnectionStaysUsable) {
  TestDaemon d;
  RawConnection c(d.socket());
  ASSERT_TRUE(c.SendFrame("{\"v\":2,\"op\":"));
  EXPECT_TRUE(IsErrorReply(c.Read(10), "invalid_argument", "malformed"));
  ASSERT_TRUE(c.SendFrame("\xff\xfe not even text"));
  EXPECT_TRUE(IsErrorReply(c.Read(10), "invalid_argument", "malformed"));
  ASSERT_TRUE(c.SendFrame("[1,2,3]"));
  EXPECT_TRUE(IsErrorReply(c.Read(10), "invalid_argument", "JSON object"));
  ASSERT_TRUE(c.SendFrame(""));
  EXPECT_TRUE(IsErrorReply(c.Read(10), "invalid_argument", "malformed"));
  ASSERT_TRUE(c.SendFrame(R"({"v":2,"op":"ping"})"));
  auto pong = c.Read(10);
  ASSERT_TRUE(pong);
  EXPECT_EQ(pong->value("ok", false), true) << pong->dump();
  ExpectServing(d);
}

TEST(DaemonProtocol, WrongOrMissingVersionIsRefused) {
  TestDaemon d;
  for (const char* request : {R"({"v":3,"op":"ping"})", R"({"v":1,"op":"ping"})", R"({"v":"2","op":"ping"})",
                              R"({"op":"ping"})"}) {
    RawConnection c(d.socket());
    ASSERT_TRUE(c.SendFrame(request));
    EXPECT_TRUE(IsErrorReply(c.Read(10), "invalid_argument", "version")) << request;
  }
  // A job submitted in a future version's request is not queued.
  json submit = d.SubmitRequest({"true"});
  submit["v"] = 3;
  EXPECT_TRUE(IsErrorReply(d.Call(submit), "invalid_argument", "version"));
  EXPECT_EQ(d.Queue({"--all"}).size(), 0u);
  ExpectServing(d);
}

TEST(DaemonProtocol, MissingOrUnknownOpIsRefused) {
  TestDaemon d;
  EXPECT_TRUE(IsErrorReply(d.Call(json{{"v", 2}}), "invalid_argument", "operation"));
  EXPECT_TRUE(IsErrorReply(d.Call({{"op", "frobnicate"}}), "invalid_argument", "frobnicate"));
  EXPECT_TRUE(IsErrorReply(d.Call({{"op", 42}}), "invalid_argument", "operation"));
  EXPECT_TRUE(IsErrorReply(d.Call({{"op", nullptr}}), "invalid_argument", "operation"));
  // Fields of the wrong type or missing.
  EXPECT_TRUE(IsErrorReply(d.Call({{"op", "show"}, {"id", "seven"}}), "invalid_argument", "show"));
  EXPECT_TRUE(IsErrorReply(d.Call({{"op", "show"}}), "invalid_argument", "show"));
  EXPECT_TRUE(IsErrorReply(d.Call({{"op", "logs"}, {"id", json::array()}}), "invalid_argument", "logs"));
  EXPECT_TRUE(IsErrorReply(d.Call({{"op", "submit"}, {"spec", {{"argv", "true"}}}}), "invalid_argument", "spec"));
  EXPECT_TRUE(IsErrorReply(d.Call({{"op", "submit"}}), "invalid_argument", "spec"));
  json relative = d.SubmitRequest({"true"});
  relative["spec"]["cwd"] = "relative/dir";
  EXPECT_TRUE(IsErrorReply(d.Call(relative), "invalid_argument", "absolute"));
  json bad_array = d.SubmitRequest({"true"});
  bad_array["array"] = "0-3";
  EXPECT_TRUE(IsErrorReply(d.Call(bad_array), "invalid_argument", "--array"));
  EXPECT_TRUE(IsErrorReply(d.Call({{"op", "wait"}}), "invalid_argument", "wait"));
  EXPECT_EQ(d.Queue({"--all"}).size(), 0u) << "no malformed submission was queued";
  ExpectServing(d);
}

// Every request is read into its operation's type first (proto::ParseRequest): a member of the
// wrong type is named in one line, for the daemon's own requests and the sampler's alike, and
// nothing is done (before, the daemon answered with the JSON library's exception text).
TEST(DaemonProtocol, AMemberOfTheWrongTypeIsNamedInOneLine) {
  TestDaemon d;
  EXPECT_TRUE(IsErrorReply(d.Call({{"op", "queue"}, {"all", "yes"}}), "invalid_argument",
                           "malformed queue request: \"all\" must be true or false"));
  EXPECT_TRUE(IsErrorReply(d.Call({{"op", "logs"}, {"id", 1}, {"offset", -1}}), "invalid_argument",
                           "malformed logs request: \"offset\" must be a whole number >= 0"));
  EXPECT_TRUE(IsErrorReply(d.Call({{"op", "events"}, {"limit", "all"}}), "invalid_argument",
                           "malformed events request: \"limit\" must be a whole number >= 0"));
  json held = d.SubmitRequest({"true"});
  held["hold"] = "yes";
  EXPECT_TRUE(IsErrorReply(d.Call(held), "invalid_argument", "malformed submit request: \"hold\" must be true or false"));
  EXPECT_TRUE(IsErrorReply(d.Call({{"op", "cancel"}, {"ids", 7}}), "invalid_argument", "cancel: \"ids\" must be a list of job ids"));
  EXPECT_EQ(d.Queue({"--all"}).size(), 0u) << "the submission with a bad member was not queued";
  ExpectServing(d);
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

// A request whose "v" nests a million arrays deep: the version error's message used to dump it,
// recursively, and the daemon died of a stack overflow.
TEST(DaemonProtocol, DeeplyNestedRequestGetsAnErrorAndTheDaemonGoesOn) {
  TestDaemon d;
  constexpr std::size_t kDepth = 1000000;
  for (const std::string& request :
       {R"({"v":)" + std::string(kDepth, '[') + std::string(kDepth, ']') + R"(,"op":"ping"})",
        R"({"v":2,"op":"show","id":)" + std::string(kDepth, '[') + std::string(kDepth, ']') + "}"}) {
    RawConnection c(d.socket());
    ASSERT_TRUE(c.SendFrame(request));
    EXPECT_TRUE(IsErrorReply(c.Read(30), "invalid_argument", "nested deeper than 64 levels"));
  }
  RawConnection c(d.socket());
  std::string nested = "2";
  for (int i = 0; i < 63; ++i) nested = "[" + nested + "]";
  ASSERT_TRUE(c.SendFrame(R"({"v":2,"op":"ping","x":)" + nested + "}"));
  auto pong = c.Read(10);
  EXPECT_TRUE(pong && pong->value("ok", false)) << "64 levels are fine: " << (pong ? pong->dump() : "no reply");
  ExpectServing(d);
}

// Issue 9 item 2's remainder: the version error echoed whatever "v" held, so a 1 MiB string came
// back in the reply. Now only an integer is echoed; anything else is named by its type.
TEST(DaemonProtocol, AHugeVersionValueIsNotEchoedInTheError) {
  TestDaemon d;
  RawConnection c(d.socket());
  ASSERT_TRUE(c.SendFrame(R"({"v":")" + std::string(1 << 20, 'x') + R"(","op":"ping"})"));
  auto reply = c.Read(30);
  ASSERT_TRUE(IsErrorReply(reply, "invalid_argument", "protocol version of type string is not supported"));
  EXPECT_LT(reply->dump().size(), 400u) << "the reply must not carry the client's value";
  RawConnection c2(d.socket());
  ASSERT_TRUE(c2.SendFrame(R"({"v":7,"op":"ping"})"));
  EXPECT_TRUE(IsErrorReply(c2.Read(30), "invalid_argument", "protocol version 7 is not supported"));
  ExpectServing(d);
}

// Found by fuzz_request: the daemon converted a submission's array indices with get<int>, so a float
// index (1e20) was undefined behaviour (the ASan+UBSan build's daemon halted on it) and 2^32 was
// taken as task 0. Each is refused now with the --array error, nothing is queued, the daemon goes on.
TEST(DaemonProtocol, ArrayIndicesThatAreFloatsOrOutOfRangeAreRefusedAndNothingIsQueued) {
  TestDaemon d;
  for (const char* array : {"[0,1e20]", "[4294967296]", "[118446744073709551615]", "[-1]", "[0.5]", "[1,1]", "[]"}) {
    json request = d.SubmitRequest({"true"});
    request["array"] = json::parse(array);
    EXPECT_TRUE(IsErrorReply(d.Call(request), "invalid_argument", "--array: give 1 to 100000 different task indices"))
        << array;
  }
  EXPECT_EQ(d.Queue({"--all"}).size(), 0u) << "no submission with bad indices was queued";
  json request = d.SubmitRequest({"true"});
  request["array"] = json::parse("[0,2]");
  request["hold"] = true;
  json reply = d.Call(request);
  ASSERT_EQ(reply.value("ok", false), true) << reply.dump();
  EXPECT_EQ(reply["ids"].size(), 2u) << reply.dump();
  ExpectServing(d);
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

// A submission is answered after its group commit; a request behind it on the same connection
// waits for that, so that replies keep the order of the requests.
TEST(DaemonProtocol, RepliesFollowTheOrderOfRequestsAlsoBehindASubmission) {
  TestDaemon d;
  json submit = d.SubmitRequest({"true"}, /*hold=*/true);
  submit["v"] = 2;
  RawConnection c(d.socket());
  ASSERT_TRUE(c.Send(Frame(submit.dump()) + Frame(R"({"v":2,"op":"ping"})") + Frame(submit.dump())));
  auto first = c.Read(30), second = c.Read(30), third = c.Read(30);
  ASSERT_TRUE(first && second && third);
  EXPECT_TRUE(first->contains("ids")) << "the submission's reply first: " << first->dump();
  EXPECT_TRUE(second->contains("pid")) << "then the ping's: " << second->dump();
  EXPECT_TRUE(third->contains("ids")) << third->dump();
}

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
