#pragma once
// A queue listing sent as text in parts (docs/protocol.md "Streamed replies"): the daemon writes
// one part at a time, when the client has taken the one before, so that listing 100,000 jobs
// neither blocks the other clients for the whole listing nor holds all of its text in memory.
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "store/job.h"
#include "store/job_store.h"

namespace gpulane::daemon {

/// A part is sent when less than this is still waiting to be written to the client ...
inline constexpr std::size_t kStreamLowWaterBytes = 64u << 10;
/// ... and holds the text of the next jobs up to about this much, or, for jobs read from the store
/// ("all"), this many jobs, whichever comes first (a part of jobs read from the store costs about
/// 50 us a job on the 2-core machine, bench/results/daemon_latency-2026-12-03.md: 200 keep a turn
/// near 10 ms; the table's unfinished jobs cost a few microseconds each).
inline constexpr std::size_t kStreamPartBytes = 256u << 10;
inline constexpr std::size_t kStreamPartJobs = 200;

/// Jobs a queue request may list with "all": `limit` is at most this in a one-frame reply, and
/// without a limit (or 0) the newest kDefaultQueueLimit are listed. A streamed reply reads the
/// jobs from the store part by part, so it may list up to kMaxStreamedQueueLimit.
inline constexpr std::size_t kDefaultQueueLimit = 1000;
inline constexpr std::size_t kMaxQueueLimit = 10000;
inline constexpr std::size_t kMaxStreamedQueueLimit = 10000000;

/// The jobs a queue request lists.
struct QueueSelection {
  std::vector<std::int64_t> ids;       ///< in id order
  /// With "all": the jobs as the store had them, all of them at once for a one-frame reply; for a
  /// streamed one only the part being written (read by PumpStream from `filter`).
  std::map<std::int64_t, store::Job> stored;
  std::optional<store::JobFilter> filter;  ///< with "all" in a stream: what the jobs of a part are read with
  /// With "all": how many older jobs than those listed exist (the limit left them out); the reply
  /// says so when there are any.
  std::size_t older_left_out = 0;
  std::size_t limit = 0;  ///< with "all": the limit the listing was cut at
  /// Job `id` as it is now: the daemon's copy while it is unfinished, else the stored one;
  /// nullptr when neither (an unfinished job that ended since it was selected).
  const store::Job* Find(std::int64_t id, const std::map<std::int64_t, store::Job>& active) const;
  /// `reply` with "the newest 1000 jobs are listed and 20 older ones are left out: ..." added to
  /// its "warnings" (the CLI prints them on stderr) when older_left_out.
  nlohmann::json WithLeftOut(nlohmann::json reply) const;
};

/// A streamed listing in progress on one connection.
struct QueueStream {
  bool json = false;       ///< the job objects as JSON text (render/queue_json.h), else the table
  QueueSelection jobs;
  std::size_t next = 0;    ///< the next of jobs.ids to send
  std::size_t sent = 0;    ///< jobs sent so far
  double now = 0;          ///< the table's ages are as of the request
};

}  // namespace gpulane::daemon
