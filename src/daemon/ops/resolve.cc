#include "daemon/ops/resolve.h"

#include <fmt/format.h>

#include "daemon/retention.h"
#include "store/job_id.h"

namespace gpulane::daemon::ops {

using store::Job;

Result<std::vector<store::JobRef>> RefsOf(const std::vector<nlohmann::json>& ids, const std::string& op) {
  std::vector<store::JobRef> refs;
  for (const nlohmann::json& value : ids) {
    auto named = store::JobRefsFromJson(value);
    if (!named) return MakeError(ErrorKind::kInvalidArgument, op + ": " + named.error().message);
    refs.insert(refs.end(), named->begin(), named->end());
  }
  return refs;
}

Result<Named> Resolver::operator()(const store::JobRef& ref) {
  const std::string text = store::FormatJobRef(ref);
  if (ref.task) {
    const Array& array = Tasks(ref.id);
    if (auto it = array.by_index.find(*ref.task); it != array.by_index.end()) return Named{text, {it->second}, false};
    if (array.ids.empty())
      return MakeError(ErrorKind::kNotFound, Find(ref.id) ? fmt::format("no job {}: job {} is not an array", text, ref.id)
                                                           : NoJobMessage(store_, ref.id, text));
    std::vector<int> indices;
    for (const auto& [index, id] : array.by_index) indices.push_back(index);
    return MakeError(ErrorKind::kNotFound,
                     fmt::format("no job {}: array {} has tasks {}", text, ref.id, store::FormatTaskIndices(indices)));
  }
  const Job* job = Find(ref.id);
  if (!job && damaged_.count(ref.id)) return damaged_.at(ref.id);
  if (!job && WasPruned(store_, ref.id) && !Tasks(ref.id).ids.empty()) return Named{text, Tasks(ref.id).ids, true};
  if (!job) return MakeError(ErrorKind::kNotFound, NoJobMessage(store_, ref.id, text));  // retention.h
  if (!job->array_job_id || *job->array_job_id != ref.id) return Named{store::JobIdText(*job), {ref.id}, false};
  if (Tasks(ref.id).ids.empty()) return Named{text, {ref.id}, true};  // the store failed: at least the first task
  return Named{text, Tasks(ref.id).ids, true};
}

const Job* Resolver::Find(std::int64_t id) {
  if (auto it = active_.find(id); it != active_.end()) return &it->second;
  if (auto it = stored_.find(id); it != stored_.end()) return &it->second;
  auto stored = store_.Get(id);
  if (!stored && stored.error().kind == ErrorKind::kStore) damaged_.emplace(id, stored.error());
  return !stored || !*stored ? nullptr : &stored_.emplace(id, std::move(**stored)).first->second;
}

const Resolver::Array& Resolver::Tasks(std::int64_t array_id) {
  auto it = arrays_.find(array_id);
  if (it != arrays_.end()) return it->second;
  Array array;
  if (auto tasks = store_.ArrayTasks(array_id))
    for (const auto& task : *tasks) {
      array.ids.push_back(task.id);
      array.by_index.emplace(task.index, task.id);
    }
  return arrays_.emplace(array_id, std::move(array)).first->second;
}

std::string What(const Named& named) { return fmt::format("{} {}", named.array ? "array" : "job", named.text); }

std::vector<const Job*> Live(const std::map<std::int64_t, Job>& active, const Named& named) {
  std::vector<const Job*> live;
  for (auto id : named.ids)
    if (auto it = active.find(id); it != active.end() && !store::IsFinished(it->second.state)) live.push_back(&it->second);
  return live;
}

std::optional<std::string> Refuse(const Peer& peer, const Named& named, Resolver& resolve, const std::string& op,
                                  Outcome& out) {
  const Job* job = resolve.Find(named.ids.front());
  if (!job || peer.admin || peer.uid == job->uid()) return std::nullopt;  // as ops::CanAct
  out.Failed(ErrorKind::kPermission, named.text,
             fmt::format("{} belongs to {}: only they or an admin may {} it", What(named), job->user(), op));
  return fmt::format("refused: {} (uid {}) may not {} {} of {}", peer.user, peer.uid, op, What(named), job->user());
}

std::string Ended(const Named& named, Resolver& resolve) {
  if (named.array) return fmt::format("array {} has ended: none of its tasks is queued or running", named.text);
  const Job* job = resolve.Find(named.ids.front());
  return fmt::format("job {} has already ended ({})", named.text, job ? store::StateName(job->state) : "gone");
}

}  // namespace gpulane::daemon::ops
