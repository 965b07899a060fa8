#include "os/user_groups.h"

#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <fmt/format.h>

namespace gpulane {

std::vector<std::string> GroupNamesOf(std::uint32_t uid) {
  struct passwd pw;
  struct passwd* found = nullptr;
  std::vector<char> buf(16384);
  if (getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) != 0 || !found) return {};
  std::vector<gid_t> gids(64);
  int n = static_cast<int>(gids.size());
  if (getgrouplist(found->pw_name, found->pw_gid, gids.data(), &n) < 0) {
    gids.resize(static_cast<std::size_t>(n));
    if (getgrouplist(found->pw_name, found->pw_gid, gids.data(), &n) < 0) n = 0;
  }
  gids.resize(static_cast<std::size_t>(n));
  std::vector<std::string> names;
  for (gid_t gid : gids) {
    struct group gr;
    struct group* g = nullptr;
    std::vector<char> gbuf(16384);
    if (getgrgid_r(gid, &gr, gbuf.data(), gbuf.size(), &g) == 0 && g && g->gr_name) names.emplace_back(g->gr_name);
  }
  return names;
}

Result<std::uint32_t> UidOfUserOption(const std::string& name) {
  struct passwd pw;
  struct passwd* found = nullptr;
  std::vector<char> buf(16384);
  if (name.empty() || getpwnam_r(name.c_str(), &pw, buf.data(), buf.size(), &found) != 0 || !found)
    return MakeError(ErrorKind::kInvalidArgument,
                     fmt::format("--user {}: no such user on this machine (give a login name, as `getent passwd` lists them)", name));
  return static_cast<std::uint32_t>(found->pw_uid);
}

}  // namespace gpulane
