#include "cli/top_source.h"

#include <unistd.h>

#include <algorithm>

#include <fmt/format.h>

#include "cli/common.h"
#include "daemon/paths.h"
#include "lease/occupancy.h"
#include "proto/call.h"
#include "render/queue_table.h"
#include "util/units.h"

namespace gpulane::cli {
namespace {

using nlohmann::json;

constexpr double kAskTimeoutS = 2;

template <typename T>
std::optional<T> Field(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return it->get<T>();
}

std::string RawText(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

TopGpu GpuOf(const GpuDevice& d, const std::map<std::string, std::string>& holders) {
  TopGpu g;
  g.index = d.pci_index;
  g.name = d.name;
  g.error = d.error;
  g.util_pct = d.utilization_gpu_pct;
  g.memory_used_bytes = d.memory_used_bytes;
  g.memory_total_bytes = d.memory_total_bytes;
  g.temperature_c = d.temperature_c;
  g.power_mw = d.power_draw_mw;
  g.power_limit_mw = d.power_limit_mw;
  g.processes_known = d.processes.has_value() || d.failed();
  if (auto it = holders.find(d.uuid); it != holders.end()) g.holders = it->second;
  return g;
}

// "2", "1x20.0 GiB": what a job asks for, as `gpulane queue` shows it.
std::string GpusAsked(const json& job) {
  const json request = job.contains("spec") && job["spec"].is_object() ? job["spec"].value("request", json::object()) : json::object();
  std::string out = std::to_string(Field<unsigned>(request, "count").value_or(1));
  if (auto mem = Field<std::uint64_t>(request, "mem_bytes")) out += "x" + FormatBytes(*mem);
  return out;
}

TopJob JobOf(const json& j, double now_s) {
  TopJob job;
  job.id = j.contains("id_text") ? RawText(j, "id_text") : std::to_string(Field<std::int64_t>(j, "id").value_or(0));
  job.user = RawText(j, "user");
  job.name = j.contains("spec") && j["spec"].is_object() ? RawText(j["spec"], "name") : "";
  job.state = StateLabelOf(RawText(j, "state"));
  job.gpus = GpusAsked(j);
  if (auto submitted = Field<double>(j, "submit_time")) job.age_s = std::max(0.0, now_s - *submitted);
  std::string where;
  if (job.state == "running" && j.contains("gpu_indices") && j["gpu_indices"].is_array())
    for (const auto& i : j["gpu_indices"])
      if (i.is_number_unsigned()) where += fmt::format("{}GPU{}", where.empty() ? "" : ",", i.get<unsigned>());
  job.where = where.empty() ? RawText(j, "reason") : where;
  return job;
}

TopPoint PointOf(const json& p) {
  return {Field<double>(p, "t").value_or(0), Field<double>(p, "util_gpu_pct"), Field<double>(p, "memory_used_bytes")};
}

}  // namespace

TopSource::TopSource(std::unique_ptr<GpuBackend> backend, double span_s, const gpulane::Clock& clock)
    : backend_(std::move(backend)), span_s_(span_s), clock_(clock), sockets_(daemon::SnapshotSockets()) {}

std::optional<json> TopSource::Ask(const json& request) {
  for (const std::string& socket : sockets_) {
    const int fd = proto::ConnectTo(socket);
    if (fd < 0) continue;
    if (Status trusted = proto::CheckDaemonPeer(fd, socket); !trusted.ok()) {
      close(fd);
      continue;
    }
    auto reply = proto::Exchange(fd, request, kAskTimeoutS, true);
    if (reply) return std::move(reply).value();
  }
  return std::nullopt;
}

void TopSource::UpdateHistory(const std::string& uuid, double now_s) {
  std::vector<TopPoint>& points = history_[uuid];
  const double since_s = points.empty() ? now_s - span_s_ : points.back().time_s;
  auto reply = Ask({{"op", "history"}, {"gpu", uuid}, {"since_s", since_s}});
  if (reply && reply->value("ok", false) && (*reply)["points"].is_array()) {
    if (auto interval = Field<double>(*reply, "resolution_s"); interval && *interval > 0) sample_interval_s_ = *interval;
    for (const json& p : (*reply)["points"]) {
      TopPoint point = PointOf(p);
      if (points.empty() || point.time_s > points.back().time_s) points.push_back(point);
    }
  }
  const auto old = std::find_if(points.begin(), points.end(), [&](const TopPoint& p) { return p.time_s >= now_s - span_s_; });
  points.erase(points.begin(), old);
}

void TopSource::AddTelemetry(TopModel& model, const GpuSnapshot& snapshot) {
  job_util_pct_.clear();
  auto reply = Ask({{"op", "telemetry"}});
  if (!reply) {
    model.notes.push_back("no gpulane daemon answers: readings straight from NVML, no history (sparklines) and no queue");
    history_.clear();
    return;
  }
  if (!reply->value("ok", false)) {
    model.notes.push_back("no history (sparklines): " + reply->value("error", std::string("the daemon has no telemetry")));
    history_.clear();
    return;
  }
  if ((*reply)["jobs"].is_array())
    for (const json& j : (*reply)["jobs"])
      if (auto util = Field<double>(j, "util_pct")) job_util_pct_[{RawText(j, "job_id"), RawText(j, "gpu_uuid")}] = *util;
  for (std::size_t i = 0; i < snapshot.devices.size() && i < model.gpus.size(); ++i) {
    UpdateHistory(snapshot.devices[i].uuid, model.now_s);
    model.gpus[i].history = history_[snapshot.devices[i].uuid];
  }
  model.has_history = true;
  model.sample_interval_s = sample_interval_s_;
}

void TopSource::AddQueue(TopModel& model) {
  auto reply = Ask({{"op", "queue"}});
  if (!reply) return;
  if (!reply->value("ok", false)) {
    model.notes.push_back("no queue: " + reply->value("error", std::string("the daemon refused")));
    return;
  }
  model.queue_known = true;
  if ((*reply)["jobs"].is_array())
    for (const json& j : (*reply)["jobs"]) model.jobs.push_back(JobOf(j, model.now_s));
}

Result<TopModel> TopSource::Refresh(double now_s) {
  ReadOptions options;
  options.topology = false;
  auto snapshot = backend_->Read(options);
  if (!snapshot) return snapshot.error();
  AnnotateProcesses(*snapshot, processes_);
  const lease::DirContents contents = ReadLeaseDirIfPresent(clock_);
  const std::vector<std::vector<int>> owners = lease::ProcessOwners(*snapshot, contents.leases, processes_);

  TopModel model;
  model.hostname = HostName();
  model.now_s = now_s;
  model.span_s = span_s_;
  model.driver_version = snapshot->driver_version;
  const std::map<std::string, std::string> holders = LeaseHolders(contents.leases, *snapshot);
  for (const GpuDevice& d : snapshot->devices) model.gpus.push_back(GpuOf(d, holders));
  AddTelemetry(model, *snapshot);
  AddQueue(model);
  for (const std::string& warning : snapshot->warnings) model.notes.push_back("warning: " + warning);

  for (std::size_t di = 0; di < snapshot->devices.size(); ++di) {
    const GpuDevice& d = snapshot->devices[di];
    if (!d.processes) continue;
    for (std::size_t k = 0; k < d.processes->size(); ++k) {
      const GpuProcess& p = (*d.processes)[k];
      TopProcess row{d.pci_index, p.pid, p.user, "", p.used_memory_bytes, std::nullopt, p.cmdline ? p.cmdline : p.command};
      const int owner = di < owners.size() && k < owners[di].size() ? owners[di][k] : -1;
      // The sampler's figures are keyed by the lease's job id; the row names the job as people do ("12_3").
      const lease::LeaseRecord* lease = owner >= 0 ? &contents.leases[static_cast<std::size_t>(owner)] : nullptr;
      if (lease) row.job_id = lease::JobText(*lease);
      if (auto it = lease ? job_util_pct_.find({lease->job_id, d.uuid}) : job_util_pct_.end(); it != job_util_pct_.end())
        row.util_pct = it->second;
      else if (p.sm_util_pct) row.util_pct = *p.sm_util_pct;
      model.processes.push_back(std::move(row));
    }
  }
  return model;
}

}  // namespace gpulane::cli
