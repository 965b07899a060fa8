// Requests that cost the daemon far more than they cost the client (issue 9, item 5), through the
// binary: a 100,000-task array stored in parts while other clients are answered, one whose storing
// was killed, and large requests parsed beside the loop. The refusals and bounds of --after lists
// and queue listings are the daemon's decisions, tested in-process:
// tests/unit/daemon_inproc_requests_test.cc.
#include <sqlite3.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <fmt/format.h>
#include <numeric>
#include <vector>

#include "support/error_reply.h"
#include "support/daemon_fixture.h"
#include "support/text.h"

namespace gpulane::test {
namespace {

using nlohmann::json;



using nlohmann::json;

json HundredThousandTasks(const TestDaemon& d) {
  json request = d.SubmitRequest({"true"}, true);
  request["v"] = 2;
  std::vector<int> indices(100000);
  std::iota(indices.begin(), indices.end(), 0);
  request["array"] = indices;
  return request;
}

// SELECT COUNT(*) of `table` in the daemon's job store, read beside it (WAL: it never waits for
// the daemon's writes); -1 when it cannot be read.
long long CountRows(const TestDaemon& d, const char* table) {
  sqlite3* db = nullptr;
  long long n = -1;
  if (sqlite3_open_v2((d.state_dir() / "jobs.db").c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* stmt = nullptr;
    const std::string sql = fmt::format("SELECT COUNT(*) FROM {}", table);
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr) == SQLITE_OK && sqlite3_step(stmt) == SQLITE_ROW)
      n = sqlite3_column_int64(stmt, 0);
    sqlite3_finalize(stmt);
  }
  sqlite3_close(db);
  return n;
}

// Issue 9, item 5: an array of 100,000 tasks (the most one may have) was stored in one
// transaction in one turn of the daemon's loop, which every other client waited for (a 10,000-task
// array held it 75 ms). It is stored in parts now: pings on another connection are answered,
// one after another, while it is stored; a request sent behind it on its own connection is
// answered after it, in order.
TEST(DaemonExpensiveRequests, PingsAreAnsweredWhileAHundredThousandTaskArrayIsStored) {
  TestDaemon d;
  RawConnection submitter(d.socket()), pinger(d.socket());
  ASSERT_TRUE(submitter.SendFrame(HundredThousandTasks(d).dump()));
  ASSERT_TRUE(submitter.SendFrame(json{{"v", 2}, {"op", "ping"}}.dump()));
  int answered_meanwhile = 0;
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(pinger.SendFrame(json{{"v", 2}, {"op", "ping"}}.dump()));
    auto pong = pinger.Read(60);
    ASSERT_TRUE(pong && pong->value("ok", false)) << "ping " << i;
    if (!submitter.Readable()) ++answered_meanwhile;
  }
  EXPECT_EQ(answered_meanwhile, 20) << "pings answered before the array's answer";
  auto accepted = submitter.Read(120);
  ASSERT_TRUE(accepted && accepted->value("ok", false)) << (accepted ? accepted->dump().substr(0, 300) : "no reply");
  ASSERT_EQ((*accepted)["ids"].size(), 100000u);
  const std::int64_t array_id = (*accepted)["array_job_id"];
  EXPECT_EQ((*accepted)["ids"][0], array_id);
  EXPECT_EQ((*accepted)["ids"][99999], array_id + 99999) << "consecutive ids";
  auto behind = submitter.Read(30);
  ASSERT_TRUE(behind && behind->value("ok", false) && behind->contains("pid")) << "the ping behind the array, answered after it";
  EXPECT_EQ(d.Show(array_id + 99999)["array_index"], 99999);
  EXPECT_EQ(CountRows(d, "jobs"), 100000);
}

// A daemon killed while it stores an array in parts: the array was never acknowledged, and the
// next daemon removes what was stored of it (no half array in the queue), says so in its log, and
// never gives its ids to another job.
TEST(DaemonExpensiveRequests, AnArrayWhoseStoringWasKilledIsRemovedAtTheNextStart) {
  TestDaemon d;
  const std::int64_t before = d.Submit({"--hold", "--", "true"});
  RawConnection submitter(d.socket());
  ASSERT_TRUE(submitter.SendFrame(HundredThousandTasks(d).dump()));
  // Its first part is durable once the store has it marked incomplete (read beside the daemon).
  bool storing = false;
  for (const double deadline = MonotonicNowS() + 60; !storing && !submitter.Readable() && MonotonicNowS() < deadline;)
    storing = CountRows(d, "incomplete_arrays") == 1;
  ASSERT_TRUE(storing) << "the array was never seen being stored";
  d.Kill9();
  EXPECT_FALSE(submitter.Read(1)) << "no acknowledgement";
  ASSERT_TRUE(d.Start());
  EXPECT_TRUE(Contains(d.Log(), "removed 1 array submission whose storing did not finish")) << d.Log();
  EXPECT_EQ(d.Queue().size(), 1u) << "only the held job";
  EXPECT_EQ(CountRows(d, "jobs"), 1);
  const std::int64_t after = d.Submit({"--hold", "--", "true"});
  EXPECT_GT(after, before + 100000) << "the array's reserved ids are not given again";
}

}  // namespace
}  // namespace gpulane::test

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
