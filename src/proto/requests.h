#pragma once
// The daemon's requests, typed (issue 25, item 1; docs/protocol.md): one struct per operation, its
// members listed once (`Fields`, proto/codec.h) for both the encoder and the decoder, and one
// std::variant of them all. ParseRequest reads a frame's JSON into it with one clear error for
// everything a client can get wrong: not an object, another version, no or an unknown operation, a
// member of the wrong type or a missing one (each `Check`). The daemon dispatches the variant with
// std::visit (daemon/handlers.cc, HandleParsedRequest); nothing past ParseRequest reads a
// request's JSON by hand but the members that have codecs of their own in store/ (a spec, job
// ids in Slurm's notation).
//
// Every error is kInvalidArgument: "malformed request: not a JSON object", "protocol version 3 is
// not supported (...)", "unknown operation 'x'", "malformed queue request: \"all\" must be true or
// false", or an operation's own line ("show: give the job's id").
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/result.h"

namespace gpulane::proto {

using Json = nlohmann::json;

struct PingRequest {
  static constexpr const char* kOp = "ping";
  bool loop_stats = false;  ///< the loop's turns and worst turns since the last such ping (then reset)
  template <typename V> void Fields(V& v) { v("loop_stats", loop_stats); }
  Status Check() const { return Status::Ok(); }
  bool operator==(const PingRequest&) const = default;
};

struct SnapshotRequest {
  static constexpr const char* kOp = "snapshot";
  bool sensors = true, utilization = true, topology = true;  ///< which fields to read
  template <typename V> void Fields(V& v) {
    v("sensors", sensors);
    v("topology", topology);
    v("utilization", utilization);
  }
  Status Check() const { return Status::Ok(); }
  bool operator==(const SnapshotRequest&) const = default;
};

/// The line a malformed idempotency key gets (docs/protocol.md "Idempotency keys").
inline constexpr const char* kIdempotencyKeyRule =
    "\"idempotency_key\" must be a string of 1 to 128 letters, digits and - _ . :";

struct SubmitRequest {
  static constexpr const char* kOp = "submit";
  std::optional<Json> spec;        ///< store::SpecFromJson reads it (required)
  bool hold = false;
  std::optional<Json> array;       ///< task indices: store::ArrayIndicesFromJson
  std::optional<Json> array_argv;  ///< each task's command (with array only): store::ArrayArgvFromJson
  std::optional<std::string> idempotency_key;
  template <typename V> void Fields(V& v) {
    v("array", array);
    v("array_argv", array_argv);
    v("hold", hold);
    static const std::string why = std::string("submit: ") + kIdempotencyKeyRule;
    v("idempotency_key", idempotency_key, why.c_str());
    v("spec", spec);
  }
  Status Check() const;
  bool operator==(const SubmitRequest&) const = default;
};

struct QueueRequest {
  static constexpr const char* kOp = "queue";
  bool all = false;
  std::optional<std::string> user;
  std::uint64_t limit = 0;               ///< with all: 0 is the default (kDefaultQueueLimit)
  std::string format;                    ///< "table": the text table
  std::optional<std::string> stream;     ///< "json" or "table": a streamed reply
  template <typename V> void Fields(V& v) {
    v("all", all);
    v("format", format);
    v("limit", limit);
    v("stream", stream, "queue: \"stream\" must be \"json\" or \"table\"");
    v("user", user);
  }
  Status Check() const;
  bool operator==(const QueueRequest&) const = default;
};

struct ShowRequest {
  static constexpr const char* kOp = "show";
  std::optional<Json> id;  ///< one job id (store::JobRefsFromJson), required
  template <typename V> void Fields(V& v) { v("id", id); }
  Status Check() const;
  bool operator==(const ShowRequest&) const = default;
};

struct ShareRequest {
  static constexpr const char* kOp = "share";
  template <typename V> void Fields(V&) {}
  Status Check() const { return Status::Ok(); }
  bool operator==(const ShareRequest&) const = default;
};

/// The requests over several jobs named by "ids" (store::JobRefsFromJson each).
template <typename Self>
struct IdsRequest {
  std::vector<Json> ids;
  template <typename V> void IdFields(V& v) {
    static const std::string why = std::string(Self::kOp) + ": \"ids\" must be a list of job ids";
    v("ids", ids, why.c_str());
  }
  bool operator==(const IdsRequest&) const = default;
};

struct CancelRequest : IdsRequest<CancelRequest> {
  static constexpr const char* kOp = "cancel";
  std::string user, name;  ///< --user, --name: the unfinished jobs that match
  template <typename V> void Fields(V& v) {
    IdFields(v);
    v("name", name);
    v("user", user);
  }
  Status Check() const;
  bool operator==(const CancelRequest&) const = default;
};

struct HoldRequest : IdsRequest<HoldRequest> {
  static constexpr const char* kOp = "hold";
  template <typename V> void Fields(V& v) { IdFields(v); }
  Status Check() const;
  bool operator==(const HoldRequest&) const = default;
};

struct ReleaseRequest : IdsRequest<ReleaseRequest> {
  static constexpr const char* kOp = "release";
  template <typename V> void Fields(V& v) { IdFields(v); }
  Status Check() const;
  bool operator==(const ReleaseRequest&) const = default;
};

struct LogsRequest {
  static constexpr const char* kOp = "logs";
  std::optional<Json> id;       ///< one job id, required
  std::uint64_t offset = 0;     ///< bytes into this job's output
  std::string stream = "out";   ///< "err": its stderr
  template <typename V> void Fields(V& v) {
    v("id", id);
    v("offset", offset);
    v("stream", stream);
  }
  Status Check() const;
  bool operator==(const LogsRequest&) const = default;
};

struct WaitRequest : IdsRequest<WaitRequest> {
  static constexpr const char* kOp = "wait";
  bool check = false;  ///< answer at once which ids name no job
  template <typename V> void Fields(V& v) {
    v("check", check);
    IdFields(v);
  }
  Status Check() const;
  bool operator==(const WaitRequest&) const = default;
};

// The sampler's questions (daemon/sampler_thread.cc answers them on its thread).
struct HistoryRequest {
  static constexpr const char* kOp = "history";
  std::optional<Json> gpu;  ///< its index or UUID, required
  std::optional<double> since_s, until_s;  ///< default: the last hour
  double resolution_s = 0;
  std::uint64_t max_points = 0;
  std::vector<std::string> fields;
  bool columns = false;
  template <typename V> void Fields(V& v) {
    v("columns", columns);
    v("fields", fields);
    v("gpu", gpu);
    v("max_points", max_points);
    v("resolution_s", resolution_s);
    v("since_s", since_s);
    v("until_s", until_s);
  }
  Status Check() const;
  bool operator==(const HistoryRequest&) const = default;
};

struct ReportRequest {
  static constexpr const char* kOp = "report";
  double since_s = 0;
  std::optional<std::string> user;
  std::string by = "user";
  template <typename V> void Fields(V& v) {
    v("by", by);
    v("since_s", since_s);
    v("user", user);
  }
  Status Check() const { return Status::Ok(); }
  bool operator==(const ReportRequest&) const = default;
};

struct UsageRequest {
  static constexpr const char* kOp = "usage";
  std::optional<std::string> lease, job_id;  ///< one of them
  /// With `lease`: the asker (its owner, or root) ends the lease now, so the record ends now, not
  /// at the sample that finds the lease gone (a job's usage line in its log and `show` agree).
  bool ending = false;
  template <typename V> void Fields(V& v) {
    v("ending", ending);
    v("job_id", job_id);
    v("lease", lease);
  }
  Status Check() const;
  bool operator==(const UsageRequest&) const = default;
};

struct TelemetryRequest {
  static constexpr const char* kOp = "telemetry";
  template <typename V> void Fields(V&) {}
  Status Check() const { return Status::Ok(); }
  bool operator==(const TelemetryRequest&) const = default;
};

struct MetricsRequest {
  static constexpr const char* kOp = "metrics";
  template <typename V> void Fields(V&) {}
  Status Check() const { return Status::Ok(); }
  bool operator==(const MetricsRequest&) const = default;
};

struct EventsRequest {
  static constexpr const char* kOp = "events";
  std::int64_t after_id = 0;
  double since_s = 0;
  std::uint64_t limit = 1000;  ///< 10,000 at most
  template <typename V> void Fields(V& v) {
    v("after_id", after_id);
    v("limit", limit);
    v("since_s", since_s);
  }
  Status Check() const { return Status::Ok(); }
  bool operator==(const EventsRequest&) const = default;
};

using Request = std::variant<PingRequest, SnapshotRequest, SubmitRequest, QueueRequest, ShowRequest, ShareRequest,
                             CancelRequest, HoldRequest, ReleaseRequest, LogsRequest, WaitRequest, HistoryRequest,
                             ReportRequest, UsageRequest, TelemetryRequest, MetricsRequest, EventsRequest>;

/// The sampler's questions, answered on its thread.
using SamplerRequest =
    std::variant<HistoryRequest, ReportRequest, UsageRequest, TelemetryRequest, MetricsRequest, EventsRequest>;

/// Reads a request frame's JSON (`req` discarded: the frame was not JSON). Members it does not know
/// are ignored. Errors: kInvalidArgument, one line (above).
Result<Request> ParseRequest(const nlohmann::json& req);

/// The request as a frame's JSON: {"v": kVersion, "op": ..., members}.
nlohmann::json RequestToJson(const Request& request);

/// The operation's name ("ping", ...).
std::string_view OpName(const Request& request);

/// A sampler's question out of `request`, when it is one.
std::optional<SamplerRequest> AsSamplerRequest(const Request& request);

}  // namespace gpulane::proto
