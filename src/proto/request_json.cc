#include "proto/request_json.h"

#include <fmt/format.h>

#include <limits>

#include "proto/request_fields.h"
#include "util/json_tree_writer.h"

namespace gpulane::proto {

using nlohmann::json;

json RequestToJson(const sched::Request& r) {
  JsonTreeWriter w;
  WriteRequest(w, r);
  return w.Take();
}

namespace {

// Reads field `key` of `j` into `out` when present; false (with *why) when it has the wrong type.
template <typename T>
bool ReadField(const json& j, const char* key, T* out, std::string* why) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return true;
  if constexpr (std::is_same_v<T, bool>) {
    if (!it->is_boolean()) return *why = fmt::format("\"{}\" must be true or false", key), false;
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!it->is_string()) return *why = fmt::format("\"{}\" must be a string", key), false;
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!it->is_number()) return *why = fmt::format("\"{}\" must be a number", key), false;
  } else if constexpr (std::is_unsigned_v<T>) {
    // A whole number >= 0, however it was made (parsed JSON holds one as unsigned, a C++ int as signed).
    const bool whole = it->is_number_unsigned() || (it->is_number_integer() && it->template get<std::int64_t>() >= 0);
    if (!whole) return *why = fmt::format("\"{}\" must be a whole number >= 0", key), false;
    if (it->template get<std::uint64_t>() > std::numeric_limits<T>::max())
      return *why = fmt::format("\"{}\" is too large", key), false;
  } else {
    if (!it->is_number_integer()) return *why = fmt::format("\"{}\" must be a whole number", key), false;
    if (it->is_number_unsigned() && it->template get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<T>::max()))
      return *why = fmt::format("\"{}\" is out of range", key), false;
    const auto v = it->template get<std::int64_t>();
    if (v > std::numeric_limits<T>::max() || v < std::numeric_limits<T>::min())
      return *why = fmt::format("\"{}\" is out of range", key), false;
  }
  *out = it->template get<T>();
  return true;
}

template <typename T>
bool ReadOptional(const json& j, const char* key, std::optional<T>* out, std::string* why) {
  if (!j.contains(key) || j[key].is_null()) return true;
  T value{};
  if (!ReadField(j, key, &value, why)) return false;
  *out = value;
  return true;
}

}  // namespace

Result<sched::Request> RequestFromJson(const json& j) {
  auto bad = [](const std::string& why) { return MakeError(ErrorKind::kInvalidArgument, "request: " + why); };
  if (!j.is_object()) return bad("must be a JSON object");
  sched::Request r;
  std::optional<std::string> order, preemptible;
  std::string why;
  if (!ReadField(j, "count", &r.count, &why) || !ReadOptional(j, "mem_bytes", &r.mem_bytes, &why) ||
      !ReadOptional(j, "min_free_bytes", &r.min_free_bytes, &why) ||
      !ReadOptional(j, "max_util_pct", &r.max_util_pct, &why) ||
      !ReadField(j, "share_foreign", &r.share_foreign, &why) || !ReadOptional(j, "order", &order, &why) ||
      !ReadField(j, "gpu_list", &r.gpu_list, &why) || !ReadField(j, "uid", &r.uid, &why) ||
      !ReadField(j, "user", &r.user, &why) || !ReadField(j, "priority", &r.priority, &why) ||
      !ReadField(j, "submit_time_s", &r.submit_time_s, &why) || !ReadOptional(j, "time_limit_s", &r.time_limit_s, &why) ||
      !ReadField(j, "partition", &r.partition, &why) || !ReadOptional(j, "preemptible", &preemptible, &why) ||
      !ReadField(j, "mig_profile", &r.mig_profile, &why) || !ReadField(j, "preemptions", &r.preemptions, &why))
    return bad(why);
  if (preemptible) {
    auto parsed = sched::ParsePreemptible(*preemptible);
    if (!parsed) return bad("\"preemptible\" must be no, requeue or cancel");
    r.preemptible = *parsed;
  }
  if (order) {
    auto parsed_order = sched::ParseOrder(*order);
    if (!parsed_order) return bad(fmt::format("\"order\" must be memory, util, pci or bestfit, not '{}'", *order));
    r.order = *parsed_order;
  }
  if (auto it = j.find("allowed_uuids"); it != j.end() && !it->is_null()) {
    if (!it->is_array()) return bad("\"allowed_uuids\" must be a list of GPU UUIDs");
    if (it->size() > sched::kMaxGpuCount) return bad("\"allowed_uuids\" names too many GPUs");
    std::vector<std::string> uuids;
    for (const auto& u : *it) {
      if (!u.is_string()) return bad("\"allowed_uuids\" must be a list of GPU UUIDs");
      uuids.push_back(u.get<std::string>());
    }
    r.allowed_uuids = std::move(uuids);
  }
  if (Status s = sched::CheckRequest(r); !s.ok()) return s.error();
  return r;
}

}  // namespace gpulane::proto
