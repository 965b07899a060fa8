#pragma once
// Job ids as people write them, in Slurm's notation: "12" is job 12 (and when 12 is an array's id,
// every task of the array), "12_3" the task with array index 3 of array 12, "12_[1-3,7]" tasks 1,
// 2, 3 and 7 of array 12. The one parser of the notation: the CLI checks what users type with it,
// and the daemon reads the ids of requests with it.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "sched/launch.h"
#include "util/result.h"

namespace gpulane::store {

inline constexpr int kMaxArrayIndex = 10000000;     ///< the largest array index (--array 0-10000000)
inline constexpr std::size_t kMaxArrayTasks = 100000;  ///< the most tasks one array (or one id) names

/// One job as named: job `id`; with `task`, the task with that array index of array `id` (the
/// array's id is its first task's job id). The launch policy's own type (sched/launch.h), so a
/// job's dependencies reach it as stored.
using JobRef = sched::JobRef;

/// Parses one id: "12", "12_3" or "12_[1-3,7]" (in the brackets ParseTaskIndices' forms), into the
/// jobs it names, in order ("12_[1-3]" -> 12_1, 12_2, 12_3). Errors: kInvalidArgument, one line
/// naming the id and the forms expected ("job id '12_': give a job id (12), ...").
Result<std::vector<JobRef>> ParseJobRefs(std::string_view text);

/// Whether `text` is a `gpulane run`'s id as status and report write it: "r" and its pid ("r4121").
/// No queued job has one (ParseJobRefs refuses it).
bool IsRunId(std::string_view text);

/// Splits a comma-separated list of ids ("12, 13_2,14_[1-3,7]") into its ids, trimmed; commas in
/// brackets belong to their id. "" gives no ids; an empty one between commas stays ("").
std::vector<std::string> SplitJobIds(std::string_view text);

/// Parses task indices, for --array and the brackets of an id: "0-99", "1,3,5", "0-99:2" (every
/// second) and lists of these. Errors: kInvalidArgument "give task indices like ..." (the caller
/// names the option or id) when malformed, empty, over kMaxArrayIndex or more than kMaxArrayTasks.
Result<std::vector<int>> ParseTaskIndices(std::string_view text);

/// "12" or "12_3".
std::string FormatJobRef(const JobRef& ref);

/// Indices as Slurm writes them: {0, 1, 2, 3, 7, 9} -> "0-3,7,9".
std::string FormatTaskIndices(const std::vector<int>& indices);

/// One entry of GroupTaskIds: "12_[0-2999]" for 3000 tasks of array 12 (as `show` takes it), "12_3"
/// or "15" alone; `count` is how many ids it stands for.
struct IdGroup {
  std::string text;
  std::size_t count = 1;
};
/// The texts of ids in the order given ("12_0", "12_1", "12_2", "15"), neighbouring tasks of one
/// array as one group: {"12_[0-2]" (3), "15" (1)}. An id that is no task stays alone, as given.
std::vector<IdGroup> GroupTaskIds(const std::vector<std::string>& ids);

/// Job ids in order as ranges, for a log line about many jobs: {12, 13, 14, 20} -> "12-14,20"; past
/// `max_ranges` ranges the rest is counted: "12-14,20 and 3 more ranges (9 jobs)".
std::string FormatJobIdRanges(const std::vector<std::int64_t>& ids, std::size_t max_ranges = 20);

}  // namespace gpulane::store

/// fmt prints a JobRef as FormatJobRef does ("12", "12_3").
template <>
struct fmt::formatter<gpulane::store::JobRef> : fmt::formatter<std::string_view> {
  template <typename Context>
  auto format(const gpulane::store::JobRef& ref, Context& ctx) const {
    return fmt::formatter<std::string_view>::format(gpulane::store::FormatJobRef(ref), ctx);
  }
};
