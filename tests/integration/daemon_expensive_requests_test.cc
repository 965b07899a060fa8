// Large requests parsed beside the daemon's loop (issue 9, item 5; daemon/parse_worker.h), through
// the binary: the one test of the parse worker's thread that scripts/test-sanitizers.sh runs under
// TSan (which builds gpulane, not the in-process tests). The other requests that cost the daemon
// far more than they cost the client (a 100,000-task array stored in parts while others are
// answered, one whose storing was killed, the bounds of --after lists and queue listings) are
// tested in-process: tests/unit/daemon_inproc_bulk_test.cc and daemon_inproc_requests_test.cc.
#include <gtest/gtest.h>

#include "support/error_reply.h"
#include "support/daemon_fixture.h"
#include "support/text.h"

namespace gpulane::test {
namespace {

using nlohmann::json;

// Frames over 256 KiB are parsed beside the loop (daemon/parse_worker.h: 8 MiB of JSON held
// every client ~70 ms). Through that path too: a valid submission is taken, a too-deep or
// malformed one refused in one line, and the requests pipelined behind them on one connection are
// answered in order.
TEST(DaemonExpensiveRequests, LargeRequestsAreParsedBesideTheLoopAndAnsweredInOrder) {
  TestDaemon d;
  RawConnection c(d.socket());
  json submit = d.SubmitRequest({"true"}, true);
  submit["v"] = 2;
  submit["spec"]["env"].push_back("PAD=" + std::string(600 << 10, 'e'));
  ASSERT_TRUE(c.SendFrame(submit.dump()));
  ASSERT_TRUE(c.SendFrame(std::string(600 << 10, '[')));
  ASSERT_TRUE(c.SendFrame("{\"v\": 2, \"op\": \"ping\", \"pad\": \"" + std::string(600 << 10, 'x')));  // no closing quote
  ASSERT_TRUE(c.SendFrame(json{{"v", 2}, {"op", "ping"}}.dump()));
  auto taken = c.Read(60);
  ASSERT_TRUE(taken && taken->value("ok", false)) << (taken ? taken->dump().substr(0, 300) : "no reply");
  const std::int64_t id = (*taken)["ids"][0];
  EXPECT_EQ(d.Show(id)["spec"]["env"].back().get<std::string>().size(), 4u + (600 << 10)) << "the whole environment";
  auto deep = c.Read(60);
  ASSERT_TRUE(deep);
  EXPECT_TRUE(IsErrorReply(*deep, "invalid_argument", "nested deeper than 64 levels"));
  auto malformed = c.Read(60);
  ASSERT_TRUE(malformed);
  EXPECT_TRUE(IsErrorReply(*malformed, "invalid_argument", "malformed request: not a JSON object"));
  auto pong = c.Read(60);
  ASSERT_TRUE(pong && pong->value("ok", false) && pong->contains("pid")) << "the ping behind them, last";
}

}  // namespace
}  // namespace gpulane::test
