#pragma once
// Per-user limits ([limits], [limits.users.NAME], [limits.groups.NAME] of the machine's config,
// docs/config.md): which values apply to a user, and what they refuse. Pure: the caller looks up
// the user's groups (os/user_groups.h) and counts what the user holds.
//
// Where each is applied: the time limits at submit (the daemon) and in `gpulane run`'s request
// (cli/request_options); max_queued at submit (the daemon); max_gpus in the lease line
// (sched::Schedule, through Limits::max_gpus_by_uid: a request that would take its user over the
// limit waits and reserves nothing) and in the daemon's launch decision (it hands no supervisor to
// a job whose user is at the limit, so a flood does not fill the waiting slots).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

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

}  // namespace gpulane::sched
