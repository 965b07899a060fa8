#pragma once
// Job ids of a request, found (docs/protocol.md "Job ids"): what each id names (one job, or every
// task of an array), for the handlers over jobs (show, logs, wait, cancel, hold, release, and a
// submission's dependencies), and the words every one of them uses for a refusal.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "daemon/outcome.h"
#include "daemon/peer.h"
#include "store/job.h"
#include "store/job_store.h"
#include "util/result.h"

namespace gpulane::daemon::ops {

/// Every job named by `ids` (each a job id: store::JobRefsFromJson), in order; `op` names the
/// request in errors (kInvalidArgument, "cancel: job id '12_': ...").
Result<std::vector<store::JobRef>> RefsOf(const std::vector<nlohmann::json>& ids, const std::string& op);

/// What one job id names, found: one job, or (the array's own id) every task of an array.
struct Named {
  std::string text;               ///< as people write it: "12", "12_3" (also for a task named by its number)
  std::vector<std::int64_t> ids;  ///< the job, or the array's tasks, finished ones included, in order
  bool array = false;             ///< the whole array
};

/// Finds the jobs that ids name, reading each array's tasks from the store once per request. The
/// jobs it finds stay valid while the request is handled (until a job is finished and forgotten).
class Resolver {
 public:
  Resolver(store::JobStore& store, const std::map<std::int64_t, store::Job>& active) : store_(store), active_(active) {}

  /// Errors: kNotFound, "no job 12_3: array 12 has tasks 0-3".
  Result<Named> operator()(const store::JobRef& ref);

  /// The job `id`: the daemon's copy while it is unfinished, else the stored one; nullptr when none.
  const store::Job* Find(std::int64_t id);

 private:
  struct Array {
    std::vector<std::int64_t> ids;        ///< its tasks' job ids, in order
    std::map<int, std::int64_t> by_index;  ///< array index -> job id
  };

  const Array& Tasks(std::int64_t array_id);

  store::JobStore& store_;
  const std::map<std::int64_t, store::Job>& active_;
  std::map<std::int64_t, store::Job> stored_;
  std::map<std::int64_t, Array> arrays_;
  std::map<std::int64_t, Error> damaged_;  ///< rows found that cannot be read (kStore), by id
};

/// "job 12_3" or "array 12", for messages.
std::string What(const Named& named);

/// The unfinished jobs of `named` (not those that have ended while their end waits for the store).
std::vector<const store::Job*> Live(const std::map<std::int64_t, store::Job>& active, const Named& named);

/// When `peer` may not `op` `named` (another user's; an array's tasks all have its owner): says so
/// in `out` and returns the line for the daemon's log.
std::optional<std::string> Refuse(const Peer& peer, const Named& named, Resolver& resolve, const std::string& op,
                                  Outcome& out);

/// Why a command cannot act on `named`, none of whose jobs is unfinished.
std::string Ended(const Named& named, Resolver& resolve);

}  // namespace gpulane::daemon::ops
