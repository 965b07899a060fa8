#include "proto/requests.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "proto/codec.h"
#include "proto/wire.h"

namespace gpulane::proto {
namespace {

using nlohmann::json;

Error RequestError(const std::string& line) { return MakeError(ErrorKind::kInvalidArgument, line); }

// What a request's "v" holds, for the version error: an integer is echoed, anything else is only
// named by its type (a client's value is never copied into a reply: it may be megabytes long).
std::string DescribeVersion(const json& req) {
  if (!req.contains("v")) return "missing";
  const json& v = req["v"];
  if (v.is_number_integer() || v.is_number_unsigned()) return v.dump();
  return std::string("of type ") + v.type_name();
}

template <typename M>
Result<Request> Decode(const json& req) {
  M message;
  FieldDecoder decoder(req, M::kOp);
  message.Fields(decoder);
  if (!decoder.error().empty()) return RequestError(decoder.error());
  if (Status s = message.Check(); !s.ok()) return s.error();
  return Request(std::move(message));
}

// Each operation's name and its decoder, in the variant's order.
template <std::size_t... I>
Result<Request> DecodeOp(const std::string& op, const json& req, std::index_sequence<I...>) {
  std::optional<Result<Request>> decoded;
  ((op == std::variant_alternative_t<I, Request>::kOp ? (decoded.emplace(Decode<std::variant_alternative_t<I, Request>>(req)), true)
                                                       : false) ||
   ...);
  if (!decoded) return RequestError(fmt::format("unknown operation '{}'", op));
  return std::move(*decoded);
}

bool ValidKey(const std::string& key) {
  return !key.empty() && key.size() <= kMaxIdempotencyKeyBytes && std::all_of(key.begin(), key.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' || ch == '.' || ch == ':';
  });
}

}  // namespace

Status SubmitRequest::Check() const {
  if (!spec) return RequestError("submit: the spec is missing");
  if (idempotency_key && !ValidKey(*idempotency_key)) return RequestError(std::string("submit: ") + kIdempotencyKeyRule);
  if (array_argv && !array) return RequestError("submit: \"array_argv\" needs \"array\"");
  return Status::Ok();
}

Status QueueRequest::Check() const {
  if (stream && *stream != "json" && *stream != "table") return RequestError("queue: \"stream\" must be \"json\" or \"table\"");
  return Status::Ok();
}

Status ShowRequest::Check() const { return id ? Status::Ok() : Status(RequestError("show: give the job's id")); }
Status LogsRequest::Check() const { return id ? Status::Ok() : Status(RequestError("logs: give the job's id")); }

Status CancelRequest::Check() const {
  if (ids.empty() && user.empty() && name.empty()) return RequestError("cancel: give job ids, a user or a name");
  return Status::Ok();
}
Status HoldRequest::Check() const { return ids.empty() ? Status(RequestError("hold: give job ids")) : Status::Ok(); }
Status ReleaseRequest::Check() const { return ids.empty() ? Status(RequestError("release: give job ids")) : Status::Ok(); }
Status WaitRequest::Check() const { return ids.empty() ? Status(RequestError("wait: give job ids")) : Status::Ok(); }

Status HistoryRequest::Check() const {
  return gpu ? Status::Ok() : Status(RequestError("history: give \"gpu\", the GPU's index or UUID"));
}

Status UsageRequest::Check() const {
  if (ending && !lease) return RequestError("usage: \"ending\" needs \"lease\"");
  return lease || job_id ? Status::Ok() : Status(RequestError("usage: give \"job_id\" or \"lease\""));
}

Result<Request> ParseRequest(const json& req) {
  if (req.is_discarded() || !req.is_object()) return RequestError("malformed request: not a JSON object");
  if (!req.contains("v") || req["v"] != kVersion)
    return RequestError(fmt::format("protocol version {} is not supported (this daemon speaks {}): use a matching gpulane",
                           DescribeVersion(req), kVersion));
  auto op = req.find("op");
  if (op == req.end() || !op->is_string())
    return RequestError("malformed request: \"op\", the operation, is missing or not a string");
  return DecodeOp(op->get<std::string>(), req, std::make_index_sequence<std::variant_size_v<Request>>());
}

json RequestToJson(const Request& request) {
  return std::visit(
      [](const auto& r) {
        json j = EncodeFields(r);
        j["v"] = kVersion;
        j["op"] = r.kOp;
        return j;
      },
      request);
}

std::string_view OpName(const Request& request) {
  return std::visit([](const auto& r) { return std::string_view(r.kOp); }, request);
}

std::optional<SamplerRequest> AsSamplerRequest(const Request& request) {
  return std::visit(
      [](const auto& r) -> std::optional<SamplerRequest> {
        if constexpr (std::is_constructible_v<SamplerRequest, decltype(r)>) return SamplerRequest(r);
        else return std::nullopt;
      },
      request);
}

}  // namespace gpulane::proto
