#pragma once
// Who a user is in the user database: the names of the groups a uid belongs to (its primary
// group and every supplementary one), for [limits.groups.NAME] (sched/user_limits.h); the uid of
// a `--user NAME` option.
#include <cstdint>
#include <string>
#include <vector>

#include "util/result.h"

namespace gpulane {

/// The names of the groups of user `uid` (primary first, then getgrouplist(3)'s order); empty when
/// the uid has no entry in the user database. A group without a name is left out.
std::vector<std::string> GroupNamesOf(std::uint32_t uid);

/// The uid of the user a `--user NAME` option names (queue, report: one answer for both). Errors:
/// kInvalidArgument (a bad value, exit 2) "--user NAME: no such user on this machine ..." when the
/// user database has no such name.
Result<std::uint32_t> UidOfUserOption(const std::string& name);

}  // namespace gpulane
