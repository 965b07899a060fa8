// The daemon's side of submissions: the round of submissions read in one turn of the loop is
// handed to the job table, which stores it (JobTable::Submit: one transaction; arrays in parts,
// JobTable::StoreArrayPart, a few milliseconds of the loop a turn) and returns each submission's
// outcome once it is durable; here each outcome becomes the reply on its connection, written out
// at once (not after the rest of the turn, which may walk the whole queue to launch jobs).
// Requests behind an array on its connection wait for its answer, in order.
#include <type_traits>
#include <variant>

#include "daemon/daemon.h"

namespace gpulane::daemon {
namespace {

using nlohmann::json;

json SubmitReplyJson(const SubmitOutcome& outcome) {
  return std::visit(
      [&](const auto& result) {
        using R = std::decay_t<decltype(result)>;
        if constexpr (std::is_same_v<R, SubmitFailed>) {
          return proto::ErrorResponse(result.error.kind, result.error.message);
        } else {
          proto::SubmitReply reply{result.ids, std::nullopt, std::nullopt};
          if (outcome.array) reply.array_job_id = result.ids.front();
          if (std::is_same_v<R, SubmitRepeated>) reply.repeated = true;
          return proto::ReplyToJson(reply);
        }
      },
      outcome.result);
}

}  // namespace

void Daemon::CommitSubmissions() {
  if (!submits_.empty()) AnswerSubmissions(jobs_->Submit(submits_));
  submits_.clear();
  unfinished_of_uid_.reset();  // counted afresh in the next turn that has a submission
}

void Daemon::StoreArrayParts(double budget_s) {
  const double start = clock_.MonotonicS();
  while (jobs_->storing_arrays()) {
    AnswerSubmissions(jobs_->StoreArrayPart());
    if (clock_.MonotonicS() - start >= budget_s) return;
  }
}

void Daemon::AnswerSubmissions(const std::vector<SubmitOutcome>& outcomes) {
  for (const SubmitOutcome& outcome : outcomes) {
    AnswerConnection(outcome.to.fd, outcome.to.serial, SubmitReplyJson(outcome));
    if (outcome.array) ResumeAfterArray(outcome.to.fd, outcome.to.serial);
  }
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

}  // namespace gpulane::daemon
