#include "lease/records.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "proto/request_json.h"

namespace gpulane::lease {

using nlohmann::json;

namespace {

// An integer field as T: a JSON integer within T's range, else a type error (a damaged or foreign
// file). nlohmann's get<T> would convert a float such as 2e19 with undefined behaviour, and wrap a
// pid of 2^32 + 1 to 1.
template <typename T>
T IntegerAt(const json& j) {
  const bool fits = j.is_number_unsigned()  ? std::in_range<T>(j.get<std::uint64_t>())
                    : j.is_number_integer() ? std::in_range<T>(j.get<std::int64_t>())
                                            : false;
  if (!fits) throw json::type_error::create(302, "not an integer of its field's range", &j);
  return j.get<T>();
}

}  // namespace

json ToJson(const LeaseRecord& r) {
  json gpus = json::array();
  for (const auto& g : r.gpus) {
    json e = {{"uuid", g.uuid}};
    if (g.mem_bytes) e["mem_bytes"] = *g.mem_bytes;
    gpus.push_back(e);
  }
  json j = {{"job_id", r.job_id}, {"uid", r.uid}, {"user", r.user}, {"pid", r.pid}, {"pgid", r.pgid},
            {"label", r.label}, {"gpus", gpus}, {"started_s", r.started_s}};
  if (!r.parent.empty()) j["parent"] = r.parent;
  if (!r.job_text.empty()) j["job_text"] = r.job_text;
  if (r.time_limit_s) j["time_limit_s"] = *r.time_limit_s;
  if (r.preemptible) j["preemptible"] = true;
  if (r.requested_s) j["requested_s"] = *r.requested_s;
  return j;
}

json ToJson(const TicketRecord& r) {
  json j = {{"id", r.id}, {"seq", r.seq}, {"pid", r.pid}, {"request", proto::RequestToJson(r.request)}};
  if (!r.parent.empty()) j["parent"] = r.parent;
  if (!r.job_text.empty()) j["job_text"] = r.job_text;
  if (!r.label.empty()) j["label"] = r.label;
  return j;
}

bool FromJson(const json& j, LeaseRecord* r) {
  try {
    r->job_id = j.at("job_id").get<std::string>();
    r->user = j.value("user", "");
    // A lease without one (an older gpulane's, `gpulane run`'s) or with one that is no job id of
    // the notation names its job by job_id.
    const auto job_text = j.find("job_text");
    r->job_text = job_text != j.end() && job_text->is_string() && IsLeaseJobText(job_text->get_ref<const std::string&>())
                      ? job_text->get<std::string>()
                      : "";
    r->pid = IntegerAt<pid_t>(j.at("pid"));
    r->pgid = j.contains("pgid") ? IntegerAt<pid_t>(j["pgid"]) : 0;
    // "label" only: an older gpulane's "command" (the whole command line) is not carried on.
    const auto label = j.find("label");
    r->label = label != j.end() && label->is_string() ? label->get<std::string>() : "";
    r->started_s = j.value("started_s", 0.0);
    r->parent = j.value("parent", "");
    const auto preemptible = j.find("preemptible");
    r->preemptible = preemptible != j.end() && preemptible->is_boolean() && preemptible->get<bool>();
    // A time limit that is not a positive finite number of seconds (at most 100 years) is no time
    // limit: the lease's end is unknown, never "now".
    r->time_limit_s.reset();
    if (auto it = j.find("time_limit_s"); it != j.end() && it->is_number()) {
      const double t = it->get<double>();
      if (std::isfinite(t) && t > 0 && t <= 100.0 * 365 * 86400) r->time_limit_s = t;
    }
    r->requested_s.reset();
    if (auto it = j.find("requested_s"); it != j.end() && it->is_number()) {
      const double t = it->get<double>();
      if (std::isfinite(t) && t > 0) r->requested_s = t;
    }
    r->gpus.clear();
    for (const auto& g : j.at("gpus")) {
      LeasedGpu lg{g.at("uuid").get<std::string>(), std::nullopt};
      if (g.contains("mem_bytes")) lg.mem_bytes = IntegerAt<std::uint64_t>(g["mem_bytes"]);
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
    r->seq = IntegerAt<std::uint64_t>(j.at("seq"));
    if (r->seq > kMaxTicketSeq) return false;
    r->pid = IntegerAt<pid_t>(j.at("pid"));
    r->parent = j.value("parent", "");
    const auto job_text = j.find("job_text");
    r->job_text = job_text != j.end() && job_text->is_string() && IsTicketJobText(job_text->get_ref<const std::string&>())
                      ? job_text->get<std::string>()
                      : "";
    const auto label = j.find("label");
    r->label = label != j.end() && label->is_string() && label->get_ref<const std::string&>().size() <= kMaxLeaseLabelBytes
                   ? label->get<std::string>()
                   : "";
    auto request = proto::RequestFromJson(j.at("request"));
    if (!request) return false;
    r->request = std::move(request).value();
    return true;
  } catch (const json::exception&) {
    return false;
  }
}

sched::LineKey TicketKey(const TicketRecord& t, double line_priority) {
  return {t.request.priority, line_priority, t.seq, t.id};
}

bool LineOrder(const TicketRecord& a, const TicketRecord& b) { return sched::LineBefore(TicketKey(a, 0), TicketKey(b, 0)); }

bool IsNamed(const LeaseRecord& r, const std::string& name) {
  return r.name == name || std::find(r.other_names.begin(), r.other_names.end(), name) != r.other_names.end();
}

std::string Describe(const LeaseRecord& r) {
  if (!r.unreadable.empty()) return fmt::format("{} (an unreadable lease: {})", r.user, r.unreadable);
  return fmt::format("{} (job {})", r.user, JobText(r));
}

std::string DescribeWaiter(const TicketRecord& t) {
  if (!t.unreadable.empty()) return fmt::format("an unreadable ticket of {} ({})", t.request.user, t.unreadable);
  if (t.job_text.empty()) return fmt::format("a request of {}", t.request.user);
  return fmt::format("job {} ({})", t.job_text, t.request.user);
}

bool IsTicketJobText(std::string_view text) {
  if (text.size() > 1 && text.size() <= kMaxLeaseJobTextBytes && (text.front() == 'r' || text.front() == 'p'))
    return std::all_of(text.begin() + 1, text.end(), [](char c) { return c >= '0' && c <= '9'; });
  return IsLeaseJobText(text);
}

bool IsLeaseJobText(std::string_view text) {
  if (text.empty() || text.size() > kMaxLeaseJobTextBytes) return false;
  const std::size_t underscore = text.find('_');
  const auto digits = [](std::string_view part) {
    return !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  if (underscore == std::string_view::npos) return digits(text);
  return digits(text.substr(0, underscore)) && digits(text.substr(underscore + 1));
}

const std::string& JobText(const LeaseRecord& r) { return r.job_text.empty() ? r.job_id : r.job_text; }

bool HoldsGpu(const LeaseRecord& r, const std::string& uuid) {
  if (r.every_gpu) return true;
  return std::any_of(r.gpus.begin(), r.gpus.end(), [&](const LeasedGpu& g) { return g.uuid == uuid; });
}

std::string LabelForLease(std::string label) {
  if (label.size() <= kMaxLeaseLabelBytes) return label;
  std::size_t cut = kMaxLeaseLabelBytes - 3;
  while (cut > 0 && (static_cast<unsigned char>(label[cut]) & 0xC0) == 0x80) --cut;  // not inside a UTF-8 character
  label.resize(cut);
  return label + "...";
}

std::string ProgramLabel(const std::vector<std::string>& argv) {
  if (argv.empty()) return "";
  const std::string& program = argv.front();
  const std::size_t slash = program.rfind('/');
  return slash == std::string::npos ? program : program.substr(slash + 1);
}

std::vector<std::string> UuidsNamedIn(std::string_view bytes) {
  const auto uuid_char = [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' || c == '/';
  };
  std::vector<std::string> out;
  for (std::size_t at = 0; at + 4 <= bytes.size(); ++at) {
    const std::string_view prefix = bytes.substr(at, 4);
    if (prefix != "GPU-" && prefix != "MIG-") continue;
    std::size_t end = at + 4;
    while (end < bytes.size() && end - at < 128 && uuid_char(bytes[end])) ++end;
    std::string uuid(bytes.substr(at, end - at));
    if (std::find(out.begin(), out.end(), uuid) == out.end()) out.push_back(std::move(uuid));
    at = end - 1;
  }
  return out;
}

LeaseRecord UnreadableLease(std::string why, std::string_view bytes, bool complete) {
  LeaseRecord r;
  r.job_id = "unreadable";
  r.unreadable = std::move(why);
  r.label = "?";
  if (complete)
    for (std::string& uuid : UuidsNamedIn(bytes)) r.gpus.push_back({std::move(uuid), std::nullopt});
  r.every_gpu = r.gpus.empty();
  return r;
}

TicketRecord UnreadableTicket(std::string why, std::string_view bytes, bool complete) {
  TicketRecord t;
  t.id = "unreadable";
  t.unreadable = std::move(why);
  std::vector<std::string> named;
  if (complete) named = UuidsNamedIn(bytes);
  std::erase_if(named, [](const std::string& uuid) { return uuid.rfind("GPU-", 0) != 0; });  // a request is for whole GPUs
  if (named.size() > sched::kMaxGpuCount) named.clear();  // more than any request may ask: every GPU
  t.every_gpu = named.empty();
  t.request.count = std::max<unsigned>(1, static_cast<unsigned>(named.size()));
  if (!t.every_gpu) t.request.allowed_uuids = std::move(named);
  return t;
}

}  // namespace gpulane::lease
