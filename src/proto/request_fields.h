#pragma once
// A request's JSON members, written once (issue 25, item 4) for every writer: the tree writer
// behind proto::RequestToJson (the wire, the store, lease files) and the text writer of the
// streamed `queue --json` (render/queue_json.cc). Members in sorted order (nlohmann keeps an
// object's members sorted, and the text writer must write the same bytes); optional ones only when
// set, so a request that sets nothing new reads the same to an older reader.
#include "sched/request.h"

namespace gpulane::proto {

template <typename W>
void WriteRequest(W& w, const sched::Request& r) {
  w.BeginObject();
  if (r.allowed_uuids) {
    w.Key("allowed_uuids");
    w.Strings(*r.allowed_uuids);
  }
  w.Key("count");
  w.Int(r.count);
  w.Key("gpu_list");
  w.String(r.gpu_list);
  if (r.max_util_pct) {
    w.Key("max_util_pct");
    w.Int(*r.max_util_pct);
  }
  if (r.mem_bytes) {
    w.Key("mem_bytes");
    w.Int(*r.mem_bytes);
  }
  if (!r.mig_profile.empty()) {
    w.Key("mig_profile");
    w.String(r.mig_profile);
  }
  if (r.min_free_bytes) {
    w.Key("min_free_bytes");
    w.Int(*r.min_free_bytes);
  }
  if (r.order) {  // absent when no --order was given
    w.Key("order");
    w.String(sched::OrderName(*r.order));
  }
  if (!r.partition.empty()) {
    w.Key("partition");
    w.String(r.partition);
  }
  if (r.preemptible != sched::Preemptible::kNo) {
    w.Key("preemptible");
    w.String(sched::PreemptibleName(r.preemptible));
  }
  if (r.preemptions > 0) {
    w.Key("preemptions");
    w.Int(r.preemptions);
  }
  w.Key("priority");
  w.Int(r.priority);
  w.Key("share_foreign");
  w.Bool(r.share_foreign);
  w.Key("submit_time_s");
  w.Double(r.submit_time_s);
  if (r.time_limit_s) {
    w.Key("time_limit_s");
    w.Double(*r.time_limit_s);
  }
  w.Key("uid");
  w.Int(r.uid);
  w.Key("user");
  w.String(r.user);
  w.EndObject();
}

}  // namespace gpulane::proto
