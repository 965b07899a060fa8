#pragma once
// Who a user is in the user database: the names of the groups a uid belongs to (its primary
// group and every supplementary one), for [limits.groups.NAME] (sched/user_limits.h).
#include <cstdint>
#include <string>
#include <vector>

namespace gpulane {

/// The names of the groups of user `uid` (primary first, then getgrouplist(3)'s order); empty when
/// the uid has no entry in the user database. A group without a name is left out.
std::vector<std::string> GroupNamesOf(std::uint32_t uid);

}  // namespace gpulane
