// Requests that cost the daemon far more than they cost the client (issue 9, item 5), in-process
// (tests/support/inproc_daemon.h): --after lists of 50,000 ids, and queue listings without a
// limit. Each is refused with one line, kept once or bounded. The daemon runs in this thread, so a
// request's time here is the daemon's own work for it. Were DaemonExpensiveRequests.
// FiftyThousandAfterIdsAreRefusedAndDuplicatesKeptOnce and QueueAllWithoutALimitListsTheNewestThousand
// (through the binary); the ones about the loop's turns while a huge array is stored stay there.
#include <gtest/gtest.h>

#include <chrono>
#include <numeric>

#include <fmt/format.h>

#include "support/error_reply.h"
#include "support/inproc_daemon.h"

namespace gpulane::test {
namespace {

using nlohmann::json;


class DaemonInProcRequests : public InProcDaemonTest {
 protected:
  void SetUp() override {
    InProcDaemonTest::SetUp();
    StartDaemon();
  }
  json HeldArray(int tasks) {
    json request = SubmitRequest({.hold = true});
    std::vector<int> indices(static_cast<std::size_t>(tasks));
    std::iota(indices.begin(), indices.end(), 0);
    request["array"] = indices;
    return request;
  }
};

TEST_F(DaemonInProcRequests, FiftyThousandAfterIdsAreRefusedAndDuplicatesKeptOnce) {
  const std::int64_t first = SubmitOne({.hold = true});
  // 50,000 times the same id: one dependency.
  json same = SubmitRequest({.hold = true});
  same["spec"]["after_ok"] = std::vector<std::int64_t>(50000, first);
  json accepted = Call(Root(), same);
  ASSERT_EQ(accepted.value("ok", false), true) << accepted.dump().substr(0, 300);
  EXPECT_EQ(ShowJob(accepted["ids"][0])["spec"]["after_ok"], json::array({first}));
  // 50,000 different ones, and one range of 100,000 tasks: more than 1,000, refused at once.
  std::vector<std::int64_t> many(50000);
  std::iota(many.begin(), many.end(), 1);
  for (const json& deps : {json(many), json::array({fmt::format("{}_[0-99999]", first)})}) {
    json request = SubmitRequest({.hold = true});
    request["spec"]["after_ok"] = deps;
    const double start = MonotonicNowS();
    EXPECT_TRUE(IsErrorReply(Call(Root(), request), "invalid_argument", "name more than 1000 jobs"));
    EXPECT_LT(MonotonicNowS() - start, 2.0);
  }
  // 1,000 tasks of an array: allowed, and the daemon stays quick (every later request used to pay
  // for the whole list again).
  json tasks = Call(Root(), HeldArray(1000));
  ASSERT_EQ(tasks.value("ok", false), true) << tasks.dump().substr(0, 300);
  json waiting = SubmitRequest({});
  waiting["spec"]["after_any"] = json::array({fmt::format("{}_[0-999]", tasks["array_job_id"].get<std::int64_t>())});
  ASSERT_EQ(Call(Root(), waiting).value("ok", false), true);
  double worst = 0;
  for (int i = 0; i < 20; ++i) {
    const double start = MonotonicNowS();
    ASSERT_EQ(Call(Root(), {{"op", "ping"}}).value("ok", false), true);
    worst = std::max(worst, MonotonicNowS() - start);
  }
  EXPECT_LT(worst, 0.5) << "seconds, the slowest ping with a job waiting on 1,000 tasks";
}

TEST_F(DaemonInProcRequests, QueueAllWithoutALimitListsTheNewestThousand) {
  json tasks = Call(Root(), HeldArray(1500));
  ASSERT_EQ(tasks.value("ok", false), true);
  for (const json& limit : {json(0), json(nullptr)}) {
    json request = {{"op", "queue"}, {"all", true}};
    if (!limit.is_null()) request["limit"] = limit;
    json listed = Call(Root(), request);
    ASSERT_EQ(listed.value("ok", false), true) << listed.dump().substr(0, 300);
    EXPECT_EQ(listed["jobs"].size(), 1000u) << request.dump();
    EXPECT_EQ(listed["jobs"].back()["id"], tasks["ids"].back()) << "the newest";
  }
  EXPECT_TRUE(IsErrorReply(Call(Root(), {{"op", "queue"}, {"all", true}, {"limit", 20000}}), "invalid_argument",
                           "ask for a streamed reply"));
  // A streamed listing reads the jobs part by part; it may list more.
  std::string text;
  json header = CallStreamed(Root(), {{"op", "queue"}, {"all", true}, {"limit", 1200}, {"stream", "json"}}, &text);
  ASSERT_TRUE(header.value("ok", false)) << header.dump();
  EXPECT_EQ(header["count"], 1200);
  json listed = json::parse(text, nullptr, false);
  ASSERT_TRUE(listed.is_array()) << text.substr(0, 300);
  ASSERT_EQ(listed.size(), 1200u);
  EXPECT_EQ(listed.back()["id"], tasks["ids"].back());
  EXPECT_EQ(listed.front()["id"], tasks["ids"][300]);
  // More than 10,000 unfinished jobs do not go into one frame: streamed, as the CLI asks.
  ASSERT_EQ(Call(Root(), HeldArray(9000)).value("ok", false), true);
  EXPECT_TRUE(IsErrorReply(Call(Root(), {{"op", "queue"}}), "invalid_argument", "10500 jobs are more than the 10000 of one reply"));
  json every = CallStreamed(Root(), {{"op", "queue"}, {"stream", "json"}}, &text);
  ASSERT_TRUE(every.value("ok", false)) << every.dump();
  EXPECT_EQ(json::parse(text, nullptr, false).size(), 10500u);
}

}  // namespace
}  // namespace gpulane::test
