// `queue` as the daemon streams it (docs/protocol.md "Streamed replies"), in-process
// (tests/support/inproc_daemon.h): the frames of a stream and the requests behind it on one
// connection, other clients served while a client takes its time reading one (and what changed
// meanwhile listed as it is when sent), and what `--all` leaves out. How `gpulane queue` prints
// them stays through the binary: tests/integration/daemon_queue_stream_test.cc and DaemonQueue.
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "support/inproc_daemon.h"

namespace gpulane::test {
namespace {

using nlohmann::json;
using Ids = std::vector<std::int64_t>;

std::vector<int> StreamIndices(int n) {
  std::vector<int> out(static_cast<std::size_t>(n));
  std::iota(out.begin(), out.end(), 0);
  return out;
}

class DaemonInProcQueueStream : public InProcDaemonTest {
 protected:
  void SetUp() override {
    InProcDaemonTest::SetUp();
    StartDaemon();
  }
  // The parts of a stream on `c` after its header, up to its empty frame; *parts how many.
  std::string ReadStream(int c, std::size_t* parts = nullptr) {
    std::string text;
    std::size_t n = 0;
    for (auto part = ReadPayload(c); part; part = ReadPayload(c)) {
      if (part->empty()) {
        if (parts) *parts = n;
        return text;
      }
      text += *part;
      ++n;
    }
    ADD_FAILURE() << "the stream stopped after " << n << " parts";
    return text;
  }
};

// Was DaemonQueueStream.FramesOfAStreamThenTheConnectionServesRequestsAgain: a streamed listing in
// parts, then the request behind it on the same connection; bad stream kinds are refused like any
// bad request.
TEST_F(DaemonInProcQueueStream, FramesOfAStreamThenTheConnectionServesRequestsAgain) {
  ASSERT_EQ(Submit(Root(), {.hold = true, .array = StreamIndices(3000)}).size(), 3000u);
  const int c = Connect(Root());
  // The stream request and a ping behind it, in one write: the ping is answered after the stream.
  Send(c, FrameOf({{"op", "queue"}, {"stream", "json"}}) + FrameOf({{"op", "ping"}}));
  auto header = Read(c);
  ASSERT_TRUE(header) << "no header";
  EXPECT_EQ(header->value("ok", false), true) << header->dump();
  EXPECT_EQ(header->value("stream", ""), "json");
  EXPECT_EQ(header->value("count", 0), 3000);
  std::size_t parts = 0;
  const std::string text = ReadStream(c, &parts);
  EXPECT_GT(parts, 1u) << "3,000 jobs come in several parts";
  json listed = json::parse(text, nullptr, false);
  ASSERT_TRUE(listed.is_array());
  EXPECT_EQ(listed.size(), 3000u);
  EXPECT_EQ(text, listed.dump(2) + "\n");
  auto pong = Read(c);
  ASSERT_TRUE(pong);
  EXPECT_EQ(pong->value("pid", -1), getpid()) << pong->dump();
  // A table stream on the same connection.
  Send(c, FrameOf({{"op", "queue"}, {"stream", "table"}}));
  header = Read(c);
  ASSERT_TRUE(header && header->value("ok", false));
  const std::string table = ReadStream(c, &parts);
  EXPECT_EQ(std::count(table.begin(), table.end(), '\n'), 3001);
  // Bad stream kinds are refused like any bad request.
  Send(c, FrameOf({{"op", "queue"}, {"stream", "xml"}}));
  auto refused = Read(c);
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->value("code", ""), "invalid_argument") << refused->dump();
  Send(c, FrameOf({{"op", "queue"}, {"stream", "json"}, {"user", "no-such-user-gl"}}));
  refused = Read(c);
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->value("code", ""), "invalid_argument") << refused->dump();
}

// Was DaemonQueueStream.OthersAreServedWhileAClientTakesItsTimeAndEndedJobsShowTheirEnd: a client
// that reads no further fills its socket and the daemon waits for it, serving everyone else; a job
// submitted meanwhile is not part of that listing, one cancelled meanwhile is listed as it is when
// its part is sent.
TEST_F(DaemonInProcQueueStream, OthersAreServedWhileAClientTakesItsTimeAndEndedJobsShowTheirEnd) {
  const Ids tasks = Submit(Root(), {.hold = true, .array = StreamIndices(3000)});
  ASSERT_EQ(tasks.size(), 3000u);
  const int slow = Connect(Root());
  Send(slow, FrameOf({{"op", "queue"}, {"stream", "json"}}));
  auto header = Read(slow);
  ASSERT_TRUE(header && header->value("ok", false));
  EXPECT_EQ(Call(Root(), {{"op", "ping"}}).value("ok", false), true);
  const std::int64_t later = SubmitOne({.hold = true});
  json cancel = Control(Root(), "cancel", {tasks[0]});
  ASSERT_TRUE(cancel.value("ok", false)) << cancel.dump().substr(0, 300);
  json listed = json::parse(ReadStream(slow), nullptr, false);
  ASSERT_TRUE(listed.is_array());
  ASSERT_EQ(listed.size(), 3000u) << "the jobs queued when it asked";
  std::size_t held = 0, cancelled = 0;
  for (const json& job : listed) {
    EXPECT_NE(job["id"], later);
    held += job["state"] == "held";
    cancelled += job["state"] == "cancelled";
  }
  EXPECT_EQ(held + cancelled, 3000u);
  EXPECT_EQ(listed.back()["state"], "cancelled") << "sent after the cancel: as it is then";
  EXPECT_GT(held, 0u) << "sent before the cancel";
}

// Was DaemonQueueStream.AllSaysWhenOlderJobsAreLeftOutAndLimitListsMore (a new user's finding:
// `queue --all` listed the newest 1000 jobs as if they were all): the reply says when older ones
// are left out, and how many; a limit lists the newest N.
TEST_F(DaemonInProcQueueStream, AllSaysWhenOlderJobsAreLeftOutAndLimitListsMore) {
  const Ids tasks = Submit(Root(), {.hold = true, .array = StreamIndices(1001)});
  ASSERT_EQ(tasks.size(), 1001u);
  std::string body;
  json header = CallStreamed(Root(), {{"op", "queue"}, {"all", true}, {"stream", "json"}}, &body);
  ASSERT_TRUE(header.value("ok", false)) << header.dump();
  EXPECT_EQ(json::parse(body).size(), 1000u);
  EXPECT_NE(header["warnings"].dump().find("the newest 1000 jobs are listed and 1 older one is left out"), std::string::npos)
      << header.dump();
  EXPECT_NE(header["warnings"].dump().find("--limit N"), std::string::npos) << header.dump();
  header = CallStreamed(Root(), {{"op", "queue"}, {"all", true}, {"limit", 1001}, {"stream", "table"}}, &body);
  EXPECT_EQ(std::count(body.begin(), body.end(), '\n'), 1 + 1001);
  EXPECT_TRUE(!header.contains("warnings") || header["warnings"].empty()) << "nothing is left out: " << header.dump();
  header = CallStreamed(Root(), {{"op", "queue"}, {"all", true}, {"limit", 3}, {"stream", "table"}}, &body);
  EXPECT_EQ(std::count(body.begin(), body.end(), '\n'), 1 + 3);
  EXPECT_NE(header["warnings"].dump().find("the newest 3 jobs are listed and 998 older ones are left out"), std::string::npos)
      << header.dump();
  EXPECT_NE(body.find("_1000 "), std::string::npos) << "the newest: " << body;
  json one_frame = Call(Root(), {{"op", "queue"}, {"all", true}, {"limit", 3}});  // the one-frame answer says it too
  ASSERT_TRUE(one_frame.value("ok", false)) << one_frame.dump();
  EXPECT_EQ(one_frame["jobs"].size(), 3u);
  EXPECT_EQ(one_frame["jobs"][2]["id"], tasks.back());
  EXPECT_NE(one_frame["warnings"].dump().find("998 older ones are left out"), std::string::npos) << one_frame.dump();
}

}  // namespace
}  // namespace gpulane::test
