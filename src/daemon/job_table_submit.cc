// The submitted event (job_table.h): the only code that writes a new job's row and adds it to the
// table. A round of submissions (those the daemon read in one turn of the loop) is stored in one
// transaction, one fsync for all of them (group commit); an array is stored in parts of
// kArrayPartTasks tasks, a transaction each, a few milliseconds of the loop a turn, so that other
// clients are served in between (issue 9, item 5: a 10,000-task array held the loop 75 ms, a ping
// waited 151 ms). An array's ids are reserved with its first part and its tasks stay out of every
// read until its last part is stored (store::JobStore::InsertArrayPart); only then are they added
// (and may start). A daemon stopped or killed before that leaves an incomplete array, removed at
// its next start: it was never acknowledged. Every outcome is returned only once what it reports
// is durable; the daemon turns it into the reply.
#include <algorithm>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "daemon/job_table.h"

namespace gpulane::daemon {

using store::Job;

namespace {

using SubmitResult = std::variant<SubmitStored, SubmitRepeated, SubmitFailed>;

SubmitOutcome SubmitFailedOutcome(const Submission& sub, ErrorKind kind, std::string message) {
  return {sub.from, sub.array, SubmitFailed{Error{kind, std::move(message)}}};
}

}  // namespace

// The working state of one round, by index in the round.
struct JobTable::SubmitRound {
  explicit SubmitRound(std::size_t n) : outcome(n), repeat_of(n), set_aside(n, false) {}
  /// Known already: not stored by this round's transaction.
  std::vector<std::optional<SubmitOutcome>> outcome;
  /// Repeats the idempotency key of an earlier submission of the round (its index).
  std::vector<std::optional<std::size_t>> repeat_of;
  /// An array queued for StoreArrayPart, or a repeat of one's key (answered with it).
  std::vector<bool> set_aside;
  bool Stored(std::size_t i) const { return !outcome[i] && !repeat_of[i] && !set_aside[i]; }
};

std::vector<SubmitOutcome> JobTable::Submit(std::span<Submission> round) {
  SubmitRound r(round.size());
  SortKeys(round, r);
  QueueArrays(round, r);
  CommitPlain(round, r);
  // A repeat within the round gets its first submission's ids once they are stored.
  for (std::size_t i = 0; i < round.size(); ++i) {
    if (!r.repeat_of[i]) continue;
    const SubmitOutcome& first = *r.outcome[*r.repeat_of[i]];
    if (const auto* stored = std::get_if<SubmitStored>(&first.result))
      r.outcome[i] = SubmitOutcome{round[i].from, round[i].array, SubmitRepeated{stored->ids}};
    else
      r.outcome[i] = SubmitFailedOutcome(round[i], ErrorKind::kIo,
                            "the job could not be stored (its first submission with this idempotency key was not stored "
                            "either)");
  }
  std::vector<SubmitOutcome> out;
  for (auto& outcome : r.outcome)
    if (outcome) out.push_back(std::move(*outcome));
  return out;
}

void JobTable::SortKeys(std::span<Submission> round, SubmitRound& r) {
  std::map<std::pair<std::uint32_t, std::string>, std::size_t> first_of_key;  // -> index in the round
  for (std::size_t i = 0; i < round.size(); ++i) {
    const Submission& sub = round[i];
    if (sub.key.empty()) continue;
    const std::uint32_t uid = sub.jobs.front().uid();
    if (auto first = first_of_key.find({uid, sub.key}); first != first_of_key.end()) {
      r.repeat_of[i] = first->second;
      continue;
    }
    // The first submission with this key is an array still being stored: answered with it.
    auto storing = std::find_if(arrays_.begin(), arrays_.end(), [&](const ArrayInProgress& a) {
      return a.sub.jobs.front().uid() == uid && a.sub.key == sub.key;
    });
    if (storing != arrays_.end()) {
      storing->repeats.push_back(sub.from);
      r.set_aside[i] = true;
      continue;
    }
    auto found = store_.FindSubmission(uid, sub.key);
    if (!found) {
      r.outcome[i] = SubmitFailedOutcome(sub, ErrorKind::kIo, "the job could not be stored: " + found.error().message);
    } else if (*found && !(*found)->empty()) {
      log_(fmt::format("submission of {} with a known idempotency key: answered with job {} again", sub.jobs.front().user(),
                       (*found)->front()));
      r.outcome[i] = SubmitOutcome{sub.from, sub.array, SubmitRepeated{std::move(**found)}};
    } else {
      first_of_key.emplace(std::pair{uid, sub.key}, i);
    }
  }
}

void JobTable::QueueArrays(std::span<Submission> round, SubmitRound& r) {
  for (std::size_t i = 0; i < round.size(); ++i) {
    if (!round[i].array || !r.Stored(i)) continue;
    arrays_.push_back(ArrayInProgress{std::move(round[i]), 0, {}, {}});
    r.set_aside[i] = true;
    // A repeat of its key in this round waits with it.
    for (std::size_t j = i + 1; j < round.size(); ++j)
      if (r.repeat_of[j] == i) {
        arrays_.back().repeats.push_back(round[j].from);
        r.repeat_of[j].reset();
        r.set_aside[j] = true;
      }
  }
}

void JobTable::CommitPlain(std::span<Submission> round, SubmitRound& r) {
  std::vector<Job> batch;
  std::vector<store::SubmissionKey> keys;
  std::vector<std::size_t> owners;  // index in the round of each stored submission, in order
  for (std::size_t i = 0; i < round.size(); ++i) {
    if (!r.Stored(i)) continue;
    Submission& sub = round[i];
    if (!sub.key.empty()) keys.push_back({sub.jobs.front().uid(), sub.key, batch.size(), sub.jobs.size()});
    owners.push_back(i);
    for (Job& job : sub.jobs) batch.push_back(std::move(job));
  }
  if (batch.empty()) return;
  auto ids = store_.Insert(batch, false, keys);
  NoteWrite(ids ? Status::Ok() : Status(ids.error()));
  std::size_t k = 0;
  for (std::size_t i : owners) {
    const std::size_t count = round[i].jobs.size();
    if (ids)
      r.outcome[i] = SubmitOutcome{round[i].from, false, SubmitStored{std::vector<std::int64_t>(ids->begin() + k, ids->begin() + k + count)}};
    else
      r.outcome[i] = SubmitFailedOutcome(round[i], ErrorKind::kIo, "the job could not be stored: " + ids.error().message);
    k += count;
  }
  if (ids)  // durable: only now in the table (invariant 2)
    for (Job& job : batch) Add(std::move(job));
}

std::vector<Job> JobTable::NextArrayPart(const ArrayInProgress& a) const {
  const std::size_t offset = a.tasks.size();
  const std::size_t count = std::min(kArrayPartTasks, a.sub.indices.size() - offset);
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
  return part;
}

std::vector<SubmitOutcome> JobTable::StoreArrayPart() {
  if (arrays_.empty()) return {};
  ArrayInProgress& a = arrays_.front();
  const std::size_t total = a.sub.indices.size(), offset = a.tasks.size();
  std::vector<Job> part = NextArrayPart(a);
  std::vector<store::SubmissionKey> keys;
  if (!a.sub.key.empty()) keys.push_back({a.sub.jobs.front().uid(), a.sub.key, 0, total});
  auto stored = store_.InsertArrayPart(part, {a.array_job_id, offset, total}, keys);
  NoteWrite(stored ? Status::Ok() : Status(stored.error()));
  if (!stored)
    return AbandonArray(Error{stored.error().kind, "the array could not be stored: " + stored.error().message});
  a.array_job_id = *stored;
  for (Job& task : part) a.tasks.emplace_hint(a.tasks.end(), task.id, std::move(task));
  if (a.tasks.size() < total) return {};
  std::vector<std::int64_t> ids;
  ids.reserve(total);
  for (const auto& [id, task] : a.tasks) ids.push_back(id);
  AddAll(a.tasks);  // its last part is durable: only now in the table (invariant 2)
  return EndArray(SubmitStored{std::move(ids)});
}

std::vector<SubmitOutcome> JobTable::AbandonArray(const Error& why) {
  if (arrays_.empty()) return {};
  const std::int64_t array_job_id = arrays_.front().array_job_id;
  if (array_job_id)
    if (auto dropped = store_.DropIncompleteArrays(array_job_id); !dropped)
      log_(fmt::format("cannot remove the incomplete array {} after a failed write (removed at the next start): {}",
                       array_job_id, dropped.error().message));
  return EndArray(SubmitFailed{why});
}

std::vector<SubmitOutcome> JobTable::EndArray(SubmitResult result) {
  const ArrayInProgress& a = arrays_.front();
  std::vector<SubmitOutcome> out;
  out.reserve(1 + a.repeats.size());
  SubmitResult repeated = result;
  if (const auto* stored = std::get_if<SubmitStored>(&result)) repeated = SubmitRepeated{stored->ids};
  out.push_back({a.sub.from, true, std::move(result)});
  // Each repeat is answered as an array's submission (its reply names the array).
  for (const Submitter& to : a.repeats) out.push_back({to, true, repeated});
  arrays_.pop_front();
  return out;
}

void JobTable::CountStoringTasks(std::map<std::uint32_t, std::size_t>& by_uid) const {
  for (const ArrayInProgress& a : arrays_) by_uid[a.sub.jobs.front().uid()] += a.sub.indices.size();
}

}  // namespace gpulane::daemon
