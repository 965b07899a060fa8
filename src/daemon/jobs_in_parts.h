#pragma once
// A cancel, hold or release of many jobs, done in parts of Daemon::kCancelPartJobs jobs, one
// transaction each (cancel_slices.cc, hold_slices.cc; issue 23, item 8): 300,000 held tasks
// cancelled at once held the daemon's loop 11.5 s for everyone, and a hold or release of as many
// did the same. The job table changes each part (JobTable::CancelPart, HoldPart); the daemon keeps
// this queue, the replies and the connections.
#include <cstdint>
#include <string>
#include <vector>

#include "daemon/outcome.h"
#include "daemon/parts_op.h"

namespace gpulane::daemon {

struct JobsInParts {
  int fd;
  std::uint64_t serial;           ///< Connection::serial
  std::string by;                 ///< who changes them (their user name, for the jobs' reason)
  std::vector<std::int64_t> ids;  ///< the jobs to change, in order
  std::size_t next = 0;           ///< ids[next] is the first not yet changed
  Outcome out;                    ///< what is durably done so far, and what failed
  PartsOp op = PartsOp::kCancel;
};

/// The reply's field of the jobs changed ("cancelled": ids; hold and release: "changed").
inline const char* DoneField(PartsOp op) { return op == PartsOp::kCancel ? "cancelled" : "changed"; }

}  // namespace gpulane::daemon
