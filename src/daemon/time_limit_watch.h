#pragma once
// The daemon's watch of every lease's time limit (issue 23, item 9): a lease's own side
// (`gpulane run`, a queued job's supervisor, `gpulane _lease`) stops its job at its time limit, but
// a `kill -9` of that side left the job running past it, holding its lease. Each tick the daemon
// reads the lease directory and, for a lease still alive past its limit, its holder's kill grace
// and a slack (sched/lease_deadline.h: the limit is the lease's own, bounded by its owner's
// [limits], or her default_time_limit), sends SIGTERM to the lease's processes
// (lease/lease_processes.h: its owner's only), and SIGKILL one grace later to those left. The
// lease ends when the last process holding it is gone. A per-user daemon watches its own user's
// leases only (it may not signal anyone else's).
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lease/records.h"
#include "os/process_table.h"
#include "util/config.h"

namespace gpulane::daemon {

class TimeLimitWatch {
 public:
  /// `config`: the machine's ([limits], run.kill_grace); `log`: a line into the daemon's log.
  /// `processes`: the table (os::Env's) a lease's processes are looked up in.
  TimeLimitWatch(Config config, ProcessTable& processes, std::function<void(const std::string&)> log);
  /// Looks at the live `leases` at `now_s` (seconds since the epoch) and acts on those past their
  /// deadline. Returns how many leases it signalled in this call.
  unsigned Check(const std::vector<lease::LeaseRecord>& leases, double now_s);

 private:
  struct Seen {
    double first_seen_s = 0;
    std::optional<double> termed_at_s;  ///< when it was last signalled
  };
  const LimitsConfig& LimitsOfUid(std::uint32_t uid);
  Config config_;
  ProcessTable& processes_;
  std::function<void(const std::string&)> log_;
  std::map<std::pair<std::uint64_t, std::uint64_t>, Seen> seen_;  ///< by the lease file's (dev, ino)
  std::map<std::uint32_t, LimitsConfig> limits_;                   ///< uid -> her limits (looked up once)
};

}  // namespace gpulane::daemon
