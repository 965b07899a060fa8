#pragma once
// Per-user limits ([limits], [limits.users.NAME], [limits.groups.NAME] of the machine's config,
// docs/config.md): which values apply to a user, and what they refuse. Pure: the caller looks up
// the user's groups (os/user_groups.h) and counts what the user holds.
//
// Where each is applied: the time limits at submit (the daemon) and in `gpulane run`'s request
// (cli/request_options); max_queued at submit (the daemon); max_gpus in the lease line
// (sched::Schedule, through Limits::max_gpus_by_uid: a request that would take its user over the
// limit waits and reserves nothing) and in the daemon's launch decision (it hands no supervisor to
// a job whose user is at the limit, so a flood does not fill the waiting slots);
// max_gpu_hours_per_day in the daemon's launch decision (queued jobs only: `gpulane run`'s use is
// recorded nowhere), from the same usage records as fair share (sched/fairshare.h), undecayed.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "sched/fairshare.h"
#include "sched/request.h"
#include "util/config.h"
#include "util/result.h"

namespace gpulane::sched {

/// The limits of user `user` (uid `uid`, member of `groups`, names) under `config`: root (uid 0)
/// has none; otherwise each field comes from [limits.users.USER] when it sets it, else from the
/// first [limits.groups.G] in the file's order whose group the user is in and that sets it, else
/// from [limits].
LimitsConfig LimitsOf(const Config& config, std::uint32_t uid, const std::string& user, const std::vector<std::string>& groups);

/// Whether any limit is configured at all (so callers can skip the group look-ups).
bool AnyLimits(const Config& config);

/// The time limits on `request`: a request without --time-limit gets default_time_limit; one over
/// max_time_limit is refused. Errors: kInvalidArgument "--time-limit 4d: alice may ask for at most
/// 3d 00h (limits.max_time_limit): ask for less".
Status ApplyTimeLimits(const LimitsConfig& limits, const std::string& user, Request& request);

/// Whether `user`, who has `unfinished` queued jobs, may queue `adding` more. Errors: kOverLimit
/// naming the count, the limit and the way out.
Status CheckQueuedLimit(const LimitsConfig& limits, const std::string& user, std::size_t unfinished, std::size_t adding);

/// Why a request for `asked` GPUs of `user`, who holds `in_use` GPUs, must wait under max_gpus
/// (nullopt: it need not). `asked` above the limit itself can never start: callers refuse it at
/// once (OverGpuLimitForever).
std::optional<std::string> GpuLimitReason(const LimitsConfig& limits, const std::string& user, unsigned in_use, unsigned asked);

/// Errors: kInvalidArgument when `asked` GPUs exceed max_gpus by themselves (the request can never
/// start for this user).
Status CheckGpuLimitEver(const LimitsConfig& limits, const std::string& user, unsigned asked);

/// limits.max_gpu_hours_per_day's window: the last 24 hours, in seconds.
inline constexpr double kGpuHoursWindowS = 86400;

/// The GPU-seconds `record` used within the `window_s` seconds up to `now_s`: its GPUs x the
/// overlap of its run (a running record, no end, up to `now_s`) with [now_s - window_s, now_s].
double WindowUsageGpuS(const UsageRecord& record, double now_s, double window_s = kGpuHoursWindowS);

/// Seconds from `now_s` until the GPU-seconds `records` used in the window (WindowUsageGpuS summed)
/// fall below `limit_gpu_s`, if the running records (no end) keep running and nothing else starts:
/// 0 when they are below it now; nullopt when they never are (running jobs alone reach the limit).
/// O(n log n) in the records.
std::optional<double> WindowUsageBelowInS(std::span<const UsageRecord> records, double limit_gpu_s, double now_s,
                                          double window_s = kGpuHoursWindowS);

/// Why the pending jobs of `user`, whose queued jobs used `used_gpu_s` GPU-seconds in the last 24
/// hours, must wait under limits.max_gpu_hours_per_day (nullopt: they need not: no limit, or
/// below it): "alice used 24.3 of the 24 GPU-hours limits.max_gpu_hours_per_day allows in the last
/// 24 h; alice's next job can start in about 1h 12m". `next_in_s` (WindowUsageBelowInS): the wait
/// said, when known.
std::optional<std::string> GpuHoursLimitReason(const LimitsConfig& limits, const std::string& user, double used_gpu_s,
                                               std::optional<double> next_in_s);

}  // namespace gpulane::sched
