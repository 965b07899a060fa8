// Reservations as they act on a live machine (issue 10, item 3), through the real binary and the
// fake NVML: pick, run and queued jobs decide on the wall clock with the leases' ends from their
// --time-limit, so
//  - a free GPU held for a job that waits behind a process outside gpulane is held at most
//    sched.max_reserve_idle, then goes to the next job (the case (a));
//  - a job whose --time-limit ends before the job ahead can start backfills onto the GPU reserved
//    for it; one without a time limit, or with a longer one, waits.
#include <gtest/gtest.h>

#include <fstream>

#include "support/daemon_fixture.h"
#include "support/harness.h"
#include "support/scenarios.h"
#include "support/text.h"

namespace gpulane::test {
namespace {

// Two H200s; GPU 1 runs another user's process outside gpulane. A queued `-g 2` job waits for it;
// GPU 0 is free and held for that job only for sched.max_reserve_idle (1 s here), after which a
// later `-g 1` job runs on it. It could not run before the bound: its start is at least 1 s after
// its submission.
TEST(Reservation, AFreeGpuHeldForAJobBehindAForeignProcessGoesToTheNextJobAfterMaxReserveIdle) {
  ForeignProcess foreign;
  if (!foreign.foreign()) GTEST_SKIP() << "pid 1 is this user's own: no other user's process to show";
  DaemonOptions options;
  options.state = RecordedH200x2(foreign.pid());
  options.config = "[sched]\nmax_reserve_idle = \"1s\"\n";
  TestDaemon d(options);
  const std::int64_t head = d.Submit({"-g", "2", "--", "true"});
  ASSERT_TRUE(Eventually([&] { return Contains(d.Queue()[0].value("reason", ""), "GPU1: in use by"); }))
      << "the -g 2 job waits for the foreign process: " << d.Queue().dump();
  const std::int64_t next = d.Submit({"-g", "1", "--", "true"});
  ASSERT_TRUE(d.WaitForState(next, "completed", 30)) << d.Queue().dump();
  const json shown = d.Show(next);
  EXPECT_EQ(shown["gpu_indices"], json::array({0})) << shown.dump();
  EXPECT_GE(shown["start_time"].get<double>() - shown["submit_time"].get<double>(), 1.0)
      << "GPU0 was held for job " << head << " for sched.max_reserve_idle first";
  const std::string head_state = d.State(head);
  EXPECT_TRUE(head_state == "pending" || head_state == "launching") << "the -g 2 job still waits for GPU1: " << head_state;
}

// `gpulane run` holds GPU 0 with --time-limit 1h; a `-g 2` run waits for it, so GPU 1 is reserved
// for it from the end of that hour. A --no-wait run with a 10-minute limit backfills onto GPU 1;
// without a time limit, or with one of 2 h, it is refused with the reason.
TEST(Reservation, ARunWhoseTimeLimitEndsBeforeTheReservationStartsBackfills) {
  FakeMachine machine(IdleGpus(2));
  Env env = machine.env();
  const std::string gate = (machine.dir() / "gate").string();
  Child holder({GpulaneBinary(), "run", "-q", "--gpus", "0", "--time-limit", "1h", "--", "sh", "-c",
                "while [ ! -e " + gate + " ]; do sleep 0.02; done"},
               env);
  ASSERT_TRUE(Eventually([&] { return RunGpulane({"pick", "--gpus", "0"}, env).exit_code == 5; }))
      << "GPU 0 is leased by the first run";
  Child head({GpulaneBinary(), "run", "-q", "-g", "2", "--", "true"}, env);
  RunResult unlimited;
  ASSERT_TRUE(Eventually([&] {
    unlimited = RunGpulane({"run", "--no-wait", "-g", "1", "--", "true"}, env);
    return unlimited.exit_code == 5;
  })) << "once the -g 2 run waits in line, GPU 1 is held for it: " << unlimited.err;
  EXPECT_TRUE(Contains(unlimited.err, "only a job with a --time-limit that ends before then may use it")) << unlimited.err;
  RunResult too_long = RunGpulane({"run", "--no-wait", "-g", "1", "--time-limit", "2h", "--", "true"}, env);
  EXPECT_EQ(too_long.exit_code, 5) << too_long.err;
  EXPECT_TRUE(Contains(too_long.err, "this job's time limit of 2h 00m ends later")) << too_long.err;
  RunResult backfill = RunGpulane({"run", "--no-wait", "-g", "1", "--time-limit", "10m", "--", "printenv", "CUDA_VISIBLE_DEVICES"}, env);
  EXPECT_EQ(backfill.exit_code, 0) << backfill.err;
  EXPECT_EQ(backfill.out, "1\n") << "it ends before the -g 2 run can start: backfilled onto GPU 1";
  std::ofstream(gate).put('x');
  ASSERT_TRUE(holder.Wait(30).has_value());
  auto ended = head.Wait(30);
  ASSERT_TRUE(ended) << "the -g 2 run starts once GPU 0 is free";
  EXPECT_EQ(ended->exit_code, 0) << ended->err;
}

}  // namespace
}  // namespace gpulane::test
