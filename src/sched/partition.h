#pragma once
// Partitions (docs/config.md, [partitions.NAME]): a named set of GPUs that starts jobs only inside
// its weekly time windows, with optional limits. Pure: every time here is a local week time, in
// seconds since Monday 00:00 in the machine's time zone ([0, 604800)); the caller converts the
// clock (util/week_window.h LocalWeekSeconds), so tests decide on a virtual week.
// A closed partition starts nothing new; jobs already running in it run on, unless it says
// `ends = "stop"` or `"requeue"`: then a job started in it is stopped when it closes (SIGTERM, the
// kill grace, SIGKILL, as at a time limit) and ends, or (requeue, queued jobs) goes back in line.
#include <optional>
#include <string>
#include <vector>

#include "sched/request.h"
#include "util/config.h"
#include "util/result.h"

namespace gpulane::sched {

/// True when `partition` starts jobs at local week time `week_s` (seconds since Monday 00:00). A
/// partition without windows is always open.
bool IsOpen(const PartitionConfig& partition, double week_s);

/// The next time the partition opens or closes after `week_s`.
struct PartitionChange {
  bool opens = false;  ///< true: it is closed now and opens then; false: it closes then
  double in_s = 0;     ///< seconds from week_s to the change, > 0
  double at_week_s = 0;  ///< the change's local week time, seconds since Monday 00:00
};
/// nullopt when it never changes (no windows, or windows covering the whole week).
std::optional<PartitionChange> NextChange(const PartitionConfig& partition, double week_s);

/// A job started in `partition` at local week time `week_s`: when it must be stopped, because the
/// partition says `ends = "stop"|"requeue"` and closes then.
struct PartitionStop {
  double in_s = 0;      ///< seconds from week_s, > 0
  std::string reason;   ///< for people: "partition night closed at 08:00 (Tue) (ends = \"requeue\")"
  bool requeue = false; ///< ends = "requeue": a queued job goes back in line
};
/// nullopt when its jobs are never stopped: ends = "none", no windows, closed now (nothing starts),
/// or open all week.
std::optional<PartitionStop> StopOf(const PartitionConfig& partition, double week_s);

/// "Mon 08:00" for a local week time in seconds.
std::string WeekTimeText(double week_s);

/// When a closed partition opens, for people: "08:00 (Mon)"; "never" without a change.
std::string OpensText(const PartitionConfig& partition, double week_s);

/// Why a closed partition does not start a job now: "partition day is closed until 08:00 (Mon)".
/// `partition` must be closed at `week_s`.
std::string ClosedText(const PartitionConfig& partition, double week_s);

/// For `gpulane status`: "partition day (GPUs 0-1): open until 20:00" (the day too when the
/// change is not within 24 hours: "open until Fri 20:00"), "partition day (GPUs 0-1): closed,
/// opens Mon 08:00", "partition all (GPUs 0-3): open, no time windows".
std::string StatusLine(const PartitionConfig& partition, double week_s);

/// The partition a request falls in: `requested` (--partition) when given, else
/// `config.default_partition`; nullptr when neither names one (no partition: every GPU, any time).
/// Errors: kInvalidArgument "--partition nigth: no such partition (known: day, night)".
Result<const PartitionConfig*> SelectPartition(const Config& config, const std::string& requested);

/// The partition's GPUs by UUID, given the machine's GPU UUIDs in PCI order (index i at position
/// i). Errors: kInvalidArgument when an index is out of range or a UUID is not on this machine.
Result<std::vector<std::string>> PartitionUuids(const PartitionConfig& partition, const std::vector<std::string>& uuids_by_index);

/// Applies the partition to a request: its limits (a request for more than max_gpus_per_user GPUs
/// or a time limit over max_time_limit is refused; without --time-limit the job gets
/// max_time_limit) and, when `partition_uuids` is given, its GPUs (allowed_uuids becomes the
/// GPUs both allow; nullopt allowed_uuids counts as every GPU). Errors: kInvalidArgument naming
/// the limit and the fix ("-g 3: partition day allows at most 2 GPUs per user").
Status ApplyPartition(const PartitionConfig& partition, Request& request,
                      const std::optional<std::vector<std::string>>& partition_uuids);

/// PartitionUuids and ApplyPartition together: the request's limits checked and its allowed GPUs
/// narrowed to the partition's, given the machine's GPU UUIDs in PCI order.
Status RestrictToPartition(const PartitionConfig& partition, Request& request, const std::vector<std::string>& uuids_by_index);

/// For a request that must start now or not at all (`pick`, `run --no-wait`): Ok when the
/// partition is open at `week_s`, else kNotEnoughGpus with ClosedText (exit 5).
Status RequireOpen(const PartitionConfig& partition, double week_s);

}  // namespace gpulane::sched
