// exec::RunJob reads the time only from the clock it is given (os::Env's, issue 25 item 3): a
// job's time limit is counted on that clock. Here a clock that races ahead ends a job under its
// one-hour limit within a second of real time; had RunJob read the system's clock itself, the job
// (five seconds of sleep) would end on its own, never timed out.
#include <gtest/gtest.h>

#include "exec/job_runner.h"
#include "os/env.h"
#include "support/fixed_gpus.h"
#include "support/recording_spawner.h"
#include "util/clock.h"

namespace gpulane::exec {
namespace {

// A clock that moves on `step_s` seconds each time it is read: time passes as fast as one looks.
class RacingClock final : public Clock {
 public:
  explicit RacingClock(double step_s) : step_s_(step_s) {}
  double WallS() const override { return 1.7e9 + Next(); }
  double MonotonicS() const override { return Next(); }

 private:
  double Next() const { return now_s_ += step_s_; }
  double step_s_;
  mutable double now_s_ = 1000;
};

TEST(JobRunnerClock, AJobsTimeLimitIsCountedOnTheClockItIsGivenNotTheSystems) {
  JobSpec spec;
  spec.argv = {"/bin/sleep", "5"};
  spec.env = {"PATH=/usr/bin:/bin"};
  spec.time_limit_s = 3600;
  spec.kill_grace_s = 1;
  const RacingClock clock(3000);  // fifty minutes a look: the hour is up at the second look
  ProcfsProcessTable processes;
  os::SystemSpawner spawner;
  test::NoGpus gpus;
  os::SystemFileSystem files;
  auto ran = RunJob(spec, os::Env{clock, processes, spawner, gpus, files}, {});
  ASSERT_TRUE(ran.ok()) << ran.error().message;
  EXPECT_TRUE(ran->timed_out) << "the job ended on its own: RunJob did not time it on the clock it was given";
  EXPECT_FALSE(ran->exec_failed);
}

// The job is started by the spawner of the Env RunJob is given (os/spawn.h), never by a fork of its
// own: one that starts nothing leaves no job and says why.
TEST(JobRunnerSpawner, TheJobIsStartedThroughTheEnvsSpawnerNotAForkOfItsOwn) {
  JobSpec spec;
  spec.argv = {"/bin/true"};
  spec.env = {"PATH=/usr/bin:/bin"};
  const SystemClock clock;
  ProcfsProcessTable processes;
  test::RecordingSpawner spawner;
  test::NoGpus gpus;
  os::SystemFileSystem files;
  auto ran = RunJob(spec, os::Env{clock, processes, spawner, gpus, files}, {});
  EXPECT_EQ(spawner.starts, 1);
  ASSERT_FALSE(ran.ok()) << "the job ran: RunJob started it by itself";
  EXPECT_EQ(ran.error().message, "cannot fork: not in this test (RecordingSpawner)");
}

}  // namespace
}  // namespace gpulane::exec
