// Job ids as people and requests write them (store/job_id.h): "12", "12_3", "12_[1-3,7]", lists of
// them, and --array's task indices. Input: the text.
// Properties: every id parsed is >= 1 and every task index within 0..kMaxArrayIndex, at most
// kMaxArrayTasks of them; a parsed id formats (FormatJobRef) to text that parses back to it; task
// indices format (FormatTaskIndices) to text that parses back to the same sorted set; SplitJobIds
// makes up no characters.
#include <algorithm>
#include <cstdint>
#include <string>

#include "fuzz_check.h"
#include "store/job_id.h"

namespace store = gpulane::store;

namespace {

void CheckIndices(const std::vector<int>& indices) {
  FUZZ_CHECK(!indices.empty() && indices.size() <= store::kMaxArrayTasks, "%zu task indices", indices.size());
  for (int i : indices) FUZZ_CHECK(i >= 0 && i <= store::kMaxArrayIndex, "task index %d", i);
  std::vector<int> sorted = indices;
  std::sort(sorted.begin(), sorted.end());
  FUZZ_CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end(), "a task index twice");
  const std::string text = store::FormatTaskIndices(sorted);
  auto again = store::ParseTaskIndices(text);
  FUZZ_CHECK(again.ok(), "'%s' (formatted) is refused", text.c_str());
  FUZZ_CHECK(*again == sorted, "'%s' does not read back", text.c_str());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  if (auto indices = store::ParseTaskIndices(text)) CheckIndices(*indices);

  std::size_t kept = 0;
  for (const std::string& id : store::SplitJobIds(text)) {
    kept += id.size();
    auto refs = store::ParseJobRefs(id);
    // An error quotes the id as given, control characters included (issue 9, item 13: escaped
    // where it is printed), so it is not checked to be one line here.
    if (!refs) continue;
    FUZZ_CHECK(!refs->empty() && refs->size() <= store::kMaxArrayTasks, "%zu jobs named", refs->size());
    std::vector<int> tasks;
    for (const auto& ref : *refs) {
      FUZZ_CHECK(ref.id >= 1 && ref.id == refs->front().id, "job id %lld", static_cast<long long>(ref.id));
      FUZZ_CHECK(ref.task.has_value() == refs->front().task.has_value(), "tasks and jobs mixed");
      if (ref.task) tasks.push_back(*ref.task);
      auto again = store::ParseJobRefs(store::FormatJobRef(ref));
      FUZZ_CHECK(again && again->size() == 1 && (*again)[0].id == ref.id && (*again)[0].task == ref.task,
                 "'%s' does not read back", store::FormatJobRef(ref).c_str());
    }
    if (!tasks.empty()) CheckIndices(tasks);
  }
  FUZZ_CHECK(kept <= text.size(), "SplitJobIds made up characters");
  return 0;
}
