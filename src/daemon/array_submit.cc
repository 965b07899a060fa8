// Array submissions stored part by part: an array of up to 100,000 tasks (store::kMaxArrayTasks)
// is stored in transactions of Daemon::kArrayPartTasks tasks, a few milliseconds of the loop a
// turn, so that other clients are served in between (issue 9, item 5: a 10,000-task array held the
// loop 75 ms, a ping waited 151 ms). The array's ids are reserved with its first part and its tasks
// stay out of every read until its last part is stored (store::JobStore::InsertArrayPart); only
// then are they added to the job table (and may start) and the client answered. A daemon stopped
// or killed before that leaves an incomplete array, removed at its next start: it was never
// acknowledged. Requests behind the array on its connection wait for its answer, in order.
#include <fmt/format.h>

#include "daemon/daemon.h"

namespace gpulane::daemon {

using nlohmann::json;
using store::Job;

void Daemon::StartArray(PendingSubmit&& sub) {
  ArrayInProgress a;
  a.sub = std::move(sub);
  arrays_.push_back(std::move(a));
}

void Daemon::AnswerConnection(int fd, std::uint64_t serial, const json& reply) {
  auto it = connections_.find(fd);
  if (it == connections_.end() || it->second.serial != serial) return;  // gone: its client closed it
  Reply(it->second, reply);
  WriteTo(it->second);
}

void Daemon::ResumeAfterArray(int fd, std::uint64_t serial) {
  auto it = connections_.find(fd);
  if (it == connections_.end() || it->second.serial != serial) return;
  it->second.storing = false;
  resume_.emplace_back(fd, serial);
}

void Daemon::ResumeConnections() {
  auto resume = std::exchange(resume_, {});
  for (const auto& [fd, serial] : resume) {
    auto it = connections_.find(fd);
    if (it != connections_.end() && it->second.serial == serial && !it->second.storing) ReadFrom(it->second);
  }
}

void Daemon::StoreArrayParts(double budget_s) {
  const double start = clock_.MonotonicS();
  while (!arrays_.empty()) {
    ArrayInProgress& a = arrays_.front();
    const std::size_t total = a.sub.indices.size(), offset = a.tasks.size();
    const std::size_t count = std::min(kArrayPartTasks, total - offset);
    std::vector<Job> part;
    part.reserve(count);
    for (std::size_t i = offset; i < offset + count; ++i) {
      Job task = a.sub.jobs.front();
      task.array_index = a.sub.indices[i];
      if (!a.sub.task_argv.empty()) {  // submit --array-file: its own command, the rest shared
        task.spec.argv = a.sub.task_argv[i];
        task.own_argv = true;
      }
      part.push_back(std::move(task));
    }
    std::vector<store::SubmissionKey> keys;
    if (!a.sub.key.empty()) keys.push_back({a.sub.jobs.front().uid, a.sub.key, 0, total});
    auto stored = store_->InsertArrayPart(part, {a.array_job_id, offset, total}, keys);
    jobs_->NoteWrite(stored ? Status::Ok() : Status(stored.error()));
    const bool done = !stored || offset + count == total;
    json reply;
    if (!stored) {
      reply = proto::ErrorResponse(stored.error().kind, "the array could not be stored: " + stored.error().message);
      if (a.array_job_id)
        if (auto dropped = store_->DropIncompleteArrays(a.array_job_id); !dropped)
          Log(fmt::format("cannot remove the incomplete array {} after a failed write (removed at the next start): {}",
                          a.array_job_id, dropped.error().message));
    } else {
      a.array_job_id = *stored;
      for (Job& task : part) a.tasks.emplace_hint(a.tasks.end(), task.id, std::move(task));
    }
    if (done) {
      if (stored) {
        std::vector<std::int64_t> ids;
        ids.reserve(total);
        for (const auto& [id, task] : a.tasks) ids.push_back(id);
        reply = {{"v", proto::kVersion}, {"ok", true}, {"ids", std::move(ids)}, {"array_job_id", a.array_job_id}};
        const bool runnable = a.sub.jobs.front().state != store::JobState::kHeld;
        jobs_->AddAll(a.tasks);
        if (runnable) schedule_needed_ = true;
      }
      AnswerConnection(a.sub.fd, a.sub.serial, reply);
      ResumeAfterArray(a.sub.fd, a.sub.serial);
      json repeated = reply;
      if (stored) repeated["repeated"] = true;
      for (const auto& [fd, serial] : a.repeats) {
        AnswerConnection(fd, serial, repeated);
        ResumeAfterArray(fd, serial);
      }
      arrays_.pop_front();
    }
    if (clock_.MonotonicS() - start >= budget_s) return;
  }
}

}  // namespace gpulane::daemon
