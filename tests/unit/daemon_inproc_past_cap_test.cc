// Past daemon.max_waiting, in-process (tests/support/inproc_daemon.h; sched/launch_past_cap.h):
// a small job the cap keeps in the daemon's queue starts at once on an idle GPU when the lease
// line's rules would grant it there (backfill before the head's start), and stays queued when it
// would delay the job waiting at the head of the line. The line is what the lease directory holds:
// a `gpulane run` lease and the head's ticket, planted as their holders would leave them.
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>

#include "lease/lease_dir.h"
#include "lease/records.h"
#include "support/inproc_daemon.h"

namespace gpulane::test {
namespace {

using Ids = std::vector<std::int64_t>;

class DaemonInProcPastCap : public InProcDaemonTest {
 protected:
  lease::LeaseDir Dir() {
    auto dir = lease::LeaseDir::Open(lease::LeaseDir::DefaultPath(config_.lease_dir), clock_);
    EXPECT_TRUE(dir.ok());
    return std::move(dir).value();
  }
  // A `gpulane run` of this process on GPU0, stopped at its time limit an hour from now.
  lease::HeldFile RunOnGpu0For1h(const lease::LeaseDir& dir) {
    lease::LeaseRecord run;
    run.job_id = "r" + std::to_string(getpid());
    run.pid = getpid();
    run.gpus = {{gpus_.Current().devices[0].uuid, std::nullopt}};
    run.started_s = clock_.WallS();
    run.time_limit_s = 3600;
    auto held = dir.CreateLease(run);
    EXPECT_TRUE(held.ok());
    return std::move(held).value();
  }
  // Job `id`'s ticket for `count` GPUs, as its supervisor takes its place in line.
  lease::HeldFile TicketOf(const lease::LeaseDir& dir, std::int64_t id, unsigned count) {
    lease::TicketRecord t;
    t.pid = getpid();
    t.request.count = count;
    t.request.uid = 0;
    t.request.user = "root";
    t.job_text = std::to_string(id);
    lease::DirLock lock = dir.Lock();
    auto held = dir.CreateTicket(t);
    EXPECT_TRUE(held.ok());
    return std::move(held).value();
  }
};

// Two GPUs; GPU0 runs a job for another hour. With max_waiting = 1, the head (both GPUs) waits in
// the line for that hour, holding GPU1. Behind it in the queue, past the cap: a 2-GPU job, a
// 1-GPU job without a time limit, and a 1-GPU job of 10 minutes. Only the last starts, on GPU1:
// it ends before the head's start. The one without a time limit would delay the head: queued.
TEST_F(DaemonInProcPastCap, ASmallJobStartsOnTheIdleGpuOnlyWhenItDelaysNotTheHead) {
  gpu_count_ = 2;
  config_.max_waiting_supervisors = 1;
  StartDaemon();
  const lease::LeaseDir dir = Dir();
  lease::HeldFile run = RunOnGpu0For1h(dir);
  const std::int64_t head = SubmitOne({.gpus = 2});
  ASSERT_EQ(Launched(), Ids{head});
  lease::HeldFile head_ticket = TicketOf(dir, head, 2);
  Waiting(head, "in line for GPU0, GPU1 (#1)");
  Turn();
  const std::int64_t big = SubmitOne({.gpus = 2});
  const std::int64_t endless = SubmitOne({.gpus = 1});
  const std::int64_t short_job = SubmitOne({.gpus = 1, .time_limit_s = 600.0});
  Turn();
  EXPECT_EQ(State(short_job), "launching") << "starts on GPU1 past the cap: it ends before the head's start";
  EXPECT_EQ(Launched(), (Ids{head, short_job}));
  EXPECT_EQ(State(endless), "pending") << "without a time limit it would keep GPU1 from the head";
  EXPECT_EQ(State(big), "pending");
}

// The same line without the head's ticket: a job handed to a supervisor that has not joined the
// line yet is counted in it all the same, so nothing starts on the GPU it will hold for itself.
TEST_F(DaemonInProcPastCap, AHeadNotInTheLineYetIsCountedAllTheSame) {
  gpu_count_ = 2;
  config_.max_waiting_supervisors = 1;
  StartDaemon();
  const lease::LeaseDir dir = Dir();
  lease::HeldFile run = RunOnGpu0For1h(dir);
  const std::int64_t head = SubmitOne({.gpus = 2});
  const std::int64_t endless = SubmitOne({.gpus = 1});
  const std::int64_t short_job = SubmitOne({.gpus = 1, .time_limit_s = 600.0});
  Turn();
  EXPECT_EQ(Launched(), (Ids{head, short_job}));
  EXPECT_EQ(State(endless), "pending");
}

}  // namespace
}  // namespace gpulane::test
