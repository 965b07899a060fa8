// The retry decision (--retry N, store::ShouldRetry): which ends of an attempt run the job again,
// how attempts are counted against the limit, and the daemon's reading of a supervisor's "done"
// status (daemon::AttemptEndOf), the log line before a retry and the attempts' JSON.
#include <gtest/gtest.h>

#include "daemon/job_files.h"
#include "daemon/job_table.h"
#include "store/job.h"

namespace gpulane::store {
namespace {

using daemon::AttemptEndOf;
using daemon::SupervisorStatus;

TEST(ShouldRetry, OnlyRecordedFailuresAreRetried) {
  EXPECT_TRUE(ShouldRetry(AttemptEnd::kFailedExit, 0, 3));
  EXPECT_TRUE(ShouldRetry(AttemptEnd::kStartFailed, 0, 3)) << "provably never ran: a node fault";
  EXPECT_FALSE(ShouldRetry(AttemptEnd::kCompleted, 0, 3));
  EXPECT_FALSE(ShouldRetry(AttemptEnd::kCancelled, 0, 3));
  EXPECT_FALSE(ShouldRetry(AttemptEnd::kTimeout, 0, 3));
  EXPECT_FALSE(ShouldRetry(AttemptEnd::kLost, 0, 3)) << "may have completed: never run twice";
}

TEST(ShouldRetry, AttemptsCountUpToTheLimit) {
  // --retry 3: attempts 0 (the first run), 1, 2 are followed by another; attempt 3 is the last.
  for (int attempt = 0; attempt < 3; ++attempt) EXPECT_TRUE(ShouldRetry(AttemptEnd::kFailedExit, attempt, 3)) << attempt;
  EXPECT_FALSE(ShouldRetry(AttemptEnd::kFailedExit, 3, 3));
  EXPECT_FALSE(ShouldRetry(AttemptEnd::kFailedExit, 4, 3));
  EXPECT_FALSE(ShouldRetry(AttemptEnd::kFailedExit, 0, 0)) << "the default: no retry";
  EXPECT_TRUE(ShouldRetry(AttemptEnd::kFailedExit, kMaxRetries - 1, kMaxRetries));
  EXPECT_FALSE(ShouldRetry(AttemptEnd::kFailedExit, kMaxRetries, kMaxRetries));
  EXPECT_FALSE(ShouldRetry(AttemptEnd::kFailedExit, -1, 3)) << "no attempt before the first";
}

SupervisorStatus Done(std::optional<int> exit_code) {
  SupervisorStatus s;
  s.phase = "done";
  s.exit_code = exit_code;
  return s;
}

TEST(AttemptEndOf, ReadsTheSupervisorsRecord) {
  EXPECT_EQ(AttemptEndOf(Done(0), false), AttemptEnd::kCompleted);
  EXPECT_EQ(AttemptEndOf(Done(1), false), AttemptEnd::kFailedExit);
  EXPECT_EQ(AttemptEndOf(Done(137), false), AttemptEnd::kFailedExit) << "killed by a signal";
  EXPECT_EQ(AttemptEndOf(Done(0), true), AttemptEnd::kCancelled) << "a requested cancel wins";
  EXPECT_EQ(AttemptEndOf(Done(143), true), AttemptEnd::kCancelled);
  SupervisorStatus timed_out = Done(143);
  timed_out.timed_out = true;
  EXPECT_EQ(AttemptEndOf(timed_out, false), AttemptEnd::kTimeout);
  SupervisorStatus interrupted = Done(std::nullopt);
  interrupted.interrupted = true;
  EXPECT_EQ(AttemptEndOf(interrupted, false), AttemptEnd::kCancelled);
  SupervisorStatus not_started = Done(127);
  not_started.start_failed = true;
  EXPECT_EQ(AttemptEndOf(not_started, false), AttemptEnd::kStartFailed);
  EXPECT_EQ(AttemptEndOf(Done(std::nullopt), false), AttemptEnd::kStartFailed) << "done without an exit status";
}

TEST(RetryLine, NamesTheAttemptTheRetryAndWhatWentWrong) {
  JobAttempt failed;
  failed.exit_code = 1;
  EXPECT_EQ(RetryLine(1, 3, failed), "attempt 2 of 4 (retry 1 of 3) after exit code 1");
  EXPECT_EQ(RetryLine(3, 3, failed), "attempt 4 of 4 (retry 3 of 3) after exit code 1");
  JobAttempt not_started;
  not_started.reason = "cannot open the lease directory";
  EXPECT_EQ(RetryLine(1, 1, not_started), "attempt 2 of 2 (retry 1 of 1) after cannot open the lease directory");
}

// An attempt stopped because its partition closed (ends = "requeue") is an attempt, but not a
// failure: --retry counts only failures, and the log line says what happened.
TEST(RetryLine, ARequeueIsAnAttemptButNotAFailure) {
  JobAttempt requeued;
  requeued.state = store::JobState::kCancelled;
  requeued.exit_code = 143;
  requeued.reason = "partition night closed at 08:00 (Tue) (ends = \"requeue\")";
  EXPECT_EQ(RetryLine(1, 2, requeued, 0), "attempt 2, requeued: partition night closed at 08:00 (Tue) (ends = \"requeue\")");
  JobAttempt failed;
  failed.exit_code = 1;
  store::Job job;
  job.attempts = {requeued, failed};
  EXPECT_EQ(store::FailedAttempts(job), 1);
  EXPECT_EQ(RetryLine(2, 2, failed, store::FailedAttempts(job)), "attempt 3 (retry 1 of 2) after exit code 1");
  EXPECT_TRUE(store::ShouldRetry(AttemptEnd::kFailedExit, store::FailedAttempts(job), 2)) << "one retry of two used";
  SupervisorStatus stopped = Done(143);
  stopped.partition_stopped = true;
  EXPECT_EQ(AttemptEndOf(stopped, false), AttemptEnd::kCancelled) << "ends = \"stop\": never retried";
}

TEST(Attempts, ReadBackAsWritten) {
  JobAttempt a;
  a.exit_code = 3;
  a.start_time = 10.5;
  a.end_time = 12.0;
  a.gpu_uuids = {"GPU-a", "GPU-b"};
  JobAttempt b;
  b.reason = "could not start";
  b.preempted = true;
  EXPECT_EQ(AttemptsFromJson(AttemptsToJson({a, b})), (std::vector<JobAttempt>{a, b}));
  EXPECT_TRUE(AttemptsFromJson(nlohmann::json::parse("[{\"exit_code\": \"x\"}]")).empty()) << "unreadable: none";
  EXPECT_TRUE(AttemptsFromJson(nlohmann::json()).empty());
}

TEST(Attempts, ClientsSeeEveryAttemptTheCurrentOneLast) {
  Job job;
  job.spec.retries = 3;
  JobAttempt first;
  first.exit_code = 3;
  job.attempts = {first};
  job.state = JobState::kPending;  // waiting for its retry: the current attempt has not started
  EXPECT_EQ(AllAttemptsToJson(job).size(), 1u);
  job.state = JobState::kCompleted;
  job.start_time = 20;
  job.end_time = 21;
  job.exit_code = 0;
  const nlohmann::json all = AllAttemptsToJson(job);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0]["attempt"], 0);
  EXPECT_EQ(all[0]["exit_code"], 3);
  EXPECT_EQ(all[1]["attempt"], 1);
  EXPECT_EQ(all[1]["exit_code"], 0);
  EXPECT_EQ(all[1]["state"], "completed");
  EXPECT_EQ(JobToJson(job, false)["attempt"], 1);
  EXPECT_FALSE(JobToJson(Job{}, false).contains("attempt")) << "a job never retried";
}

TEST(RetriesInTheSpec, BoundedFromZeroToAHundred) {
  JobSpec spec;
  spec.argv = {"true"};
  spec.cwd = "/";
  spec.retries = 7;
  JobSpec back;
  ASSERT_TRUE(SpecFromJson(SpecToJson(spec), &back).ok());
  EXPECT_EQ(back.retries, 7);
  nlohmann::json j = SpecToJson(spec);
  j.erase("retries");
  ASSERT_TRUE(SpecFromJson(j, &back).ok()) << "specs stored before retries";
  EXPECT_EQ(back.retries, 0);
  for (nlohmann::json bad : {nlohmann::json(-1), nlohmann::json(101), nlohmann::json(1e20), nlohmann::json(2.5),
                             nlohmann::json("3")}) {
    j["retries"] = bad;
    Status s = SpecFromJson(j, &back, SpecLimits::kSubmitted);
    ASSERT_FALSE(s.ok()) << bad.dump();
    EXPECT_NE(s.error().message.find("0 to 100"), std::string::npos) << s.error().message;
  }
  j["retries"] = 100;
  EXPECT_TRUE(SpecFromJson(j, &back).ok());
}

}  // namespace
}  // namespace gpulane::store
