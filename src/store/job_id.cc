#include "store/job_id.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <utility>

#include "util/strings.h"

namespace gpulane::store {
namespace {

constexpr const char* kForms = "give a job id (12), an array task (12_3) or tasks of an array (12_[1-3,7])";

bool AllDigits(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// A decimal number of digits only, at most `max`; nullopt when it is not one or is larger.
std::optional<std::int64_t> ParseBounded(std::string_view text, std::int64_t max) {
  if (!AllDigits(text)) return std::nullopt;
  std::size_t first = text.find_first_not_of('0');
  if (first == std::string_view::npos) return 0;
  if (text.size() - first > 19) return std::nullopt;  // more than int64 holds
  unsigned long long value = 0;
  if (!ParseUint(text.substr(first), &value) || value > static_cast<unsigned long long>(max)) return std::nullopt;
  return static_cast<std::int64_t>(value);
}

}  // namespace

bool IsRunId(std::string_view text) { return text.size() > 1 && text.front() == 'r' && AllDigits(text.substr(1)); }

Result<std::vector<int>> ParseTaskIndices(std::string_view text) {
  auto bad = [] {
    return MakeError(ErrorKind::kInvalidArgument,
                     fmt::format("give task indices from 0 to {} like 0-99, 1,3,5 or 0-99:2 (every second), each once",
                                 kMaxArrayIndex));
  };
  std::vector<int> out;
  for (const auto& raw : Split(text, ',')) {
    std::string_view part = Trim(raw);
    std::int64_t step = 1;
    if (auto colon = part.find(':'); colon != std::string_view::npos) {
      auto s = ParseBounded(part.substr(colon + 1), kMaxArrayIndex);
      if (!s || *s == 0) return bad();
      step = *s;
      part = part.substr(0, colon);
    }
    const auto dash = part.find('-');
    auto first = ParseBounded(part.substr(0, dash), kMaxArrayIndex);
    auto last = dash == std::string_view::npos ? first : ParseBounded(part.substr(dash + 1), kMaxArrayIndex);
    if (!first || !last || *last < *first) return bad();
    if (static_cast<std::size_t>((*last - *first) / step) >= kMaxArrayTasks - out.size()) return bad();
    for (std::int64_t i = *first; i <= *last; i += step) out.push_back(static_cast<int>(i));
  }
  std::vector<int> sorted = out;
  std::sort(sorted.begin(), sorted.end());
  if (out.empty() || std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) return bad();
  return out;
}

Result<std::vector<JobRef>> ParseJobRefs(std::string_view text) {
  auto bad = [&](std::string_view why = "") {
    return MakeError(ErrorKind::kInvalidArgument, fmt::format("job id '{}': {}{}", text, why, kForms));
  };
  // status and report name a `gpulane run` r<its pid>: no queued job. Whether such a run is live
  // is the lease directory's to say (the CLI asks it before it comes here: cli/common.h, RunIdError).
  if (IsRunId(text))
    return MakeError(ErrorKind::kInvalidArgument,
                     fmt::format("job id '{}': r<pid> names a `gpulane run`, not a queued job: `gpulane status` lists the "
                                 "runs that hold GPUs",
                                 text));
  const auto underscore = text.find('_');
  const std::string_view head = text.substr(0, underscore);
  auto id = ParseBounded(head, std::numeric_limits<std::int64_t>::max());
  if (!id) return bad(AllDigits(head) ? "too large; " : "");
  if (*id == 0) return bad("job ids start at 1; ");
  if (underscore == std::string_view::npos) return std::vector<JobRef>{{*id, std::nullopt}};
  std::string_view tail = text.substr(underscore + 1);
  std::vector<int> tasks;
  if (tail.size() >= 2 && tail.front() == '[' && tail.back() == ']') {
    auto indices = ParseTaskIndices(tail.substr(1, tail.size() - 2));
    if (!indices) return bad("in the brackets " + indices.error().message + "; ");
    tasks = std::move(indices).value();
  } else {
    auto index = ParseBounded(tail, kMaxArrayIndex);
    if (!index) return bad(AllDigits(tail) ? fmt::format("array indices go up to {}; ", kMaxArrayIndex) : "");
    tasks.push_back(static_cast<int>(*index));
  }
  std::vector<JobRef> refs;
  refs.reserve(tasks.size());
  for (int task : tasks) refs.push_back({*id, task});
  return refs;
}

std::vector<std::string> SplitJobIds(std::string_view text) {
  std::vector<std::string> ids;
  std::string current;
  int depth = 0;
  if (Trim(text).empty()) return ids;
  auto flush = [&] {  // an empty id ("12,,13") stays, for ParseJobRefs to refuse
    ids.emplace_back(Trim(current));
    current.clear();
  };
  for (char c : text) {
    if (c == '[') ++depth;
    if (c == ']' && depth > 0) --depth;
    if (c == ',' && depth == 0) flush();
    else current += c;
  }
  flush();
  return ids;
}

std::string FormatJobRef(const JobRef& ref) {
  return sched::JobRefText(ref);
}

std::string FormatTaskIndices(const std::vector<int>& indices) {
  std::string out;
  for (std::size_t i = 0; i < indices.size();) {
    std::size_t j = i;
    while (j + 1 < indices.size() && indices[j + 1] == indices[j] + 1) ++j;
    out += fmt::format("{}{}", out.empty() ? "" : ",", indices[i]);
    if (j > i) out += fmt::format("-{}", indices[j]);
    i = j + 1;
  }
  return out;
}

namespace {

// "12_3" -> {"12", 3}; nullopt for anything else.
std::optional<std::pair<std::string, int>> TaskOf(const std::string& id) {
  const auto under = id.find('_');
  if (under == std::string::npos || under == 0 || under + 1 >= id.size()) return std::nullopt;
  int index = 0;
  for (std::size_t i = under + 1; i < id.size(); ++i) {
    if (id[i] < '0' || id[i] > '9' || index > kMaxArrayIndex) return std::nullopt;
    index = index * 10 + (id[i] - '0');
  }
  for (std::size_t i = 0; i < under; ++i)
    if (id[i] < '0' || id[i] > '9') return std::nullopt;
  return std::make_pair(id.substr(0, under), index);
}

}  // namespace

std::vector<IdGroup> GroupTaskIds(const std::vector<std::string>& ids) {
  std::vector<IdGroup> out;
  for (std::size_t i = 0; i < ids.size();) {
    auto first = TaskOf(ids[i]);
    std::vector<int> indices;
    std::size_t j = i;
    if (first)
      for (; j < ids.size(); ++j) {
        auto task = TaskOf(ids[j]);
        if (!task || task->first != first->first) break;
        indices.push_back(task->second);
      }
    if (indices.size() < 2) {
      out.push_back({ids[i], 1});
      ++i;
      continue;
    }
    out.push_back({fmt::format("{}_[{}]", first->first, FormatTaskIndices(indices)), indices.size()});
    i = j;
  }
  return out;
}

std::string FormatJobIdRanges(const std::vector<std::int64_t>& ids, std::size_t max_ranges) {
  std::string out;
  std::size_t ranges = 0, left_ranges = 0, left_jobs = 0;
  for (std::size_t i = 0; i < ids.size();) {
    std::size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
    if (ranges++ < max_ranges) {
      out += fmt::format("{}{}", out.empty() ? "" : ",", ids[i]);
      if (j > i) out += fmt::format("-{}", ids[j]);
    } else {
      ++left_ranges;
      left_jobs += j - i + 1;
    }
    i = j + 1;
  }
  if (left_ranges)
    out += fmt::format(" and {} more range{} ({} job{})", left_ranges, left_ranges == 1 ? "" : "s", left_jobs,
                       left_jobs == 1 ? "" : "s");
  return out;
}

}  // namespace gpulane::store
