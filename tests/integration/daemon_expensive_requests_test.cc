// Requests that cost the daemon far more than they cost the client (issue 9, item 5): --after
// lists of 50,000 ids and queue listings without a limit. Each is refused with one line, kept once
// or bounded.
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <fmt/format.h>
#include <numeric>
#include <vector>

#include "support/daemon_fixture.h"
#include "support/text.h"

namespace gpulane::test {
namespace {

using nlohmann::json;

double Seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

::testing::AssertionResult IsErrorReply(const json& reply, const std::string& code, const std::string& part) {
  const std::string error = reply.value("error", "");
  if (reply.value("ok", true) == false && reply.value("code", "") == code && Contains(error, part) &&
      error.find('\n') == std::string::npos && error.size() < 400)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "expected one short " << code << " line containing '" << part << "', got "
                                       << reply.dump().substr(0, 600);
}

TEST(DaemonExpensiveRequests, FiftyThousandAfterIdsAreRefusedAndDuplicatesKeptOnce) {
  TestDaemon d;
  const std::int64_t first = d.Submit({"--hold", "--", "true"});
  // 50,000 times the same id: one dependency.
  json same = d.SubmitRequest({"true"}, true);
  same["spec"]["after_ok"] = std::vector<std::int64_t>(50000, first);
  json accepted = d.Call(same, 60);
  ASSERT_EQ(accepted.value("ok", false), true) << accepted.dump().substr(0, 300);
  EXPECT_EQ(d.Show(accepted["ids"][0])["spec"]["after_ok"], json::array({first}));
  // 50,000 different ones, and one range of 100,000 tasks: more than 1,000, refused at once.
  std::vector<std::int64_t> many(50000);
  std::iota(many.begin(), many.end(), 1);
  for (const json& deps : {json(many), json::array({fmt::format("{}_[0-99999]", first)})}) {
    json request = d.SubmitRequest({"true"}, true);
    request["spec"]["after_ok"] = deps;
    const double start = Seconds();
    EXPECT_TRUE(IsErrorReply(d.Call(request, 60), "invalid_argument", "name more than 1000 jobs"));
    EXPECT_LT(Seconds() - start, 2.0);
  }
  // 1,000 tasks of an array: allowed, and the daemon stays quick (every later request used to pay
  // for the whole list again).
  json array = d.SubmitRequest({"true"}, true);
  std::vector<int> indices(1000);
  std::iota(indices.begin(), indices.end(), 0);
  array["array"] = indices;
  json tasks = d.Call(array, 60);
  ASSERT_EQ(tasks.value("ok", false), true);
  json waiting = d.SubmitRequest({"true"});
  waiting["spec"]["after_any"] = json::array({fmt::format("{}_[0-999]", tasks["array_job_id"].get<std::int64_t>())});
  ASSERT_EQ(d.Call(waiting, 60).value("ok", false), true);
  double worst = 0;
  for (int i = 0; i < 20; ++i) {
    const double start = Seconds();
    ASSERT_EQ(d.Call({{"op", "ping"}}).value("ok", false), true);
    worst = std::max(worst, Seconds() - start);
  }
  EXPECT_LT(worst, 0.5) << "seconds, the slowest ping with a job waiting on 1,000 tasks";
  EXPECT_TRUE(IsGpulaneError(d.Gpulane({"submit", "--after", fmt::format("{}_[0-1000]", tasks["array_job_id"].get<std::int64_t>()),
                                        "--", "true"}),
                             2, "more than 1000 jobs"));
}

TEST(DaemonExpensiveRequests, QueueAllWithoutALimitListsTheNewestThousand) {
  TestDaemon d;
  json array = d.SubmitRequest({"true"}, true);
  std::vector<int> indices(1500);
  std::iota(indices.begin(), indices.end(), 0);
  array["array"] = indices;
  json tasks = d.Call(array, 60);
  ASSERT_EQ(tasks.value("ok", false), true);
  for (const json& limit : {json(0), json(nullptr)}) {
    json request = {{"op", "queue"}, {"all", true}};
    if (!limit.is_null()) request["limit"] = limit;
    json listed = d.Call(request, 60);
    ASSERT_EQ(listed.value("ok", false), true) << listed.dump().substr(0, 300);
    EXPECT_EQ(listed["jobs"].size(), 1000u) << request.dump();
    EXPECT_EQ(listed["jobs"].back()["id"], tasks["ids"].back()) << "the newest";
  }
  EXPECT_TRUE(IsErrorReply(d.Call({{"op", "queue"}, {"all", true}, {"limit", 20000}}), "invalid_argument",
                           "ask for a streamed reply"));
  // A streamed listing reads the jobs part by part; it may list more.
  RawConnection c(d.socket());
  ASSERT_TRUE(c.SendFrame(json{{"v", 2}, {"op", "queue"}, {"all", true}, {"limit", 1200}, {"stream", "json"}}.dump()));
  auto header = c.Read(30);
  ASSERT_TRUE(header && header->value("ok", false));
  EXPECT_EQ((*header)["count"], 1200);
  std::string text;
  while (auto part = c.ReadPayload(30)) {
    if (part->empty()) break;
    text += *part;
  }
  json listed = json::parse(text, nullptr, false);
  ASSERT_TRUE(listed.is_array());
  ASSERT_EQ(listed.size(), 1200u);
  EXPECT_EQ(listed.back()["id"], tasks["ids"].back());
  EXPECT_EQ(listed.front()["id"], tasks["ids"][300]);
  // More than 10,000 unfinished jobs do not go into one frame: streamed, as the CLI asks.
  std::vector<int> more(9000);
  std::iota(more.begin(), more.end(), 0);
  array["array"] = more;
  ASSERT_EQ(d.Call(array, 60).value("ok", false), true);
  EXPECT_TRUE(IsErrorReply(d.Call({{"op", "queue"}}), "invalid_argument", "10500 jobs are more than the 10000 of one reply"));
  EXPECT_EQ(d.Queue().size(), 10500u);
}

}  // namespace
}  // namespace gpulane::test
