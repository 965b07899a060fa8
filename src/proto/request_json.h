#pragma once
// The JSON form of sched::Request: one codec for the wire (submit), the store (a job's spec) and
// lease tickets, so the request is read back exactly as it was written, never re-parsed by hand.
//
//   {"count": 2, "mem_bytes": 32212254720, "min_free_bytes": 0, "max_util_pct": 50,
//    "share_foreign": false, "order": "memory", "gpu_list": "0,1", "allowed_uuids": ["GPU-..."],
//    "uid": 1000, "user": "alice", "priority": 0, "submit_time_s": 1764580000.25, "time_limit_s": 14400,
//    "partition": "day"}
//
// Optional fields are absent when unset (allowed_uuids absent: any GPU; partition absent: none,
// as written before partitions existed; order absent: no --order given, the request's default
// order, sched::DefaultOrder). Requests written before that distinction always carry "order"
// (most free, "memory", unless the user chose another) and so read back with the order they were
// placed by then. Sizes are bytes.
#include <nlohmann/json.hpp>

#include "sched/request.h"
#include "util/result.h"

namespace gpulane::proto {

/// The request as JSON (fields above).
nlohmann::json RequestToJson(const sched::Request& request);

/// Reads a request written by RequestToJson and checks it (sched::CheckRequest). Missing optional
/// fields take their defaults. Errors: kInvalidArgument naming the field that is missing, of the
/// wrong type or out of range.
Result<sched::Request> RequestFromJson(const nlohmann::json& j);

}  // namespace gpulane::proto
