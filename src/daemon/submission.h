#pragma once
// A submission on its way into the job table, and what became of it: the "submitted" event of the
// queue core (JobTable::Submit, JobTable::StoreArrayPart: job_table_submit.cc). The request
// handler (ops/submit.cc) checks a request and makes its jobs; the table stores them and adds them;
// the daemon turns each outcome into the reply on the submitter's connection.
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "store/job.h"
#include "util/result.h"

namespace gpulane::daemon {

/// Whom a submission's outcome goes to: the daemon's connection (its descriptor and
/// Connection::serial). The table keeps it with the submission and hands it back unread.
struct Submitter {
  int fd = -1;
  std::uint64_t serial = 0;
};

/// A submission checked (ops::CheckSubmission), not stored yet.
struct Submission {
  /// Its jobs; for an array, one: the template of every task.
  std::vector<store::Job> jobs;
  bool array = false;
  /// An array's task indices (its tasks are made part by part as they are stored).
  std::vector<int> indices;
  /// submit --array-file: each task's own command, by position in `indices` (empty: the spec's).
  std::vector<store::SharedList<std::string>> task_argv;
  /// The client's idempotency key ("" without one): unique per uid (docs/protocol.md, "submit").
  std::string key;
  Submitter from;
};

/// The submission's jobs are stored (durable) and in the table: their ids, in order (an array's
/// id is its first task's).
struct SubmitStored {
  std::vector<std::int64_t> ids;
};
/// Its idempotency key was stored before (or by an earlier submission of the same round, or an
/// array being stored): nothing new was stored, these are the earlier submission's ids.
struct SubmitRepeated {
  std::vector<std::int64_t> ids;
};
/// Nothing of it was stored (the store refused the write, or the key's look-up): why, for people.
struct SubmitFailed {
  Error error;
};

/// What became of one submission, once it is known (a reply may be sent).
struct SubmitOutcome {
  Submitter to;
  bool array = false;  ///< the submission was an array's (its reply names the array's id)
  std::variant<SubmitStored, SubmitRepeated, SubmitFailed> result;
};

}  // namespace gpulane::daemon
