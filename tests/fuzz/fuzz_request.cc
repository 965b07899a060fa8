// A daemon request as daemon/server.cc and daemon/handlers.cc decode it, before any state is
// touched: the nesting check (proto::kMaxRequestDepth), the JSON parser, the version and operation,
// then what each operation reads: a submission's spec (store::SpecFromJson, which reads the request
// with proto::RequestFromJson), its "array" (store::ArrayIndicesFromJson) and "array_argv"
// (store::ArrayArgvFromJson), job ids
// (store::JobRefsFromJson) and "user". The daemon answers a json::exception from these with an
// error reply; anything else reaching it (another exception, a crash) is a bug.
//
// First of all the daemon's one reader, proto::ParseRequest (daemon/handlers.cc dispatches what it
// returns): it never throws, and a request it accepts reads back equal from its own encoding.
//
// Properties: a spec that is accepted reads back as written (SpecToJson -> SpecFromJson ->
// SpecToJson gives the same JSON), so a job is stored and relaunched exactly as submitted; an
// accepted request passes sched::CheckRequest.
#include <cstdint>
#include <string>

#include "fuzz_check.h"
#include "proto/request_json.h"
#include "proto/requests.h"
#include "proto/wire.h"
#include "store/job.h"

using nlohmann::json;
namespace store = gpulane::store;
namespace proto = gpulane::proto;

namespace {

void DecodeIds(const json& value) {
  auto refs = store::JobRefsFromJson(value);
  if (!refs) return;
  for (const auto& ref : *refs) {
    FUZZ_CHECK(ref.id > 0, "job id %lld accepted", static_cast<long long>(ref.id));
    auto again = store::ParseJobRefs(store::FormatJobRef(ref));
    FUZZ_CHECK(again && again->size() == 1 && (*again)[0].id == ref.id && (*again)[0].task == ref.task,
               "job id %s does not read back", store::FormatJobRef(ref).c_str());
  }
}

void DecodeSpec(const json& spec_json) {
  store::JobSpec spec;
  if (!store::SpecFromJson(spec_json, &spec).ok()) return;
  FUZZ_CHECK(gpulane::sched::CheckRequest(spec.request).ok(), "an accepted spec's request fails CheckRequest");
  const json written = store::SpecToJson(spec);
  store::JobSpec again;
  gpulane::Status s = store::SpecFromJson(written, &again);
  FUZZ_CHECK(s.ok(), "a spec written by SpecToJson is refused: %s", s.ok() ? "" : s.error().message.c_str());
  const json rewritten = store::SpecToJson(again);
  FUZZ_CHECK(written == rewritten, "a spec does not read back as written:\n%s\n%s", written.dump().c_str(),
             rewritten.dump().c_str());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string payload(reinterpret_cast<const char*>(data), size);
  if (proto::NestingDepth(payload) > proto::kMaxRequestDepth) return 0;  // refused before parsing
  json req = json::parse(payload, nullptr, false);
  if (auto typed = proto::ParseRequest(req)) {
    auto again = proto::ParseRequest(proto::RequestToJson(*typed));
    FUZZ_CHECK(again && *again == *typed, "a %s request does not read back from its encoding",
               std::string(proto::OpName(*typed)).c_str());
  }
  if (req.is_discarded() || !req.is_object()) return 0;
  try {
    if (req.contains("v")) (void)req["v"].dump();  // the version error quotes it
    if (req.contains("op") && req["op"].is_string()) (void)req["op"].get<std::string>();
    if (req.contains("spec")) DecodeSpec(req["spec"]);
    if (req.contains("request")) {  // a ticket's or a spec's request on its own
      auto r = proto::RequestFromJson(req["request"]);
      if (r) {
        auto again = proto::RequestFromJson(proto::RequestToJson(*r));
        FUZZ_CHECK(again && proto::RequestToJson(*again) == proto::RequestToJson(*r), "a request does not read back");
      }
    }
    if (req.contains("array")) {
      if (auto indices = store::ArrayIndicesFromJson(req["array"])) {
        FUZZ_CHECK(!indices->empty() && indices->size() <= store::kMaxArrayTasks, "%zu array tasks", indices->size());
        for (int i : *indices) FUZZ_CHECK(i >= 0 && i <= store::kMaxArrayIndex, "array index %d", i);
        if (req.contains("array_argv"))  // submit --array-file: one command per task
          if (auto commands = store::ArrayArgvFromJson(req["array_argv"], indices->size())) {
            FUZZ_CHECK(commands->size() == indices->size(), "%zu commands for %zu tasks", commands->size(), indices->size());
            for (const auto& argv : *commands) FUZZ_CHECK(!argv.empty(), "an empty command accepted");
          }
      }
    }
    if (req.contains("ids") && req["ids"].is_array())
      for (const json& v : req["ids"]) DecodeIds(v);
    if (req.contains("id")) DecodeIds(req["id"]);
    if (req.contains("user")) (void)req["user"].get<std::string>();
    (void)req.value("hold", false);
  } catch (const json::exception&) {
    // answered with "malformed <op> request: ..." (daemon/handlers.cc)
  }
  return 0;
}
