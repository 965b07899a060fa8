#include "lease/records.h"

#include <fmt/format.h>

#include "proto/request_json.h"

namespace gpulane::lease {

using nlohmann::json;

json ToJson(const LeaseRecord& r) {
  json gpus = json::array();
  for (const auto& g : r.gpus) {
    json e = {{"uuid", g.uuid}};
    if (g.mem_bytes) e["mem_bytes"] = *g.mem_bytes;
    gpus.push_back(e);
  }
  json j = {{"job_id", r.job_id}, {"user", r.user}, {"pid", r.pid}, {"pgid", r.pgid},
            {"command", r.command}, {"gpus", gpus}, {"started_s", r.started_s}};
  if (!r.parent.empty()) j["parent"] = r.parent;
  return j;
}

json ToJson(const TicketRecord& r) {
  json j = {{"id", r.id}, {"seq", r.seq}, {"pid", r.pid}, {"request", proto::RequestToJson(r.request)}};
  if (!r.parent.empty()) j["parent"] = r.parent;
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
    r->parent = j.value("parent", "");
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
    if (r->seq > kMaxTicketSeq) return false;
    r->pid = j.at("pid").get<pid_t>();
    r->parent = j.value("parent", "");
    auto request = proto::RequestFromJson(j.at("request"));
    if (!request) return false;
    r->request = std::move(request).value();
    return true;
  } catch (const json::exception&) {
    return false;
  }
}

bool LineOrder(const TicketRecord& a, const TicketRecord& b) {
  if (a.request.priority != b.request.priority) return a.request.priority > b.request.priority;
  if (a.seq != b.seq) return a.seq < b.seq;
  return a.id < b.id;
}

std::string Describe(const LeaseRecord& r) { return fmt::format("{} (job {})", r.user, r.job_id); }

}  // namespace gpulane::lease
