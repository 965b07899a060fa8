#pragma once
// The daemon's request handlers (issue 25, item 1): free functions of a narrow context
// (daemon/ops/context.h) and a typed request (proto/requests.h), one file per group:
//   ops/read.cc     show, logs, queue (one frame, and the selection a streamed listing sends)
//   ops/submit.cc   submit: a submission checked and made into jobs
//   ops/wait.cc     wait: the jobs it waits for, and its answer
//   ops/control.cc  cancel, hold, release
// They return typed replies, a whole reply (the requests over several jobs, whose error replies list
// every failure) or an error; the dispatch in daemon/handlers.cc answers the connection.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "daemon/ops/context.h"
#include "daemon/outcome.h"
#include "daemon/queue_stream.h"
#include "daemon/submission.h"
#include "gpu/types.h"
#include "proto/replies.h"
#include "proto/requests.h"
#include "util/config.h"
#include "util/result.h"

namespace gpulane::daemon::ops {

// read.cc
/// Every job the id names, with its attempts and isolation (another user's fields hidden); "job"
/// too when it names one job. A whole reply: an error one (with "failed") when it names none.
nlohmann::json Show(const Context& ctx, const proto::ShowRequest& req);
/// A part of one job's output, read with its owner's rights.
Result<proto::LogsReply> Logs(const Context& ctx, const proto::LogsRequest& req);
/// The jobs a queue request lists, in id order (docs/protocol.md `queue`); `streamed`: for a
/// streamed reply (ids only with "all": the parts are read from the store as they are sent).
Result<QueueSelection> SelectForQueue(const Context& ctx, const proto::QueueRequest& req, bool streamed);
/// A queue listing in one frame: the job objects, or with format "table" the text table.
Result<nlohmann::json> Queue(const Context& ctx, const proto::QueueRequest& req);

// submit.cc
/// What the daemon needs of a user to accept a submission: their [limits] and how many unfinished
/// jobs they have (counted once per loop turn; the Daemon implements it).
class SubmitQuotas {
 public:
  virtual ~SubmitQuotas() = default;
  virtual const LimitsConfig& LimitsOfUid(std::uint32_t uid, const std::string& user) = 0;
  virtual std::size_t& UnfinishedOf(std::uint32_t uid) = 0;
};
/// A submission checked: its jobs (for an array, one: the template of every task), an array's task
/// indices and, from a command file, each task's command; its idempotency key ("" without one).
/// The job table stores it (daemon/submission.h, JobTable::Submit).
using Submission = daemon::Submission;
/// Checks a submission with `run`'s rules against the GPUs read at start (`gpus`) and makes its
/// jobs; counts them in the user's unfinished jobs. Errors: the first problem, one line.
Result<Submission> CheckSubmission(const Context& ctx, SubmitQuotas& quotas, const GpuSnapshot& gpus,
                                   const proto::SubmitRequest& req);

// wait.cc
/// The jobs a wait waits for, and what its request named that is no job ("failed", with the lines
/// in the answer); `answer`: the reply to send at once instead of waiting (with check, or when no
/// id named a job).
struct WaitPlan {
  std::vector<std::int64_t> ids;
  nlohmann::json failed = nlohmann::json::array();
  std::optional<nlohmann::json> answer;
};
WaitPlan Wait(const Context& ctx, const proto::WaitRequest& req);
/// The answer once every job of `ids` has ended: the jobs as a listing shows them to ctx.peer.
nlohmann::json WaitAnswer(const Context& ctx, const std::vector<std::int64_t>& ids, const nlohmann::json& failed);

// control.cc
/// The jobs a cancel, hold or release changes, in order, and a line for each id it cannot act on;
/// the daemon changes them in parts (daemon/jobs_in_parts.h) and answers once all are stored.
struct Chosen {
  std::vector<std::int64_t> ids;
  Outcome out;
};
/// The unfinished jobs the ids name and, with user or name, those that match (another user's are
/// refused unless the peer is an admin). Pending ones are kept from launching until their part.
Result<Chosen> Cancel(const Context& ctx, const proto::CancelRequest& req);
/// The jobs `ids` name that hold (`hold`: pending ones and those waiting for GPUs) or release
/// (held ones) changes. Pending ones are kept from launching until their part.
Result<Chosen> Hold(const Context& ctx, const std::vector<nlohmann::json>& ids, bool hold);

}  // namespace gpulane::daemon::ops
