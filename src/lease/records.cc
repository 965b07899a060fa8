#include "lease/records.h"

#include <fmt/format.h>

namespace gpulane::lease {

using nlohmann::json;

json ToJson(const LeaseRecord& r) {
  json gpus = json::array();
  for (const auto& g : r.gpus) {
    json e = {{"uuid", g.uuid}};
    if (g.mem_bytes) e["mem_bytes"] = *g.mem_bytes;
    gpus.push_back(e);
  }
  return {{"job_id", r.job_id}, {"user", r.user}, {"pid", r.pid}, {"pgid", r.pgid},
          {"command", r.command}, {"gpus", gpus}, {"started_s", r.started_s}};
}

json ToJson(const TicketRecord& r) {
  json j = {{"id", r.id}, {"seq", r.seq}, {"priority", r.priority}, {"user", r.user}, {"pid", r.pid}, {"count", r.count},
            {"share_foreign", r.share_foreign}, {"allowed_uuids", r.allowed_uuids}, {"order", r.order}};
  if (r.mem_bytes) j["mem_bytes"] = *r.mem_bytes;
  if (r.min_free_bytes) j["min_free_bytes"] = *r.min_free_bytes;
  if (r.max_util_pct) j["max_util_pct"] = *r.max_util_pct;
  return j;
}

bool FromJson(const json& j, LeaseRecord* r) {
  try {
    r->job_id = j.at("job_id").get<std::string>();
    r->user = j.value("user", "");
    r->pid = j.at("pid").get<pid_t>();
    r->pgid = j.value("pgid", 0);
    r->command = j.value("command", "");
    r->started_s = j.value("started_s", 0.0);
    r->gpus.clear();
    for (const auto& g : j.at("gpus")) {
      LeasedGpu lg{g.at("uuid").get<std::string>(), std::nullopt};
      if (g.contains("mem_bytes")) lg.mem_bytes = g["mem_bytes"].get<std::uint64_t>();
      r->gpus.push_back(lg);
    }
    return true;
  } catch (const json::exception&) {
    return false;
  }
}

bool FromJson(const json& j, TicketRecord* r) {
  try {
    r->id = j.at("id").get<std::string>();
    r->seq = j.at("seq").get<std::uint64_t>();
    r->priority = j.value("priority", 0);
    r->user = j.value("user", "");
    r->pid = j.at("pid").get<pid_t>();
    r->count = j.at("count").get<unsigned>();
    r->share_foreign = j.value("share_foreign", false);
    r->allowed_uuids = j.at("allowed_uuids").get<std::vector<std::string>>();
    r->order = j.value("order", "memory");
    if (j.contains("mem_bytes")) r->mem_bytes = j["mem_bytes"].get<std::uint64_t>();
    if (j.contains("min_free_bytes")) r->min_free_bytes = j["min_free_bytes"].get<std::uint64_t>();
    if (j.contains("max_util_pct")) r->max_util_pct = j["max_util_pct"].get<unsigned>();
    return true;
  } catch (const json::exception&) {
    return false;
  }
}

std::string Describe(const LeaseRecord& r) { return fmt::format("{} (job {})", r.user, r.job_id); }

}  // namespace gpulane::lease
