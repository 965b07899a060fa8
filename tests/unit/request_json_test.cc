// The one codec of the request (proto/request_json.h): what is written is read back exactly, and
// what is out of range or mistyped is refused with the field's name, not wrapped or truncated.
#include "proto/request_json.h"

#include <gtest/gtest.h>

namespace gpulane::proto {
namespace {

using nlohmann::json;

TEST(RequestJson, EveryFieldRoundTrips) {
  sched::Request r;
  r.count = 3;
  r.mem_bytes = 30ULL << 30;
  r.min_free_bytes = 1ULL << 30;
  r.max_util_pct = 40;
  r.share_foreign = true;
  r.order = sched::Order::kLeastUtil;
  r.gpu_list = "0,GPU-ab";
  r.allowed_uuids = std::vector<std::string>{"GPU-aa", "GPU-ab"};
  r.uid = 1000;
  r.user = "alice";
  r.priority = -2;
  r.submit_time_s = 1764580000.25;
  r.time_limit_s = 7200;
  r.partition = "day";
  auto back = RequestFromJson(json::parse(RequestToJson(r).dump()));
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(RequestToJson(*back), RequestToJson(r));
  EXPECT_EQ(back->partition, "day");
  EXPECT_EQ(back->allowed_uuids, r.allowed_uuids);
  EXPECT_EQ(back->order, sched::Order::kLeastUtil);
}

TEST(RequestJson, AnOrderNotGivenStaysTheDefaultAndAnOldRecordsOrderIsKept) {
  // No --order: nothing written, and it reads back as not given (best fit for --mem).
  sched::Request r;
  r.mem_bytes = 20ULL << 30;
  const json written = RequestToJson(r);
  EXPECT_FALSE(written.contains("order")) << written.dump();
  auto back = RequestFromJson(json::parse(written.dump()));
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_FALSE(back->order.has_value());
  EXPECT_EQ(sched::EffectiveOrder(*back), sched::Order::kBestFit);
  // Every chosen order, bestfit included, round-trips as chosen.
  for (sched::Order o : {sched::Order::kMostFree, sched::Order::kLeastUtil, sched::Order::kPci, sched::Order::kBestFit}) {
    r.order = o;
    auto again = RequestFromJson(json::parse(RequestToJson(r).dump()));
    ASSERT_TRUE(again.ok()) << again.error().message;
    EXPECT_EQ(again->order, o) << sched::OrderName(o);
  }
  // A request stored before the default changed always carries "order": it keeps being placed
  // most free first, as it was when written.
  auto old = RequestFromJson(json{{"count", 1}, {"mem_bytes", 20ULL << 30}, {"share_foreign", false}, {"order", "memory"}});
  ASSERT_TRUE(old.ok()) << old.error().message;
  EXPECT_EQ(old->order, sched::Order::kMostFree);
  EXPECT_EQ(sched::EffectiveOrder(*old), sched::Order::kMostFree);
}

TEST(RequestJson, AbsentOptionalFieldsStayUnset) {
  auto r = RequestFromJson(json{{"count", 1}});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_FALSE(r->mem_bytes.has_value());
  EXPECT_FALSE(r->allowed_uuids.has_value()) << "absent means any GPU, not none";
  EXPECT_FALSE(r->time_limit_s.has_value());
  EXPECT_EQ(r->partition, "") << "written before partitions existed: none";
  EXPECT_FALSE(RequestToJson(*r).contains("partition")) << "and none is not written";
}

// -g 0 (run and submit): a CPU-only request is valid on its own, and stays one through JSON.
TEST(RequestJson, ZeroGpusAloneIsACpuOnlyRequest) {
  auto r = RequestFromJson(json{{"count", 0}});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->count, 0u);
  auto again = RequestFromJson(RequestToJson(*r));
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(again->count, 0u);
}

TEST(RequestJson, OutOfRangeAndMistypedFieldsAreRefusedByName) {
  auto refused = [](json j, const std::string& part) {
    auto r = RequestFromJson(j);
    if (r.ok()) return ::testing::AssertionFailure() << j.dump() << " was accepted";
    if (r.error().kind != ErrorKind::kInvalidArgument || r.error().message.find(part) == std::string::npos)
      return ::testing::AssertionFailure() << j.dump() << ": " << r.error().message;
    return ::testing::AssertionSuccess();
  };
  EXPECT_TRUE(refused({{"count", 0}, {"mem_bytes", 1 << 30}}, "-g 0"));
  EXPECT_TRUE(refused({{"count", 0}, {"partition", "day"}}, "-g 0 --partition day"));
  EXPECT_TRUE(refused({{"count", -1}}, "count"));
  EXPECT_TRUE(refused({{"count", "2"}}, "count"));
  EXPECT_TRUE(refused({{"count", 1}, {"mem_bytes", 18446744073709551615ULL}}, "--mem"));
  EXPECT_TRUE(refused({{"count", 1}, {"mem_bytes", 0}}, "--mem 0"));
  EXPECT_TRUE(refused({{"count", 1}, {"max_util_pct", 101}}, "--max-util"));
  EXPECT_TRUE(refused({{"count", 1}, {"priority", 18446744073709551615ULL}}, "priority"));
  EXPECT_TRUE(refused({{"count", 1}, {"priority", 2000000}}, "--priority"));
  EXPECT_TRUE(refused({{"count", 1}, {"time_limit_s", 1e12}}, "--time-limit"));
  EXPECT_TRUE(refused({{"count", 1}, {"time_limit_s", -5}}, "--time-limit"));
  EXPECT_TRUE(refused({{"count", 1}, {"order", "random"}}, "order"));
  EXPECT_TRUE(refused({{"count", 1}, {"allowed_uuids", "GPU-a"}}, "allowed_uuids"));
  EXPECT_TRUE(refused(json::array(), "object"));
}

}  // namespace
}  // namespace gpulane::proto
