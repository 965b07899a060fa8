// 10,000 queued jobs (an array of held tasks) plus a few hundred single submissions arriving at once:
// the queue lists them all, they can all be cancelled, and the daemon answers promptly throughout.
#include <gtest/gtest.h>

#include <chrono>
#include <fmt/format.h>
#include <memory>
#include <set>

#include "support/daemon_fixture.h"
#include "support/text.h"

namespace gpulane::test {
namespace {

using nlohmann::json;

double Seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Seconds a ping takes to be answered.
double PingTime(const TestDaemon& d) {
  const double start = Seconds();
  json reply = d.Call({{"op", "ping"}}, 30);
  EXPECT_EQ(reply.value("ok", false), true) << reply.dump();
  return Seconds() - start;
}

TEST(DaemonScale, TenThousandQueuedJobs) {
  TestDaemon d;
  RunResult array = d.Gpulane({"submit", "--hold", "--name", "sweep", "--array", "0-9999", "--", "true"}, {}, 120);
  ASSERT_EQ(array.exit_code, 0) << array.err;
  const std::int64_t array_id = std::stoll(array.out);
  EXPECT_TRUE(Contains(array.err, "10000 tasks")) << array.err;

  // 300 single submissions, all sent before any reply is read (the daemon commits them in groups).
  constexpr int kSingles = 300;
  std::vector<std::unique_ptr<RawConnection>> connections;
  json request = d.SubmitRequest({"true"}, /*hold=*/true);
  request["v"] = 2;
  request["spec"]["name"] = "single";
  const std::string payload = request.dump();
  for (int i = 0; i < kSingles; ++i) {
    connections.push_back(std::make_unique<RawConnection>(d.socket()));
    ASSERT_TRUE(connections.back()->SendFrame(payload)) << "connection " << i;
  }
  std::set<std::int64_t> ids;
  for (auto& c : connections) {
    auto reply = c->Read(60);
    ASSERT_TRUE(reply && reply->value("ok", false)) << (reply ? reply->dump() : "no reply");
    ids.insert((*reply)["ids"][0].get<std::int64_t>());
  }
  connections.clear();
  EXPECT_EQ(ids.size(), static_cast<std::size_t>(kSingles)) << "every submission got its own id";
  EXPECT_GT(*ids.begin(), array_id + 9999);
  EXPECT_LT(PingTime(d), 2.0);

  // The queue lists all of them.
  RunResult table = d.Gpulane({"queue"}, {}, 120);
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_EQ(LineCount(table.out), 1 + 10000 + kSingles);
  EXPECT_TRUE(Contains(table.out, fmt::format(" {}_9999  ", array_id))) << "array tasks show as <array>_<index>";
  json queue = d.Queue();
  ASSERT_EQ(queue.size(), 10000u + kSingles);
  std::size_t held = 0;
  for (const auto& job : queue) held += job["state"] == "held";
  EXPECT_EQ(held, queue.size());
  EXPECT_LT(PingTime(d), 2.0);

  // Cancel them all: the array by its id, the singles by name.
  const double start = Seconds();
  RunResult cancel_array = d.Gpulane({"cancel", std::to_string(array_id)}, {}, 120);
  EXPECT_EQ(cancel_array.exit_code, 0) << cancel_array.err;
  EXPECT_EQ(cancel_array.out, fmt::format("cancelled job {}_[0-9999] (10000 tasks)\n", array_id))
      << "an array's tasks in one line, not 10,000 (a new user's finding)";
  RunResult cancel_singles = d.Gpulane({"cancel", "--name", "single"}, {}, 120);
  EXPECT_EQ(cancel_singles.exit_code, 0) << cancel_singles.err;
  EXPECT_EQ(LineCount(cancel_singles.out), kSingles);
  EXPECT_LT(Seconds() - start, 30) << "cancelling 10,300 jobs";
  EXPECT_EQ(d.Queue().size(), 0u);
  EXPECT_LT(PingTime(d), 2.0);
  EXPECT_EQ(d.State(array_id + 4321), "cancelled");

  // And it still runs jobs.
  const std::int64_t id = d.Submit({"--", "true"});
  EXPECT_EQ(d.Gpulane({"wait", std::to_string(id)}).exit_code, 0);
}

}  // namespace
}  // namespace gpulane::test
