#include "telemetry/report.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

namespace gpulane::telemetry {
namespace {

// A report row being summed.
struct Sum {
  ReportRow row;
  double util_weight = 0, util_sum = 0, idle_weight = 0, idle_sum = 0, wait_sum = 0;
  std::uint64_t waits = 0;

  // Adds `fraction` of record `r` (1 but for a job's share of one of its GPUs).
  void Add(const UsageRecord& r, double fraction) {
    const JobUsage& u = r.usage;
    ++row.jobs;
    const double gpu_s = u.gpu_s * fraction;
    row.gpu_s += gpu_s;
    row.run_s += u.run_s;
    if (u.energy_j) row.energy_j = row.energy_j.value_or(0) + *u.energy_j * fraction;
    if (u.peak_memory_bytes) row.peak_memory_bytes = std::max(row.peak_memory_bytes.value_or(0), *u.peak_memory_bytes);
    // A job too short to weigh anything still counts a little.
    const double weight = std::max(gpu_s, 1e-9);
    if (u.mean_util_pct) util_sum += *u.mean_util_pct * weight, util_weight += weight;
    if (u.idle_fraction) idle_sum += *u.idle_fraction * weight, idle_weight += weight;
    if (u.wait_s) wait_sum += *u.wait_s, ++waits;
  }
  ReportRow Done() const {
    ReportRow out = row;
    if (util_weight > 0) out.mean_util_pct = util_sum / util_weight;
    if (idle_weight > 0) out.idle_fraction = idle_sum / idle_weight;
    if (waits) out.mean_wait_s = wait_sum / static_cast<double>(waits);
    return out;
  }
};

}  // namespace

const std::string& JobText(const UsageRecord& r) { return r.job_text.empty() ? r.job_id : r.job_text; }

const char* ReportByName(ReportBy by) {
  switch (by) {
    case ReportBy::kJob: return "job";
    case ReportBy::kUser: return "user";
    case ReportBy::kGpu: return "gpu";
    case ReportBy::kDay: return "day";
  }
  return "job";
}

std::optional<ReportBy> ParseReportBy(const std::string& name) {
  for (ReportBy by : {ReportBy::kJob, ReportBy::kUser, ReportBy::kGpu, ReportBy::kDay})
    if (name == ReportByName(by)) return by;
  return std::nullopt;
}

struct ReportBuilder::State {
  std::map<std::string, Sum> sums;
  std::vector<std::string> order;  // by job: the records' order
};

ReportBuilder::ReportBuilder(ReportBy by, std::function<std::string(double)> day_of)
    : by_(by), day_of_(std::move(day_of)), state_(new State) {}

ReportBuilder::~ReportBuilder() { delete state_; }

void ReportBuilder::Add(const UsageRecord& r) {
  auto& sums = state_->sums;
  if (by_ == ReportBy::kGpu) {
    const std::size_t n = r.gpu_uuids.size();
    for (std::size_t i = 0; i < n; ++i) {
      const std::string key = i < r.gpu_indices.size() ? fmt::format("{} {}", r.gpu_indices[i], r.gpu_uuids[i]) : r.gpu_uuids[i];
      sums[key].Add(r, 1.0 / static_cast<double>(n));
    }
    return;
  }
  // By job, a key of its own per record: ids of `run` (pids) come back.
  std::string key = by_ == ReportBy::kJob ? fmt::format("{}@{}", JobText(r), state_->order.size())
                    : by_ == ReportBy::kUser ? r.user
                                             : day_of_(r.end_s);
  auto [it, added] = sums.try_emplace(key);
  if (added) it->second.row.key = by_ == ReportBy::kJob ? JobText(r) : key;
  if (added && by_ == ReportBy::kJob) state_->order.push_back(key);
  it->second.Add(r, 1.0);
}

std::vector<ReportRow> ReportBuilder::Rows() const {
  std::vector<ReportRow> rows;
  if (by_ == ReportBy::kJob) {
    for (const auto& key : state_->order) rows.push_back(state_->sums.at(key).Done());
    return rows;
  }
  for (const auto& [key, sum] : state_->sums) {
    ReportRow row = sum.Done();
    row.key = key;
    rows.push_back(std::move(row));
  }
  if (by_ != ReportBy::kDay)
    std::stable_sort(rows.begin(), rows.end(), [](const ReportRow& a, const ReportRow& b) { return a.gpu_s > b.gpu_s; });
  return rows;
}

std::vector<ReportRow> Summarize(const std::vector<UsageRecord>& records, ReportBy by,
                                 const std::function<std::string(double)>& day_of) {
  ReportBuilder builder(by, day_of);
  for (const UsageRecord& r : records) builder.Add(r);
  return builder.Rows();
}

}  // namespace gpulane::telemetry
