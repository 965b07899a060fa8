#include "sched/fairshare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace gpulane::sched {
namespace {

std::string Fixed(double value, int digits) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", digits, value);
  return text;
}

}  // namespace

double GpuShareOfRequest(unsigned count, std::optional<std::uint64_t> mem_bytes, std::optional<std::uint64_t> gpu_total_bytes) {
  if (!mem_bytes || !gpu_total_bytes || *gpu_total_bytes == 0) return count;
  const double fraction = std::min(1.0, static_cast<double>(*mem_bytes) / static_cast<double>(*gpu_total_bytes));
  return count * fraction;
}

double DecayedUsageGpuS(const UsageRecord& record, double now_s, double half_life_s) {
  const double end = std::min(record.end_s.value_or(now_s), now_s);
  if (!(end > record.start_s) || !(half_life_s > 0) || !(record.gpus > 0)) return 0;
  // The integral of gpus x 2^(-(now - t) / h) over [start, end]: gpus x h / ln 2 x (2^(-(now-end)/h) - 2^(-(now-start)/h)).
  const double k = std::log(2.0) / half_life_s;
  return record.gpus / k * (std::exp(-k * (now_s - end)) - std::exp(-k * (now_s - record.start_s)));
}

double DecayTo(double usage_gpu_s, double from_s, double to_s, double half_life_s) {
  if (!(to_s > from_s) || !(half_life_s > 0)) return usage_gpu_s;
  return usage_gpu_s * std::exp2(-(to_s - from_s) / half_life_s);
}

std::map<std::string, double> DecayedUsageByUserGpuS(std::span<const UsageRecord> records, double now_s, double half_life_s) {
  std::map<std::string, double> out;
  for (const UsageRecord& r : records) out[r.user] += DecayedUsageGpuS(r, now_s, half_life_s);
  return out;
}

double ShareOf(const std::string& user, const std::vector<std::string>& groups, const std::map<std::string, double>& shares) {
  if (auto it = shares.find(user); it != shares.end()) return it->second;
  std::optional<double> best;
  for (const std::string& g : groups)
    if (auto it = shares.find("@" + g); it != shares.end()) best = std::max(best.value_or(it->second), it->second);
  return best.value_or(1.0);
}

double FairShareFactor(double usage_norm, double share_norm) {
  if (!(usage_norm > 0)) return 1;
  if (!(share_norm > 0)) return 0;
  return std::exp2(-usage_norm / share_norm);
}

std::vector<UserShare> FairShareTable(const std::map<std::string, double>& share_of_user,
                                      const std::map<std::string, double>& usage_gpu_s) {
  double total_share = 0, total_usage = 0;
  for (const auto& [user, share] : share_of_user) total_share += share;
  for (const auto& [user, usage] : usage_gpu_s) total_usage += usage;
  std::vector<UserShare> out;
  for (const auto& [user, share] : share_of_user) {
    UserShare u;
    u.user = user;
    u.share = share;
    u.share_norm = total_share > 0 ? share / total_share : 0;
    auto used = usage_gpu_s.find(user);
    u.usage_gpu_s = used == usage_gpu_s.end() ? 0 : used->second;
    u.usage_norm = total_usage > 0 ? u.usage_gpu_s / total_usage : 0;
    u.factor = FairShareFactor(u.usage_norm, u.share_norm);
    out.push_back(std::move(u));
  }
  return out;
}

JobPriority PriorityOf(double fair_share, double age_s, const FairShareSettings& settings) {
  JobPriority p;
  p.fair_share = fair_share;
  p.age = settings.max_age_s > 0 ? std::clamp(age_s / settings.max_age_s, 0.0, 1.0) : 1.0;
  p.value = settings.weight_fair_share * p.fair_share + settings.weight_age * p.age;
  return p;
}

double LinePriority(const LineShares& shares, const std::string& user, double age_s) {
  const auto it = shares.factor_of_user.find(user);
  FairShareSettings settings;
  settings.weight_fair_share = shares.weight_fair_share;
  settings.weight_age = shares.weight_age;
  settings.max_age_s = shares.max_age_s;
  return PriorityOf(it == shares.factor_of_user.end() ? 1.0 : it->second, age_s, settings).value;
}

std::string UsageText(double usage_gpu_s) {
  if (usage_gpu_s >= 3600) return Fixed(usage_gpu_s / 3600, 1) + " GPU-h";
  if (usage_gpu_s >= 60) return Fixed(usage_gpu_s / 60, 1) + " GPU-min";
  return Fixed(usage_gpu_s, 0) + " GPU-s";
}

std::string HalfLifeText(double half_life_s) {
  auto whole = [](double v) { return std::fabs(v - std::round(v)) < 1e-9 ? Fixed(v, 0) : Fixed(v, 1); };
  if (half_life_s >= 86400) return whole(half_life_s / 86400) + " d";
  if (half_life_s >= 3600) return whole(half_life_s / 3600) + " h";
  if (half_life_s >= 60) return whole(half_life_s / 60) + " min";
  return whole(half_life_s) + " s";
}

std::string WaitReason(const std::string& user, const UserShare& share, const JobPriority& priority,
                       const std::optional<JobAhead>& ahead, double half_life_s) {
  std::string out = "priority " + Fixed(priority.value, 3) + " (fair share " + Fixed(priority.fair_share, 3) + ", age " +
                    Fixed(priority.age, 3) + "): " + user + " used " + UsageText(share.usage_gpu_s) + " (half-life " +
                    HalfLifeText(half_life_s) + ", " + Fixed(100 * share.usage_norm, 0) + " % of all use, share " +
                    Fixed(100 * share.share_norm, 0) + " %)";
  if (ahead)
    out += "; behind " + ahead->user + "'s job " + ahead->id + " (priority " + Fixed(ahead->priority, 3) + ")";
  return out;
}

}  // namespace gpulane::sched
