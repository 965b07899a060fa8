#pragma once
// Priorities and fair share (docs/config.md, "Priorities and fair share"): a waiting job's place
// among the jobs of its --priority class, from its user's share, the user's decayed past GPU use
// and the job's age in line. Pure: no clock, no store, no user database; the caller passes the
// usage records, the time (seconds on one clock: the epoch in the daemon, virtual in
// `gpulane simulate`) and the users' groups.
//
// The formula (Slurm's multifactor priority, reduced to two factors):
//   usage_u      = sum over u's jobs of the GPUs they held x 2^(-(now - t) / half_life) dt, integrated
//                  over each job's run (a --mem job holds mem / GPU memory of a GPU): GPU-seconds
//   usage_norm_u = usage_u / sum of every user's usage (0 when nobody used anything)
//   share_norm_u = share_u / sum of the shares of the users that count (used something or wait)
//   fair_share_u = 2^(-usage_norm_u / share_norm_u)                       in (0, 1]; 1: unused
//   age_j        = min(1, time in line_j / max_age)                       in [0, 1]
//   priority_j   = weight_fair_share x fair_share_u + weight_age x age_j
// Jobs are ordered by --priority first (higher first: users may only lower theirs, admins raise
// it), then by priority_j (higher first), then by submission (lower id).
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace gpulane::sched {

/// sched.fair_share_half_life's default: one day.
inline constexpr double kDefaultFairShareHalfLifeS = 86400;
/// sched.priority_weight_fair_share's default.
inline constexpr double kDefaultWeightFairShare = 1.0;
/// sched.priority_weight_age's default: a job that waited max_age gains what the whole
/// fair-share factor's range is worth, so no stream of later jobs of lighter users keeps it
/// waiting longer than max_age (the policy's no-starvation rule); younger jobs go by fair share,
/// each day in line worth 1/7 of the range. With a tenth of it, a user over their share starved
/// for months in replays (docs/simulate-results.md).
inline constexpr double kDefaultWeightAge = 1.0;
/// sched.priority_max_age's default: seven days.
inline constexpr double kDefaultMaxAgeS = 7 * 86400;

/// The settings of the priority (the machine's [sched] and [shares], util/config.h).
struct FairShareSettings {
  double half_life_s = kDefaultFairShareHalfLifeS;  ///< past use counts half as much after this long
  double weight_fair_share = kDefaultWeightFairShare;
  double weight_age = kDefaultWeightAge;
  double max_age_s = kDefaultMaxAgeS;  ///< the age factor reaches 1 after this long in line
  /// [shares]: "alice" -> 2 (a user), "@ml" -> 3 (each member of group ml). Unlisted users: 1.
  std::map<std::string, double> shares;
};

/// One job's use of GPUs: `gpus` whole GPUs (a fraction for a --mem share) from `start_s` to
/// `end_s` (nullopt: still running, counted up to the time asked about).
struct UsageRecord {
  std::string user;
  double start_s = 0;
  std::optional<double> end_s;
  double gpus = 1;
};

/// The GPUs a job holds, as a fraction of whole GPUs: `count`, or for a --mem job `count` x
/// mem_bytes / gpu_total_bytes (at most `count`; `count` when the GPU's memory is unknown).
double GpuShareOfRequest(unsigned count, std::optional<std::uint64_t> mem_bytes, std::optional<std::uint64_t> gpu_total_bytes);

/// `record`'s GPU-seconds at `now_s`, each second of its run weighted by 2^(-(now_s - t) /
/// half_life_s) (the part of a run after now_s does not count). half_life_s > 0.
double DecayedUsageGpuS(const UsageRecord& record, double now_s, double half_life_s);

/// A usage of `usage_gpu_s` at `from_s`, decayed to `to_s` (an earlier `to_s` changes nothing):
/// ended jobs' usage can be kept as one number per user this way, exactly.
double DecayTo(double usage_gpu_s, double from_s, double to_s, double half_life_s);

/// DecayedUsageGpuS summed per user.
std::map<std::string, double> DecayedUsageByUserGpuS(std::span<const UsageRecord> records, double now_s, double half_life_s);

/// The share of `user`, member of `groups`: the user's own [shares] entry, else the largest entry
/// of one of the groups ("@name"), else 1.
double ShareOf(const std::string& user, const std::vector<std::string>& groups, const std::map<std::string, double>& shares);

/// 2^(-usage_norm / share_norm): 1 for a user who used nothing, 0.5 for one who used exactly their
/// share, smaller beyond. share_norm <= 0 counts as no share (0 unless usage_norm is 0).
double FairShareFactor(double usage_norm, double share_norm);

/// One user's line of the fair-share table (`gpulane share`).
struct UserShare {
  std::string user;
  double share = 1;        ///< raw, from [shares]
  double share_norm = 0;   ///< share / sum of the shares of the users in the table
  double usage_gpu_s = 0;  ///< decayed usage, GPU-seconds
  double usage_norm = 0;   ///< usage / every user's usage
  double factor = 1;       ///< FairShareFactor(usage_norm, share_norm)
};

/// The table for `users` (each user's share given; usage from `usage_gpu_s`, 0 when absent), by
/// user name. The users are those that count: used something or have a job.
std::vector<UserShare> FairShareTable(const std::map<std::string, double>& share_of_user,
                                      const std::map<std::string, double>& usage_gpu_s);

/// A waiting job's priority and its parts.
struct JobPriority {
  double fair_share = 1;  ///< its user's factor, 0..1
  double age = 0;         ///< min(1, age / max_age), 0..1
  double value = 0;       ///< weight_fair_share x fair_share + weight_age x age
};

/// The priority of a job that has waited `age_s` seconds, of a user whose factor is `fair_share`.
JobPriority PriorityOf(double fair_share, double age_s, const FairShareSettings& settings);

/// The fair-share factors the system daemon publishes for the lease line (lease/line_shares.h), so
/// that `gpulane run`'s waiting requests are ordered by the same priority as queued jobs: within a
/// --priority class, weight_fair_share x factor(user) + weight_age x min(1, age / max_age), higher
/// first, then submission. A user without a factor counts as unused (1).
struct LineShares {
  double weight_fair_share = kDefaultWeightFairShare;
  double weight_age = kDefaultWeightAge;
  double max_age_s = kDefaultMaxAgeS;
  std::map<std::string, double> factor_of_user;  ///< FairShareFactor of each user with usage, 0..1
  double written_s = 0;  ///< when the daemon computed them, seconds since the epoch
};

/// The line priority of a request of `user` that has waited `age_s` seconds, under `shares`
/// (PriorityOf with the published weights and the user's factor, 1 when unlisted).
double LinePriority(const LineShares& shares, const std::string& user, double age_s);

/// "12.3 GPU-h" (or GPU-min, GPU-s below one GPU-minute): a usage in GPU-seconds for people.
std::string UsageText(double usage_gpu_s);

/// The half-life for people: "1 d", "12 h".
std::string HalfLifeText(double half_life_s);

/// Why a job waits, for `gpulane queue`: "priority 0.25 (fair share 0.25, age 0.00): alice used
/// 14.2 GPU-h (half-life 1 d); behind bob's job 12 (priority 1.00)". `ahead`: the job just before
/// it in line, if any (user, id, priority).
struct JobAhead {
  std::string user;
  /// The job as people name it: "12", or "12_3" for an array's task (whose own numeric id may be
  /// the array's, which means every task).
  std::string id;
  double priority = 0;
};
std::string WaitReason(const std::string& user, const UserShare& share, const JobPriority& priority,
                       const std::optional<JobAhead>& ahead, double half_life_s);

}  // namespace gpulane::sched
