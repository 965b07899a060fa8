// Lease and ticket files as lease/lease_dir.cc reads them from the shared lease directory, where
// any user may write one: the file's bytes through the JSON parser, then lease::FromJson as a
// lease (".lease") and as a ticket (".wait").
// And the same bytes as a live file gpulane cannot read (lease::UnreadableLease, UnreadableTicket)
// and as a label a lease keeps (lease::LabelForLease).
// Properties: a record that is accepted writes back (ToJson) to JSON that reads as the same
// record; a ticket's seq is at most kMaxTicketSeq and its request passes sched::CheckRequest.
#include <cstdint>
#include <string>

#include "fuzz_check.h"
#include "lease/records.h"
#include "proto/request_json.h"

using nlohmann::json;
namespace lease = gpulane::lease;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string content(reinterpret_cast<const char*>(data), size);
  // As an unreadable file (issue 23): it holds only what its bytes name, else every GPU; as a
  // ticket, a request CheckRequest accepts.
  const lease::LeaseRecord unreadable = lease::UnreadableLease("fuzz", content, true);
  FUZZ_CHECK(unreadable.every_gpu == unreadable.gpus.empty(), "an unreadable lease holds nothing");
  for (const lease::LeasedGpu& g : unreadable.gpus)
    FUZZ_CHECK(content.find(g.uuid) != std::string::npos && !g.mem_bytes, "an unreadable lease holds %s", g.uuid.c_str());
  const lease::TicketRecord waiting = lease::UnreadableTicket("fuzz", content, true);
  FUZZ_CHECK(gpulane::sched::CheckRequest(waiting.request).ok(), "an unreadable ticket's request fails CheckRequest");
  FUZZ_CHECK(lease::LabelForLease(content).size() <= lease::kMaxLeaseLabelBytes + 40, "a lease's label is unbounded");
  auto j = json::parse(content, nullptr, false);
  if (j.is_discarded()) return 0;

  lease::LeaseRecord r;
  if (lease::FromJson(j, &r)) {
    const json written = lease::ToJson(r);
    lease::LeaseRecord again;
    FUZZ_CHECK(lease::FromJson(written, &again), "a lease written by ToJson is refused: %s", written.dump().c_str());
    FUZZ_CHECK(lease::ToJson(again) == written, "a lease does not read back: %s", written.dump().c_str());
  }

  lease::TicketRecord t;
  if (lease::FromJson(j, &t)) {
    FUZZ_CHECK(t.seq <= lease::kMaxTicketSeq, "seq %llu accepted", static_cast<unsigned long long>(t.seq));
    FUZZ_CHECK(gpulane::sched::CheckRequest(t.request).ok(), "a ticket's request fails CheckRequest");
    const json written = lease::ToJson(t);
    lease::TicketRecord again;
    FUZZ_CHECK(lease::FromJson(written, &again), "a ticket written by ToJson is refused: %s", written.dump().c_str());
    FUZZ_CHECK(lease::ToJson(again) == written, "a ticket does not read back: %s", written.dump().c_str());
  }
  return 0;
}
