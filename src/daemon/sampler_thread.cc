#include "daemon/sampler_thread.h"

#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <set>

#include <fmt/format.h>

#include "lease/occupancy.h"
#include "render/metrics_text.h"
#include "proto/telemetry_json.h"
#include "store/job_view.h"

namespace gpulane::daemon {
namespace {

using nlohmann::json;

// gpulane_queue_wait_seconds's buckets: a second to a day.
constexpr double kWaitBucketsS[] = {1, 10, 60, 300, 1800, 3600, 4 * 3600, 12 * 3600, 86400};
// Stored history and records are pruned this often.
constexpr double kPruneEveryS = 3600;
// A question waits at most this long for a sample in progress (reads of a lost GPU can hang).
constexpr std::size_t kMaxQuestions = 4096;

json Error(const std::string& code, const std::string& message) {
  return {{"v", 2}, {"ok", false}, {"code", code}, {"error", message}};
}

json Ok(json body) {
  body["v"] = 2;
  body["ok"] = true;
  return body;
}

std::string LocalDay(double t) {
  const std::time_t when = static_cast<std::time_t>(t);
  std::tm tm{};
  localtime_r(&when, &tm);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", &tm);
  return buf;
}

}  // namespace

SamplerThread::SamplerThread(SamplerSettings settings, std::unique_ptr<GpuBackend> backend, LeaseSource leases,
                             std::unique_ptr<store::HistoryStore> history, const os::Env& env,
                             std::function<void(const std::string&)> log)
    : sampler_(std::move(settings)),
      backend_(std::move(backend)),
      leases_(std::move(leases)),
      processes_(env.processes),
      history_(std::move(history)),
      clock_(env.clock),
      log_(std::move(log)),
      wait_buckets_(std::size(kWaitBucketsS) + 1, 0) {
  event_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  thread_ = std::thread([this] { Run(); });
}

SamplerThread::~SamplerThread() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (history_) {
    if (Status s = history_->AddRows(sampler_.Flush()); !s.ok()) log_(s.error().message);
  }
  if (event_fd_ >= 0) close(event_fd_);
}

void SamplerThread::Ask(int fd, std::uint64_t serial, proto::SamplerRequest request, json extra) {
  {
    std::lock_guard lock(mu_);
    if (event_fd_ >= 0 && questions_.size() < kMaxQuestions) {
      questions_.push_back({fd, serial, std::move(request), std::move(extra)});
      wake_.notify_all();
      return;
    }
    answers_.push_back({fd, serial, Error("unavailable", "the daemon's sampler is busy: ask again in a moment")});
  }
  if (event_fd_ >= 0) {
    const std::uint64_t one = 1;
    (void)!write(event_fd_, &one, sizeof one);
  }
}

std::vector<SamplerThread::Answer> SamplerThread::Take() {
  std::uint64_t count = 0;
  if (event_fd_ >= 0) (void)!read(event_fd_, &count, sizeof count);
  std::lock_guard lock(mu_);
  return std::exchange(answers_, {});
}

std::uint64_t SamplerThread::samples() const {
  std::lock_guard lock(mu_);
  return samples_;
}

void SamplerThread::Run() {
  const double interval_s = std::max(sampler_.settings().interval_s, 0.05);
  double next_s = clock_.MonotonicS();
  while (true) {
    std::deque<Question> questions;
    {
      std::unique_lock lock(mu_);
      const double wait_s = std::max(0.0, next_s - clock_.MonotonicS());
      wake_.wait_for(lock, std::chrono::duration<double>(wait_s), [&] { return stop_ || !questions_.empty(); });
      if (stop_) return;
      questions.swap(questions_);
    }
    if (!questions.empty()) {
      std::vector<Answer> answers;
      for (const Question& q : questions) answers.push_back({q.fd, q.serial, AnswerOf(q)});
      {
        std::lock_guard lock(mu_);
        for (auto& a : answers) answers_.push_back(std::move(a));
      }
      const std::uint64_t one = 1;
      (void)!write(event_fd_, &one, sizeof one);
      StoreEnded();
    }
    if (clock_.MonotonicS() >= next_s) {
      SampleOnce();
      next_s += interval_s;
      // Fell behind (a slow read, a suspended machine): the next sample an interval from now.
      if (next_s < clock_.MonotonicS()) next_s = clock_.MonotonicS() + interval_s;
    }
  }
}

void SamplerThread::SampleOnce() {
  ReadOptions options;
  options.topology = false;
  options.telemetry = true;
  // The first read in parallel (any first-query costs overlap); later ones on this thread: a
  // thread a GPU each second cost more than the reads (bench/results/sampler-floor-2026-12-06.md).
  options.parallel = !read_once_;
  read_once_ = true;
  auto snapshot = backend_->Read(options);
  const double now_s = clock_.WallS();
  if (!snapshot) {
    if (snapshot.error().message != last_error_) log_("sampler: " + (last_error_ = snapshot.error().message));
    return;
  }
  AnnotateProcesses(*snapshot, processes_);
  const std::vector<lease::LeaseRecord> leases = leases_.all();
  const auto owners = lease::ProcessOwners(*snapshot, leases, processes_);
  std::set<std::string> known;
  for (const auto& [name, job] : sampler_.live()) known.insert(name);
  Sampler::Output out = sampler_.Take(now_s, *snapshot, leases, owners);
  // Waits of the leases seen for the first time.
  for (const auto& lease : leases) {
    if (known.count(lease.name) || !lease.requested_s || *lease.requested_s > lease.started_s) continue;
    const double wait = lease.started_s - *lease.requested_s;
    wait_sum_s_ += wait;
    for (std::size_t b = 0; b < std::size(kWaitBucketsS); ++b)
      if (wait <= kWaitBucketsS[b]) ++wait_buckets_[b];
    ++wait_buckets_.back();
  }
  std::map<std::string, sched::UsageRecord> outside = OutsideLeaseUsage(leases, *snapshot, now_s);
  for (auto& [name, record] : outside)  // a start claimed in the future counts from the first sample
    if (auto seen = outside_live_.find(name); seen != outside_live_.end())
      record.start_s = std::min(record.start_s, seen->second.start_s);
  {
    std::lock_guard lock(mu_);
    ++samples_;
    for (auto& [name, record] : outside_live_)
      if (!outside.count(name)) {
        record.end_s = now_s;
        lease_usage_.ended.push_back(std::move(record));
      }
    lease_usage_.live.clear();
    for (const auto& [name, record] : outside) lease_usage_.live.push_back(record);
  }
  outside_live_ = std::move(outside);
  const bool room = history_ && HistoryRoom(now_s);
  Record(now_s, out.anomalies, room);
  if (!sampler_.settings().hpc_job_mapping_dir.empty()) WriteJobMapping();
  if (!history_) return;
  auto note = [&](const Status& s) {
    if (!s.ok() && s.error().message != last_error_) log_("sampler: " + (last_error_ = s.error().message));
  };
  if (room) {  // else not stored (NoRoomForHistory); pruning goes on below and frees room
    note(history_->AddRows(out.rows));
    for (const auto& record : out.finished) note(history_->AddUsage(record));
  }
  if (now_s >= next_prune_s_) {
    Prune(now_s);
    next_prune_s_ = now_s + kPruneEveryS;
  }
}

void SamplerThread::Record(double now_s, const telemetry::AnomalyChanges& changes, bool keep) {
  // Ends first: an anomaly raised again in the same sample (a new Xid) ends its old event.
  for (const auto& key : changes.ended) {
    auto it = event_ids_.find(key);
    if (it == event_ids_.end()) continue;
    if (keep)
      if (Status s = history_->ClearEvent(it->second, now_s); !s.ok()) log_(s.error().message);
    event_ids_.erase(it);
  }
  for (const auto& a : changes.started) {
    log_(fmt::format("anomaly: {}", a.message));
    if (!keep) continue;
    store::Event e;
    e.time_s = now_s;
    e.kind = a.kind;
    e.gpu_uuid = a.gpu_uuid;
    e.gpu_index = a.gpu_index;
    e.job_id = a.job_id;
    e.user = a.user;
    e.message = a.message;
    if (Status s = history_->AddEvent(e); s.ok()) event_ids_[a.key] = e.id;
    else log_(s.error().message);
  }
  for (const auto& cancel : changes.cancels) {
    const std::string& job_text = cancel.job_text.empty() ? cancel.job_id : cancel.job_text;  // "12_3"
    log_(fmt::format("anomaly: job {} ({}) {}", job_text, cancel.user, cancel.message));
    if (keep) {
      store::Event e;
      e.time_s = now_s;
      e.kind = "idle_cancel";
      e.job_id = cancel.job_id;
      e.user = cancel.user;
      e.message = fmt::format("job {} ({}) {}", job_text, cancel.user, cancel.message);
      e.cleared_s = now_s;
      if (Status s = history_->AddEvent(e); !s.ok()) log_(s.error().message);
    }
    // `gpulane run` (no queued job to cancel): SIGTERM to the process holding its lease, which
    // forwards it to the job and ends as if interrupted.
    auto live = sampler_.live().find(cancel.lease);
    if (!cancel.job_id.empty() && cancel.job_id[0] == 'r') {
      if (live != sampler_.live().end() && live->second.lease.holder > 1) kill(live->second.lease.holder, SIGTERM);
      continue;
    }
    {
      std::lock_guard lock(mu_);
      cancels_.push_back(cancel);
    }
    const std::uint64_t one = 1;
    (void)!write(event_fd_, &one, sizeof one);
  }
  if (changes.started.empty() && changes.ended.empty()) return;
  Marks marks;
  marks.drained = sampler_.anomalies().Drained();
  for (const auto& [key, a] : sampler_.anomalies().current()) marks.anomalies[a.gpu_uuid].push_back(a.message);
  std::lock_guard lock(mu_);
  marks_ = std::move(marks);
}

SamplerThread::LeaseUsage SamplerThread::TakeLeaseUsage() {
  std::lock_guard lock(mu_);
  LeaseUsage out;
  out.ended = std::exchange(lease_usage_.ended, {});
  out.live = lease_usage_.live;
  return out;
}

std::vector<telemetry::IdleCancel> SamplerThread::TakeCancels() {
  std::lock_guard lock(mu_);
  return std::exchange(cancels_, {});
}

SamplerThread::Marks SamplerThread::CurrentMarks() const {
  std::lock_guard lock(mu_);
  return marks_;
}

void SamplerThread::WriteJobMapping() {
  const std::string& dir = sampler_.settings().hpc_job_mapping_dir;
  for (const auto& [name, content] : JobMappingFiles(sampler_.latest(), sampler_.live())) {
    auto it = mapping_written_.find(name);
    if (it != mapping_written_.end() && it->second == content) continue;
    // Written whole and renamed into place: dcgm-exporter never reads half a file.
    const std::string path = dir + "/" + name, temp = path + ".tmp";
    std::FILE* f = std::fopen(temp.c_str(), "we");
    const bool ok = f && std::fwrite(content.data(), 1, content.size(), f) == content.size() && std::fclose(f) == 0 &&
                    std::rename(temp.c_str(), path.c_str()) == 0;
    if (!ok) {
      const int err = errno;
      std::remove(temp.c_str());
      errno = err;
      const std::string why = fmt::format("cannot write the job mapping file {}: {}", path, std::strerror(errno));
      if (why != last_error_) log_("sampler: " + (last_error_ = why));
      continue;
    }
    mapping_written_[name] = content;
  }
}

bool SamplerThread::HistoryRoom(double now_s) {
  const SamplerSettings& s = sampler_.settings();
  if (!s.disk_space || now_s < next_room_check_s_) return room_;
  next_room_check_s_ = now_s + kRoomCheckEveryS;
  auto space = s.disk_space();
  if (!space) return room_;  // unknown: as last seen (the write itself fails on a full disk)
  const bool room = HistoryHasRoom(*space, s.history_floor);
  std::string line = room ? "" : NoRoomLine(s.state_dir, *space, s.history_floor);
  if (room != room_) log_(room ? "GPU history is stored again: the state folder has room" : line);
  room_ = room;
  std::lock_guard lock(mu_);
  no_room_ = std::move(line);
  return room_;
}

std::string SamplerThread::NoRoomForHistory() const {
  std::lock_guard lock(mu_);
  return no_room_;
}

void SamplerThread::Prune(double now_s) {
  const SamplerSettings& s = sampler_.settings();
  for (std::size_t i = 0; i < s.resolutions_s.size() && i < s.keep_s.size(); ++i)
    if (Status pruned = history_->Prune(s.resolutions_s[i], now_s - s.keep_s[i]); !pruned.ok()) log_(pruned.error().message);
  if (Status pruned = history_->PruneRecords(now_s - s.records_keep_s); !pruned.ok()) log_(pruned.error().message);
}

json SamplerThread::AnswerOf(const Question& q) {
  return std::visit([&](const auto& req) { return Respond(req, q.extra); }, q.request);
}

json SamplerThread::Respond(const proto::HistoryRequest& req, const json&) {
  const GpuSnapshot& latest = sampler_.latest();
  const GpuDevice* gpu = nullptr;
  const json& which = *req.gpu;
  for (const auto& d : latest.devices)
    if ((which.is_string() && d.uuid == which.get<std::string>()) ||
        (which.is_number_unsigned() && d.pci_index == which.get<unsigned>()))
      gpu = &d;
  if (!gpu) return Error("not_found", fmt::format("history: no GPU {} (give its index or UUID)", which.dump()));
  const double now_s = clock_.WallS();
  const double since_s = req.since_s.value_or(now_s - 3600);
  const double until_s = req.until_s.value_or(now_s + 1);
  const double resolution_s = req.resolution_s;
  // A chart's request: at most max_points of them, evenly spaced, and only the fields it draws.
  const std::size_t max_points = req.max_points;
  const std::vector<std::string>& fields = req.fields;
  // ... and, with "columns": true, as one array a field instead of an object a point.
  const bool columns = req.columns;
  auto shaped = [&](json points) {
    if (!columns) return json{{"points", std::move(points)}};
    return json{{"columns", proto::PointsToColumns(points, fields)}};
  };
  auto select = [&fields](json point) {
    if (fields.empty()) return point;
    json out = {{"t", point["t"]}};
    for (const auto& f : fields)
      if (auto it = point.find(f); it != point.end()) out[f] = std::move(*it);
    return out;
  };
  json points = json::array();
  if (resolution_s <= 0) {
    std::vector<telemetry::GpuPoint> kept;
    for (auto& p : sampler_.Points(gpu->uuid, since_s))
      if (p.time_s < until_s) kept.push_back(std::move(p));
    const auto at = proto::EvenlySpaced(kept.size(), max_points ? max_points : kept.size());
    if (columns && !fields.empty()) {  // the dashboard's: straight into arrays, no object a point
      json out = {{"columns", proto::GpuPointsToColumns(kept, at, fields)}};
      out.update({{"gpu", gpu->pci_index}, {"uuid", gpu->uuid}, {"resolution_s", sampler_.settings().interval_s}});
      return Ok(std::move(out));
    }
    for (std::size_t i : at) points.push_back(select(proto::PointToJson(kept[i])));
    json out = shaped(std::move(points));
    out.update({{"gpu", gpu->pci_index}, {"uuid", gpu->uuid}, {"resolution_s", sampler_.settings().interval_s}});
    return Ok(std::move(out));
  }
  const auto& kept = sampler_.settings().resolutions_s;
  if (std::find(kept.begin(), kept.end(), resolution_s) == kept.end())
    return Error("invalid_argument", fmt::format("history: no rows of {:g} s are kept (0 for the full rate, or one of "
                                                 "telemetry.resolutions)", resolution_s));
  if (!history_) return Error("unavailable", "history: the history database could not be opened (see the daemon's log)");
  auto rows = history_->Rows(gpu->uuid, resolution_s, since_s, until_s);
  if (!rows) return Error("io", rows.error().message);
  for (std::size_t i : proto::EvenlySpaced(rows->size(), max_points ? max_points : rows->size()))
    points.push_back(select(proto::HistoryRowToJson((*rows)[i])));
  json out = shaped(std::move(points));
  out.update({{"gpu", gpu->pci_index}, {"uuid", gpu->uuid}, {"resolution_s", resolution_s}});
  return Ok(std::move(out));
}

json SamplerThread::Respond(const proto::ReportRequest& req, const json&) {
  if (!history_) return Error("unavailable", "report: the history database could not be opened (see the daemon's log)");
  store::UsageFilter filter;
  filter.names = false;
  filter.since_s = req.since_s;
  if (req.user) filter.user = *req.user;
  auto by = telemetry::ParseReportBy(req.by);
  if (!by) return Error("invalid_argument", "report: \"by\" is one of job, user, gpu, day");
  telemetry::ReportBuilder builder(*by, LocalDay);
  if (Status s = history_->ForEachUsage(filter, [&](const telemetry::UsageRecord& r) { builder.Add(r); }); !s.ok())
    return Error("io", s.error().message);
  json rows = json::array();
  for (const auto& row : builder.Rows()) rows.push_back(proto::ReportRowToJson(row));
  return Ok({{"by", telemetry::ReportByName(*by)}, {"rows", std::move(rows)}});
}

// A usage record as `viewer` ({"uid", "sees_all"}, from the daemon) may see it: another user's
// record's name (a lease's label; a command line in records of an older gpulane) hidden as a job's
// command is (store/job_view.h).
static json RecordFor(const telemetry::UsageRecord& r, const json& viewer) {
  json j = proto::UsageRecordToJson(r);
  const bool own = viewer.is_object() && viewer.value("uid", std::uint32_t{0}) == r.uid;
  if (!own && !(viewer.is_object() && viewer.value("sees_all", false))) {
    j["name"] = store::kHiddenField;
    j["name_hidden"] = true;
  }
  return j;
}

// Lease `lease_name` ends now, its owner (`uid`; 0 is root) says. A lease no sample saw (a job
// shorter than one interval) is recorded now from its one lease file, which its owner holds until
// answered (LeaseSource::named: not the whole folder, whose read took 23 ms of the next job's wait
// on the GPU), so `report` counts it and the answer carries it; the history write comes after the
// answers go out (StoreEnded).
void SamplerThread::NoteEnding(const std::string& lease_name, std::uint32_t uid, double now_s) {
  if (sampler_.NoteEnding(lease_name, uid, now_s) || !leases_.named) return;
  const std::optional<lease::LeaseRecord> lease = leases_.named(lease_name);
  if (!lease || (uid != 0 && uid != lease->uid)) return;
  if (auto record = sampler_.EndUnsampled(*lease, now_s)) ended_unsampled_.push_back(std::move(*record));
}

void SamplerThread::StoreEnded() {
  for (const telemetry::UsageRecord& record : ended_unsampled_)
    if (history_ && HistoryRoom(record.end_s))
      if (Status s = history_->AddUsage(record); !s.ok() && s.error().message != last_error_)
        log_("sampler: " + (last_error_ = s.error().message));
  ended_unsampled_.clear();
}

json SamplerThread::Respond(const proto::UsageRequest& req, const json& extra) {
  const json viewer = extra.is_object() ? extra.value("viewer", json()) : json();
  const double now_s = clock_.WallS();
  if (req.lease) {
    const std::string& lease = *req.lease;
    if (req.ending && viewer.is_object()) NoteEnding(lease, viewer.value("uid", std::uint32_t{65534}), now_s);
    auto record = sampler_.UsageOf(lease, now_s);
    if (!record) return Error("not_found", fmt::format("usage: no lease {} was sampled", lease));
    return Ok({{"record", RecordFor(*record, viewer)}});
  }
  const std::string& job_id = *req.job_id;
  // Running: its live lease (the newest, should the id have come back), by its job id or, for an
  // array's task, its name ("12_3": the lease's job_text); else its stored record.
  const LiveJob* live = nullptr;
  for (const auto& [name, job] : sampler_.live())
    if ((job.lease.job_id == job_id || lease::JobText(job.lease) == job_id) && (!live || job.lease.started_s > live->lease.started_s)) live = &job;
  if (live) return Ok({{"record", RecordFor(*sampler_.UsageOf(live->lease.name, now_s), viewer)}, {"running", true}});
  if (!history_) return Error("unavailable", "usage: the history database could not be opened (see the daemon's log)");
  auto stored = history_->UsageOfJob(job_id);
  if (!stored) return Error("io", stored.error().message);
  if (!*stored) return Error("not_found", fmt::format("usage: no usage of job {} was recorded", job_id));
  return Ok({{"record", RecordFor(**stored, viewer)}});
}

json SamplerThread::Respond(const proto::TelemetryRequest&, const json&) {
  json gpus = json::array();
  const GpuSnapshot& latest = sampler_.latest();
  for (const auto& d : latest.devices) {
    auto points = sampler_.Points(d.uuid, sampler_.latest_time_s());
    json g = {{"index", d.pci_index}, {"uuid", d.uuid}};
    if (!points.empty()) g["reading"] = proto::PointToJson(points.back());
    gpus.push_back(std::move(g));
  }
  json jobs = json::array();
  for (const auto& [name, job] : sampler_.live())
    for (const auto& g : job.gpus) {
      json j = {{"job_id", job.lease.job_id}, {"job_text", lease::JobText(job.lease)}, {"user", job.lease.user},
                {"gpu_uuid", g.uuid}};
      if (g.memory_bytes) j["memory_bytes"] = *g.memory_bytes;
      if (g.util_pct) j["util_pct"] = *g.util_pct;
      jobs.push_back(std::move(j));
    }
  return Ok({{"time_s", sampler_.latest_time_s()}, {"interval_s", sampler_.settings().interval_s}, {"gpus", gpus},
             {"jobs", jobs}});
}

json SamplerThread::Respond(const proto::EventsRequest& req, const json&) {
  const std::int64_t after_id = req.after_id;
  const double since_s = req.since_s;
  const std::size_t limit = std::min<std::size_t>(req.limit, 10000);
  json current = json::array();
  for (const auto& [key, a] : sampler_.anomalies().current()) {
    json j = {{"kind", a.kind}, {"gpu_uuid", a.gpu_uuid}, {"job_id", a.job_id}, {"user", a.user}, {"message", a.message},
              {"drains", a.drains}};
    if (a.gpu_index) j["gpu_index"] = *a.gpu_index;
    if (auto id = event_ids_.find(key); id != event_ids_.end()) j["id"] = id->second;
    current.push_back(std::move(j));
  }
  json events = json::array();
  if (history_) {
    auto stored = history_->Events(after_id, since_s, limit);
    if (!stored) return Error("io", stored.error().message);
    for (const auto& e : *stored) {
      json j = {{"id", e.id},         {"time_s", e.time_s}, {"kind", e.kind},      {"gpu_uuid", e.gpu_uuid},
                {"job_id", e.job_id}, {"user", e.user},     {"message", e.message}};
      if (e.gpu_index) j["gpu_index"] = *e.gpu_index;
      if (e.cleared_s) j["cleared_s"] = *e.cleared_s;
      events.push_back(std::move(j));
    }
  }
  return Ok({{"events", events}, {"current", current}});
}

json SamplerThread::Respond(const proto::MetricsRequest&, const json& extra) {
  render::MetricsInput in;
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) in.hostname = host;
  const GpuSnapshot& latest = sampler_.latest();
  in.gpus = latest.devices;
  for (const auto& d : latest.devices) {
    auto points = sampler_.Points(d.uuid, sampler_.latest_time_s());
    if (!points.empty()) in.readings[d.uuid] = points.back().reading;
  }
  in.xid_totals = sampler_.xid_totals();
  in.last_xid = sampler_.last_xid();
  for (const auto& [name, job] : sampler_.live())
    for (const auto& g : job.gpus) in.jobs.push_back({job.lease.job_id, job.lease.user, g.uuid, g.memory_bytes, g.util_pct});
  if (extra.contains("jobs_by_state"))
    for (const auto& [state, count] : extra["jobs_by_state"].items()) in.jobs_by_state[state] = count.get<std::uint64_t>();
  in.wait_bounds_s.assign(std::begin(kWaitBucketsS), std::end(kWaitBucketsS));
  in.wait_counts = wait_buckets_;
  in.wait_sum_s = wait_sum_s_;
  {
    std::lock_guard lock(mu_);
    in.samples = samples_;
  }
  return Ok({{"text", render::MetricsText(in)}});
}

}  // namespace gpulane::daemon
