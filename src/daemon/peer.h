#pragma once
// Who is asking the daemon: the peer of a connection, from SO_PEERCRED (never a request's field).
#include <sys/types.h>

#include <cstdint>
#include <string>

namespace gpulane::daemon {

struct Peer {
  std::uint32_t uid = 0;
  std::uint32_t gid = 0;
  pid_t pid = 0;
  std::string user;
  bool admin = false;  ///< root or a member of daemon.admin_group
};

}  // namespace gpulane::daemon
