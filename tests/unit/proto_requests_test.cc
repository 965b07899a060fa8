// The typed protocol (proto/requests.h): every operation's request survives encode -> parse
// unchanged, through the one field list each struct has; and what a client gets wrong (not an
// object, another version, an unknown operation, a member of the wrong type, a missing one) gives
// the one line docs/protocol.md documents, with code invalid_argument.
#include <gtest/gtest.h>

#include "proto/replies.h"
#include "proto/requests.h"
#include "proto/wire.h"

namespace gpulane::proto {
namespace {

using nlohmann::json;

// One request of every operation, each member set away from its default where it has one.
std::vector<Request> EveryOperation() {
  SubmitRequest submit;
  submit.spec = json{{"argv", {"true"}}, {"cwd", "/tmp"}, {"request", {{"count", 1}}}};
  submit.hold = true;
  submit.array = json::array({0, 1, 7});
  submit.array_argv = json::array({{"a"}, {"b"}, {"c"}});
  submit.idempotency_key = "k-1.2:3_";
  QueueRequest queue;
  queue.all = true;
  queue.user = "alice";
  queue.limit = 20;
  queue.format = "table";
  queue.stream = "json";
  CancelRequest cancel;
  cancel.ids = {12, "13_2", "14_[1-3]"};
  cancel.user = "bob";
  cancel.name = "train";
  HoldRequest hold;
  hold.ids = {1};
  ReleaseRequest release;
  release.ids = {"2_0"};
  LogsRequest logs;
  logs.id = "12_3";
  logs.offset = 4096;
  logs.stream = "err";
  WaitRequest wait;
  wait.ids = {3, 4};
  wait.check = true;
  HistoryRequest history;
  history.gpu = "GPU-1";
  history.since_s = 10.5;
  history.until_s = 20;
  history.resolution_s = 60;
  history.max_points = 100;
  history.fields = {"util_gpu_pct"};
  history.columns = true;
  ReportRequest report{1e9, "carol", "gpu"};
  UsageRequest usage;
  usage.job_id = "7";
  usage.lease = "run-42";
  EventsRequest events{5, 100.25, 30};
  return {PingRequest{true}, SnapshotRequest{false, true, false}, submit, queue, ShowRequest{json("12_[1-3]")},
          ShareRequest{}, cancel, hold, release, logs, wait, history, report, usage, TelemetryRequest{},
          MetricsRequest{}, events};
}

TEST(ProtoRequests, EveryOperationRoundTripsThroughItsFieldList) {
  const auto requests = EveryOperation();
  ASSERT_EQ(requests.size(), std::variant_size_v<Request>) << "one request of each operation";
  for (const Request& request : requests) {
    const json wire = RequestToJson(request);
    EXPECT_EQ(wire["v"], kVersion);
    EXPECT_EQ(wire["op"], OpName(request));
    // Through the bytes a client sends, as the daemon reads them.
    auto parsed = ParseRequest(json::parse(wire.dump()));
    ASSERT_TRUE(parsed) << wire.dump() << ": " << parsed.error().message;
    EXPECT_EQ(parsed->index(), request.index()) << wire.dump();
    EXPECT_TRUE(*parsed == request) << wire.dump() << " read back as " << RequestToJson(*parsed).dump();
  }
}

TEST(ProtoRequests, DefaultsAreWhatAnAbsentMemberMeans) {
  auto logs = ParseRequest({{"v", 2}, {"op", "logs"}, {"id", 5}});
  ASSERT_TRUE(logs);
  EXPECT_EQ(std::get<LogsRequest>(*logs).stream, "out");
  EXPECT_EQ(std::get<LogsRequest>(*logs).offset, 0u);
  // null is absent; members nobody knows are ignored (a newer client's).
  auto snapshot = ParseRequest({{"v", 2}, {"op", "snapshot"}, {"sensors", nullptr}, {"pad", "x"}});
  ASSERT_TRUE(snapshot);
  EXPECT_TRUE(std::get<SnapshotRequest>(*snapshot).sensors);
}

// The error a request gets, as a daemon answers it: kInvalidArgument and one line.
std::string ErrorOf(const json& request) {
  auto parsed = ParseRequest(request);
  if (parsed) return "(parsed)";
  EXPECT_EQ(parsed.error().kind, ErrorKind::kInvalidArgument) << request.dump();
  EXPECT_EQ(parsed.error().message.find('\n'), std::string::npos);
  return parsed.error().message;
}

TEST(ProtoRequests, UnknownOpOrAMemberOfTheWrongTypeGetsTheDocumentedLine) {
  EXPECT_EQ(ErrorOf(json::parse("[1]")), "malformed request: not a JSON object");
  EXPECT_EQ(ErrorOf(json::parse("{", nullptr, false)), "malformed request: not a JSON object");
  EXPECT_EQ(ErrorOf({{"v", 3}, {"op", "ping"}}),
            "protocol version 3 is not supported (this daemon speaks 2): use a matching gpulane");
  EXPECT_EQ(ErrorOf({{"v", "2"}, {"op", "ping"}}),
            "protocol version of type string is not supported (this daemon speaks 2): use a matching gpulane");
  EXPECT_EQ(ErrorOf({{"v", 2}}), "malformed request: \"op\", the operation, is missing or not a string");
  EXPECT_EQ(ErrorOf({{"v", 2}, {"op", 42}}), "malformed request: \"op\", the operation, is missing or not a string");
  EXPECT_EQ(ErrorOf({{"v", 2}, {"op", "frobnicate"}}), "unknown operation 'frobnicate'");
  EXPECT_EQ(ErrorOf({{"v", 2}, {"op", "queue"}, {"all", "yes"}}), "malformed queue request: \"all\" must be true or false");
  EXPECT_EQ(ErrorOf({{"v", 2}, {"op", "logs"}, {"id", 1}, {"offset", -1}}),
            "malformed logs request: \"offset\" must be a whole number >= 0");
  EXPECT_EQ(ErrorOf({{"v", 2}, {"op", "ping"}, {"loop_stats", 1}}), "malformed ping request: \"loop_stats\" must be true or false");
  EXPECT_EQ(ErrorOf({{"v", 2}, {"op", "cancel"}, {"ids", 12}}), "cancel: \"ids\" must be a list of job ids");
  EXPECT_EQ(ErrorOf({{"v", 2}, {"op", "hold"}, {"ids", "12"}}), "hold: \"ids\" must be a list of job ids");
  EXPECT_EQ(ErrorOf({{"v", 2}, {"op", "queue"}, {"stream", 1}}), "queue: \"stream\" must be \"json\" or \"table\"");
  EXPECT_EQ(ErrorOf({{"v", 2}, {"op", "queue"}, {"stream", "xml"}}), "queue: \"stream\" must be \"json\" or \"table\"");
  EXPECT_EQ(ErrorOf({{"v", 2}, {"op", "submit"}, {"spec", json::object()}, {"idempotency_key", 7}}),
            "submit: \"idempotency_key\" must be a string of 1 to 128 letters, digits and - _ . :");
  EXPECT_EQ(ErrorOf({{"v", 2}, {"op", "submit"}, {"spec", json::object()}, {"idempotency_key", "no spaces"}}),
            "submit: \"idempotency_key\" must be a string of 1 to 128 letters, digits and - _ . :");
  // Missing members an operation needs.
  EXPECT_EQ(ErrorOf({{"v", 2}, {"op", "submit"}}), "submit: the spec is missing");
  EXPECT_EQ(ErrorOf({{"v", 2}, {"op", "show"}}), "show: give the job's id");
  EXPECT_EQ(ErrorOf({{"v", 2}, {"op", "logs"}}), "logs: give the job's id");
  EXPECT_EQ(ErrorOf({{"v", 2}, {"op", "wait"}}), "wait: give job ids");
  EXPECT_EQ(ErrorOf({{"v", 2}, {"op", "hold"}, {"ids", json::array()}}), "hold: give job ids");
  EXPECT_EQ(ErrorOf({{"v", 2}, {"op", "release"}}), "release: give job ids");
  EXPECT_EQ(ErrorOf({{"v", 2}, {"op", "cancel"}}), "cancel: give job ids, a user or a name");
  EXPECT_EQ(ErrorOf({{"v", 2}, {"op", "submit"}, {"spec", json::object()}, {"array_argv", json::array()}}),
            "submit: \"array_argv\" needs \"array\"");
}

// The structured replies go through their field lists the same way (a client reads them back).
template <typename R>
void ExpectReplyRoundTrip(const R& reply, const char* what) {
  const json wire = ReplyToJson(reply);
  EXPECT_EQ(wire["v"], kVersion);
  EXPECT_EQ(wire["ok"], true);
  auto back = ReplyFromJson<R>(json::parse(wire.dump()), what);
  ASSERT_TRUE(back) << wire.dump() << ": " << back.error().message;
  EXPECT_TRUE(*back == reply) << wire.dump();
}

TEST(ProtoRequests, EveryStructuredReplyRoundTripsThroughItsFieldList) {
  PingReply pong{4242, "user", 8, "/run/user/1000/gpulane/gpulane.sock", json{{"state", "off"}}};
  ExpectReplyRoundTrip(pong, "ping");
  pong.loading = PingReply::Loading{10, 300};
  pong.loop_turns = 12;
  pong.loop_worst_turn_ms = 1.5;
  pong.loop_worst_tick_turn_ms = 7.25;
  ExpectReplyRoundTrip(pong, "ping");
  ExpectReplyRoundTrip(LogsReply{json{{"b64", "//4="}}, 4096, true, "/tmp/x.out"}, "logs");
  ExpectReplyRoundTrip(SubmitReply{{12, 13, 14}, 12, true}, "submit");
  ExpectReplyRoundTrip(SubmitReply{{7}, std::nullopt, std::nullopt}, "submit");
  // Optional members are absent when unset: a plain submission's reply is {"ids", "ok", "v"}.
  EXPECT_EQ(ReplyToJson(SubmitReply{{7}, std::nullopt, std::nullopt}).dump(), R"({"ids":[7],"ok":true,"v":2})");
  // A nested member of the wrong type is named.
  auto bad = ReplyFromJson<PingReply>(json{{"loading", {{"loaded", "ten"}}}}, "ping");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("\"loaded\" must be a whole number"), std::string::npos) << bad.error().message;
}

}  // namespace
}  // namespace gpulane::proto
