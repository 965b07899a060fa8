// The job table's record of GPU use: fair share (ended jobs' decayed use, running jobs' so far,
// `gpulane run` leases) and limits.max_gpu_hours_per_day (the last 24 hours' use), at the table's
// clock.
#include <algorithm>
#include <fmt/format.h>

#include "daemon/job_table.h"
#include "sched/user_limits.h"

namespace gpulane::daemon {

using store::Job;
using store::JobState;

double JobTable::GpusHeld(const Job& job) const {
  const unsigned gpus = job.gpu_uuids.empty() ? job.spec.request.count : static_cast<unsigned>(job.gpu_uuids.size());
  return sched::GpuShareOfRequest(gpus, job.spec.request.mem_bytes, limits_.gpu_total_bytes);
}

void JobTable::RecordUsage(const Job& job) {
  if (!job.start_time) return;  // never ran
  const double now = Now();
  AddEndedUsage({job.user(), *job.start_time, std::min(job.end_time.value_or(now), now), GpusHeld(job)}, now);
}

void JobTable::AddDecayedUsage(const sched::UsageRecord& record, double now_s) {
  const double h = limits_.fair_share.half_life_s;
  EndedUsage& u = ended_usage_[record.user];
  u.gpu_s = sched::DecayTo(u.gpu_s, u.at_s, now_s, h) + sched::DecayedUsageGpuS(record, now_s, h);
  u.at_s = now_s;
}

void JobTable::AddEndedUsage(const sched::UsageRecord& record, double now_s) {
  const double h = limits_.fair_share.half_life_s;
  if (record.end_s && *record.end_s >= now_s - kUsageKeptHalfLives * h) AddDecayedUsage(record, now_s);
  if (limits_.max_gpu_hours_of && record.end_s && *record.end_s >= now_s - sched::kGpuHoursWindowS)
    recent_usage_.push_back(record);
}

std::map<std::string, std::string> JobTable::GpuHoursHeldBack(double now_s) {
  std::map<std::string, std::string> out;
  if (!limits_.max_gpu_hours_of) return out;
  std::erase_if(recent_usage_, [&](const sched::UsageRecord& r) { return *r.end_s < now_s - sched::kGpuHoursWindowS; });
  // The limit of each user who has a pending job (looked up once per user).
  std::map<std::string, LimitsConfig> limits;
  std::set<std::string> asked;
  ForEachUnheld([&](std::int64_t, const Job& job) {
    if (job.state != JobState::kPending || !asked.insert(job.user()).second) return;
    if (auto hours = limits_.max_gpu_hours_of(job.uid(), job.user())) limits[job.user()].max_gpu_hours_per_day = *hours;
  });
  if (limits.empty()) return out;
  // Their use: ended jobs' records and running jobs so far, as fair share counts them.
  std::vector<sched::UsageRecord> running;
  ForEachUnheld([&](std::int64_t, const Job& job) {
    if (job.state == JobState::kRunning && job.start_time && limits.count(job.user()))
      running.push_back({job.user(), *job.start_time, std::nullopt, GpusHeld(job)});
  });
  std::map<std::string, double> used_gpu_s;
  for (const auto* records : {&recent_usage_, &running})
    for (const sched::UsageRecord& r : *records)
      if (limits.count(r.user)) used_gpu_s[r.user] += sched::WindowUsageGpuS(r, now_s);
  for (const auto& [user, used] : used_gpu_s) {
    const LimitsConfig& mine = limits.at(user);
    if (used < *mine.max_gpu_hours_per_day * 3600) continue;
    // At or over it (rare): when enough of the use leaves the window, from the user's records.
    std::vector<sched::UsageRecord> records;
    for (const auto* all : {&recent_usage_, &running})
      for (const sched::UsageRecord& r : *all)
        if (r.user == user) records.push_back(r);
    const auto next_in_s = sched::WindowUsageBelowInS(records, *mine.max_gpu_hours_per_day * 3600, now_s);
    if (auto why = sched::GpuHoursLimitReason(mine, user, used, next_in_s)) out.emplace(user, std::move(*why));
  }
  return out;
}

std::map<std::string, sched::UserShare> JobTable::FairShareAt(double now_s) {
  const double h = limits_.fair_share.half_life_s;
  std::map<std::string, double> usage;
  std::erase_if(ended_usage_, [&](const auto& entry) {  // decayed to nothing: forgotten
    return sched::DecayTo(entry.second.gpu_s, entry.second.at_s, now_s, h) < 1e-6;
  });
  for (const auto& [user, u] : ended_usage_) usage[user] = sched::DecayTo(u.gpu_s, u.at_s, now_s, h);
  std::map<std::string, double> shares;
  auto share_of = [&](const std::string& user, std::uint32_t uid, std::uint32_t gid) {
    if (shares.count(user)) return;
    auto known = groups_of_.find(user);
    if (known == groups_of_.end())
      known = groups_of_.emplace(user, groups_ ? groups_(user, uid, gid) : std::vector<std::string>{}).first;
    shares[user] = sched::ShareOf(user, known->second, limits_.fair_share.shares);
  };
  ForEachUnheld([&](std::int64_t, const Job& job) {
    if (job.state == JobState::kRunning && job.start_time)  // running jobs count so far
      usage[job.user()] += sched::DecayedUsageGpuS({job.user(), *job.start_time, std::nullopt, GpusHeld(job)}, now_s, h);
  });
  for (const sched::UsageRecord& lease : live_lease_usage_)  // `gpulane run` and lease(): so far
    usage[lease.user] += sched::DecayedUsageGpuS(lease, now_s, h);
  for (const auto& [user, u] : active_users_) share_of(user, u.uid, u.gid);  // every user with a job in the table
  for (const auto& [user, used] : usage)
    if (!shares.count(user)) share_of(user, 0, 0);
  std::map<std::string, sched::UserShare> out;
  for (auto& row : sched::FairShareTable(shares, usage)) out.emplace(row.user, std::move(row));
  return out;
}

void JobTable::AddLeaseUsage(const std::vector<sched::UsageRecord>& ended, std::vector<sched::UsageRecord> live) {
  const double now = Now();
  const double h = limits_.fair_share.half_life_s;
  for (const sched::UsageRecord& record : ended)
    if (record.end_s && *record.end_s >= now - kUsageKeptHalfLives * h) AddDecayedUsage(record, now);
  live_lease_usage_ = std::move(live);
}

sched::LineShares JobTable::LineShares() {
  const double now = Now();
  sched::LineShares out;
  out.weight_fair_share = limits_.fair_share.weight_fair_share;
  out.weight_age = limits_.fair_share.weight_age;
  out.max_age_s = limits_.fair_share.max_age_s;
  out.written_s = now;
  for (const auto& [user, row] : FairShareAt(now)) out.factor_of_user[user] = row.factor;
  return out;
}

std::vector<sched::UserShare> JobTable::ShareTable() {
  std::vector<sched::UserShare> out;
  for (auto& [user, row] : FairShareAt(Now())) out.push_back(std::move(row));
  return out;
}

}  // namespace gpulane::daemon
