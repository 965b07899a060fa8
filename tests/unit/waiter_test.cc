// The lease waiter (lease/waiter.h) on a virtual clock: a fake GPU source whose answers change
// with virtual time, a real lease directory in a temporary folder, and a WaitEnv whose sleeps
// advance the clock at once, so waits of minutes take microseconds and nothing sleeps.
#include "lease/waiter.h"
#include "util/week_window.h"
#include "support/units.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>

namespace gpulane::lease {
namespace {

namespace fs = std::filesystem;

class VirtualClock : public WaitEnv {
 public:
  double MonotonicS() const override { return now_s; }
  double WallS() const override { return 1.7e9 + now_s; }
  unsigned WaitReadable(const std::vector<int>&, double timeout_s) override {
    ++sleeps;
    now_s += timeout_s > 0 ? timeout_s : 0.001;
    return 0;
  }
  double now_s = 0;
  int sleeps = 0;
};

// GPUs whose state is a function of the virtual time.
class ScriptedGpus : public GpuBackend {
 public:
  ScriptedGpus(VirtualClock& clock, std::function<GpuSnapshot(double)> at) : clock_(clock), at_(std::move(at)) {}
  Result<GpuSnapshot> Read(const ReadOptions&) override {
    ++reads;
    return at_(clock_.now_s);
  }
  using GpuBackend::Read;
  int reads = 0;

 private:
  VirtualClock& clock_;
  std::function<GpuSnapshot(double)> at_;
};

GpuSnapshot Gpus(unsigned n) {
  GpuSnapshot s;
  for (unsigned i = 0; i < n; ++i) {
    GpuDevice d;
    d.pci_index = d.nvml_index = i;
    d.uuid = "GPU-" + std::to_string(i) + "0000000-0000-0000-0000-000000000000";
    d.pci_bus_id = "00000000:0" + std::to_string(i) + ":00.0";
    d.memory_total_bytes = 80 * kGiB;
    d.memory_free_bytes = 80 * kGiB;
    d.utilization_gpu_pct = 0;
    d.processes = std::vector<GpuProcess>{};
    s.devices.push_back(d);
  }
  return s;
}

// pid 1 runs on `gpu`: a live process outside gpulane (init, which exists in every PID namespace).
GpuSnapshot WithForeign(GpuSnapshot s, unsigned gpu) {
  GpuProcess p;
  p.pid = 1;
  p.used_memory_bytes = 1 * kGiB;
  s.devices[gpu].processes->push_back(p);
  return s;
}

// A pid above the kernel's largest pid_max (2^22): never in the real /proc.
constexpr std::uint32_t kNeverRealPid = 4194305;

// A process table (os::Env's) that saw one GPU process when the snapshot was annotated (Lookup)
// and sees it ended since (no Links): a process that exits between the two looks, whose memory the
// driver frees a moment later (lease/occupancy.cc Classify).
class EndedProcessTable final : public ProcessTable {
 public:
  std::optional<ProcessInfo> Lookup(std::uint32_t pid) override {
    if (pid != kNeverRealPid) return std::nullopt;
    return ProcessInfo{1000, "alice", "python", "python train.py"};
  }
  std::optional<ProcessLinks> Links(std::uint32_t) override { return std::nullopt; }
  bool UnseenPidsMayBeOurs() override { return false; }
};

class WaiterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpulane-waiter-XXXXXX";
    root_ = mkdtemp(tmpl);
    auto dir = LeaseDir::Open((root_ / "leases").string(), real_clock_);
    ASSERT_TRUE(dir.ok()) << dir.error().message;
    dir_.emplace(std::move(dir).value());
  }
  void TearDown() override {
    dir_.reset();
    fs::remove_all(root_);
  }
  WaitRequest Request(unsigned count) {
    WaitRequest w;
    w.request.count = count;
    w.quiet = true;
    w.nvml_poll_s = 1;
    w.margin_bytes = 0;
    return w;
  }
  Result<Grant> Acquire(GpuBackend& gpus, WaitRequest w, const std::string& job_id = "r1") {
    LeaseWaiter waiter(gpus, *dir_, std::move(w), job_id, "test", {}, clock_, processes_);
    return waiter.Acquire();
  }
  fs::path root_;
  std::optional<LeaseDir> dir_;
  VirtualClock clock_;
  const SystemClock real_clock_;   ///< the lease directory's: tickets dated as the kernel dates their files
  ProcfsProcessTable processes_;  ///< the real /proc (pid 1 is a live process outside gpulane)
};

// The waiter looks GPU processes up in the process table it is given (issue 25 item 3), never in
// a /proc of its own: the table says this GPU's one process has just ended, so the GPU is free
// now. Read from the real /proc instead, the same pid shows nowhere and counts as a process of
// another PID namespace on the GPU: --no-wait would be refused.
TEST_F(WaiterTest, GpuProcessesAreLookedUpInTheProcessTableItIsGivenNotTheRealProc) {
  ScriptedGpus gpus(clock_, [](double) {
    GpuSnapshot s = Gpus(1);
    GpuProcess p;
    p.pid = kNeverRealPid;
    p.used_memory_bytes = 79 * kGiB;
    s.devices[0].memory_free_bytes = 1 * kGiB;
    s.devices[0].processes->push_back(p);
    return s;
  });
  WaitRequest w = Request(1);
  w.no_wait = true;
  EndedProcessTable table;
  LeaseWaiter waiter(gpus, *dir_, std::move(w), "r1", "test", {}, clock_, table);
  auto r = waiter.Acquire();
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->gpus, std::vector<unsigned>{0});
}

TEST_F(WaiterTest, GivesUpAfterItsTimeoutOnTheVirtualClockRereadingTheGpusEverySecond) {
  ScriptedGpus gpus(clock_, [](double) { return WithForeign(Gpus(1), 0); });
  WaitRequest w = Request(1);
  w.timeout_s = 30 * 60;
  auto r = Acquire(gpus, w);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ErrorKind::kTimeout);
  EXPECT_NE(r.error().message.find("gave up after 30m 00s (--timeout): GPU0: in use by"), std::string::npos)
      << r.error().message;
  EXPECT_GE(clock_.now_s, 30 * 60);
  EXPECT_LT(clock_.now_s, 30 * 60 + 1.5);
  EXPECT_NEAR(gpus.reads, 30 * 60 + 1, 2) << "one read to start, then one per nvml_poll_s";
}

TEST_F(WaiterTest, TakesTheGpuAtTheFirstRereadAfterTheForeignProcessLeft) {
  ScriptedGpus gpus(clock_, [](double t) { return t < 5.5 ? WithForeign(Gpus(1), 0) : Gpus(1); });
  auto r = Acquire(gpus, Request(1));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->gpus, std::vector<unsigned>{0});
  EXPECT_GE(r->waited_s, 5.5);
  EXPECT_LT(r->waited_s, 6.5) << "the next one-second re-read sees it free";
  EXPECT_TRUE(r->lease.held());
}

// A request stopped (Ctrl-Z) or a machine asleep while the waiter reads the GPUs, not in its
// sleep, is just as late for a grant the line gave it: it is told so, once, at its next look. The
// second read (at 1 s: the first re-read) takes 40 s of the virtual clock; the GPU frees at 5 s.
TEST_F(WaiterTest, AStopOutsideTheSleepIsToldAsLateAsOneInIt) {
  int reads = 0;
  ScriptedGpus gpus(clock_, [&](double t) {
    if (++reads == 2) clock_.now_s += 40;
    return t < 5 ? WithForeign(Gpus(1), 0) : Gpus(1);
  });
  WaitRequest w = Request(1);
  w.quiet = false;
  w.max_unclaimed_s = 30;
  testing::internal::CaptureStderr();
  auto r = Acquire(gpus, w);
  const std::string err = testing::internal::GetCapturedStderr();
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_NE(err.find("gpulane: warning: this request did not run for 40 s while it waited in line"), std::string::npos) << err;
  EXPECT_EQ(err.find("warning", err.find("warning") + 1), std::string::npos) << "said once: " << err;
}

TEST_F(WaiterTest, NoWaitAnswersAtOnceWithThePolicysReason) {
  ScriptedGpus gpus(clock_, [](double) { return WithForeign(Gpus(2), 0); });
  WaitRequest w = Request(2);
  w.no_wait = true;
  auto r = Acquire(gpus, w);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ErrorKind::kNotEnoughGpus);
  EXPECT_EQ(r.error().message.rfind("too few GPUs free now: 1 of 2 requested GPUs qualify (GPU0: in use by", 0), 0u)
      << r.error().message;
  EXPECT_EQ(clock_.sleeps, 0) << "it never waited";
}

TEST_F(WaiterTest, AnImpossibleRequestFailsAtTheFirstLookAsABadRequest) {
  ScriptedGpus gpus(clock_, [](double) { return Gpus(2); });
  auto r = Acquire(gpus, Request(3));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ErrorKind::kInvalidArgument);
  EXPECT_EQ(r.error().message, "asked for 3 GPUs but only 2 of the 2 GPUs here can ever qualify: ask for fewer");
}

// A lease this process holds for job 7 on GPU 0, as `gpulane run` holds one for its job.
HeldFile ParentLease(const LeaseDir& dir) {
  LeaseRecord parent;
  parent.job_id = "7";
  parent.pid = getpid();
  parent.gpus = {{"GPU-00000000-0000-0000-0000-000000000000", std::nullopt}};
  auto held = dir.CreateLease(parent);
  EXPECT_TRUE(held.ok());
  return std::move(held).value();
}

TEST_F(WaiterTest, ARequestNestedInAJobRunsOnThatJobsGpuAtOnce) {
  HeldFile parent = ParentLease(*dir_);
  ScriptedGpus gpus(clock_, [](double) { return Gpus(2); });
  WaitRequest nested = Request(1);
  nested.parent_job_id = "7";
  auto r = Acquire(gpus, nested, "r2");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->gpus, std::vector<unsigned>{0}) << "inside job 7: its GPU, although job 7 leases it exclusively";
  EXPECT_EQ(clock_.sleeps, 0);

  // The same request from outside job 7 does not get GPU 0.
  auto outside = Acquire(gpus, Request(1), "r3");
  ASSERT_TRUE(outside.ok()) << outside.error().message;
  EXPECT_EQ(outside->gpus, std::vector<unsigned>{1});
}

TEST_F(WaiterTest, ANestedRequestForMoreGpusThanItsJobHasCanNeverBeMet) {
  HeldFile parent = ParentLease(*dir_);
  ScriptedGpus gpus(clock_, [](double) { return Gpus(2); });
  WaitRequest nested = Request(2);
  nested.parent_job_id = "7";
  auto r = Acquire(gpus, nested, "r2");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ErrorKind::kInvalidArgument);
  EXPECT_NE(r.error().message.find("only 1 of the 2 GPUs here can ever qualify"), std::string::npos) << r.error().message;
}

TEST_F(WaiterTest, AJobIdThatIsNotAnAncestorsLeaseDoesNotNestTheRequest) {
  // A lease of job 7 held by another process (pid 1 is no ancestor of this one... it is of every
  // process: use a pid that does not exist instead).
  LeaseRecord other;
  other.job_id = "7";
  other.pid = 4194301;
  other.gpus = {{"GPU-00000000-0000-0000-0000-000000000000", std::nullopt}};
  auto held = dir_->CreateLease(other);
  ASSERT_TRUE(held.ok());
  ScriptedGpus gpus(clock_, [](double) { return Gpus(1); });
  WaitRequest claimed = Request(1);
  claimed.parent_job_id = "7";
  claimed.no_wait = true;
  auto r = Acquire(gpus, claimed, "r2");
  ASSERT_FALSE(r.ok()) << "GPULANE_JOB_ID alone does not open another job's GPUs";
  EXPECT_NE(r.error().message.find("GPU0: leased by"), std::string::npos) << r.error().message;
}

// Issue 10 (a): a queued -g 2 job waiting for a GPU held by a process outside gpulane reserved the
// other, idle GPU for as long as that process lived. Its start is unknown, so the free GPU is held
// for it at most max_reserve_idle (10 min), counted from when the waiter saw it free; then a later
// job gets it, and the head job's decision says so.
TEST_F(WaiterTest, AFreeGpuHeldForAJobBehindAForeignProcessGoesToTheNextJobAfterMaxReserveIdle) {
  ScriptedGpus gpus(clock_, [](double) { return WithForeign(Gpus(2), 0); });
  WaitRequest head = Request(2);
  head.request.submit_time_s = clock_.WallS();
  LeaseWaiter head_waiter(gpus, *dir_, head, "r1", "head", {}, clock_, processes_);
  ASSERT_TRUE(head_waiter.JoinLine().ok());

  WaitRequest later = Request(1);
  later.request.submit_time_s = clock_.WallS();
  later.no_wait = true;
  auto refused = Acquire(gpus, later, "r2");
  ASSERT_FALSE(refused.ok()) << "at first GPU1 is held for the job ahead";
  EXPECT_NE(refused.error().message.find("GPU1: held for an earlier request"), std::string::npos) << refused.error().message;

  later.no_wait = false;
  later.timeout_s = 3600;  // a regression (held forever) fails with kTimeout instead of hanging
  const double before = clock_.now_s;
  auto r = Acquire(gpus, later, "r3");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->gpus, std::vector<unsigned>{1});
  EXPECT_GE(clock_.now_s - before, sched::kDefaultMaxReserveIdleS) << "not before the hold's bound";
  EXPECT_LT(clock_.now_s - before, sched::kDefaultMaxReserveIdleS + 1.5) << "the waiter woke at the bound, not at the next minute";
}

TEST_F(WaiterTest, MaxReserveIdleComesFromTheRequestAndPolicyEasyHoldsForever) {
  ScriptedGpus gpus(clock_, [](double) { return WithForeign(Gpus(2), 0); });
  WaitRequest head = Request(2);
  LeaseWaiter head_waiter(gpus, *dir_, head, "r1", "head", {}, clock_, processes_);
  ASSERT_TRUE(head_waiter.JoinLine().ok());
  WaitRequest later = Request(1);
  later.max_reserve_idle_s = 30;
  later.timeout_s = 3600;
  auto r = Acquire(gpus, later, "r2");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_GE(r->waited_s, 30);
  EXPECT_LT(r->waited_s, 31.5);

  WaitRequest easy = Request(1);
  easy.policy = sched::PolicyKind::kEasy;
  easy.max_reserve_idle_s = 30;
  easy.timeout_s = 3600;
  r->lease.Release();
  auto held = Acquire(gpus, easy, "r3");
  ASSERT_FALSE(held.ok()) << "easy holds the first waiter's GPUs for as long as its start is unknown";
  EXPECT_EQ(held.error().kind, ErrorKind::kTimeout);
}

// Backfill, live: a GPU reserved for the job ahead goes to a later job whose --time-limit ends
// before that job can start (when the lease it waits for ends, from that lease's time limit); a
// job whose limit ends later, or that has none, waits.
TEST_F(WaiterTest, AJobWhoseTimeLimitEndsBeforeTheReservationStartsBackfillsOntoTheReservedGpu) {
  ScriptedGpus gpus(clock_, [](double) { return Gpus(2); });
  WaitRequest first = Request(1);
  first.request.time_limit_s = 100;
  first.request.gpu_list = {"0"};
  auto running = Acquire(gpus, first, "r1");
  ASSERT_TRUE(running.ok()) << running.error().message;
  ASSERT_EQ(running->gpus, std::vector<unsigned>{0});

  LeaseWaiter head_waiter(gpus, *dir_, Request(2), "r2", "head", {}, clock_, processes_);
  ASSERT_TRUE(head_waiter.JoinLine().ok());

  WaitRequest too_long = Request(1);
  too_long.no_wait = true;
  too_long.request.time_limit_s = 200;
  auto refused = Acquire(gpus, too_long, "r3");
  ASSERT_FALSE(refused.ok()) << "its 200 s would end after the head job's start in 100 s";
  EXPECT_NE(refused.error().message.find("this job's time limit of 3m 20s ends later"), std::string::npos)
      << refused.error().message;
  WaitRequest unlimited = Request(1);
  unlimited.no_wait = true;
  auto refused_too = Acquire(gpus, unlimited, "r4");
  ASSERT_FALSE(refused_too.ok());
  EXPECT_NE(refused_too.error().message.find("only a job with a --time-limit that ends before then may use it"),
            std::string::npos)
      << refused_too.error().message;

  WaitRequest short_job = Request(1);
  short_job.no_wait = true;
  short_job.request.time_limit_s = 50;
  auto backfilled = Acquire(gpus, short_job, "r5");
  ASSERT_TRUE(backfilled.ok()) << backfilled.error().message;
  EXPECT_EQ(backfilled->gpus, std::vector<unsigned>{1});
}

// A partition whose window opens `opens_in_s` after the virtual clock's start (local time, whole
// minutes) and stays open an hour.
PartitionConfig WindowFromNow(double wall_s, double opens_in_s, std::vector<std::string> gpus) {
  const double at = LocalWeekSeconds(static_cast<std::time_t>(wall_s + opens_in_s));
  const unsigned minute = static_cast<unsigned>(at / 60), day = minute / kMinutesPerDay, start = minute % kMinutesPerDay;
  const unsigned end = (start + 60) % kMinutesPerDay;
  auto clock = [](unsigned m) {
    char text[8];
    std::snprintf(text, sizeof text, "%02u:%02u", m / 60, m % 60);
    return std::string(text);
  };
  PartitionConfig p;
  p.name = "day";
  p.gpus = std::move(gpus);
  auto w = ParseWeekWindow(std::string(DayName(day)) + " " + clock(start) + "-" + clock(end));
  EXPECT_TRUE(w) << w.error().message;
  p.windows.push_back(*w);
  return p;
}

TEST_F(WaiterTest, AClosedPartitionWaitsOutsideTheLineUntilItsWindowOpens) {
  ScriptedGpus gpus(clock_, [](double) { return Gpus(2); });
  WaitRequest w = Request(1);
  w.request.partition = "day";
  w.partitions = {WindowFromNow(clock_.WallS(), 2 * 3600, {"1"})};
  auto r = Acquire(gpus, w);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->gpus, std::vector<unsigned>{1}) << "only the partition's GPU, though GPU0 is free too";
  EXPECT_GE(r->waited_s, 2 * 3600 - 60) << "not before the window (whole minutes) opened";
  EXPECT_LT(r->waited_s, 2 * 3600 + 2);
  EXPECT_LT(clock_.sleeps, 10) << "it slept until the opening, not polling";
  EXPECT_EQ(gpus.reads, 1) << "nor reading the GPUs while closed";
}

TEST_F(WaiterTest, NoWaitInAClosedPartitionFailsWithWhenItOpens) {
  ScriptedGpus gpus(clock_, [](double) { return Gpus(2); });
  WaitRequest w = Request(1);
  w.no_wait = true;
  w.request.partition = "day";
  w.partitions = {WindowFromNow(clock_.WallS(), 3 * 3600, {"0", "1"})};
  auto r = Acquire(gpus, w);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ErrorKind::kNotEnoughGpus);
  EXPECT_EQ(r.error().message.rfind("partition day is closed until ", 0), 0u) << r.error().message;
  EXPECT_EQ(clock_.sleeps, 0);
  // Once it is open, the same request gets a GPU at once.
  clock_.now_s += 3 * 3600 + 60;
  auto open = Acquire(gpus, w, "r2");
  ASSERT_TRUE(open.ok()) << open.error().message;
}

TEST_F(WaiterTest, APartitionMissingFromTheConfigIsABadRequest) {
  ScriptedGpus gpus(clock_, [](double) { return Gpus(1); });
  WaitRequest w = Request(1);
  w.request.partition = "gone";
  auto r = Acquire(gpus, w);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ErrorKind::kInvalidArgument);
}

// A lease directory that changes every 100 us (a user rewriting a junk file there in a loop): the
// inotify descriptor is readable whenever the waiter asks. Records, per wait, whether it was for a
// change (the watch descriptor in the set) or the pause between two looks (no watch descriptor).
class ChangingDir : public VirtualClock {
 public:
  unsigned WaitReadable(const std::vector<int>& fds, double timeout_s) override {
    if (!fds.empty() && fds[0] >= 0) {
      now_s += std::min(timeout_s, 0.0001);
      waits.push_back('c');
      return 1u;
    }
    now_s += timeout_s;
    waits.push_back('p');
    return 0;
  }
  std::string waits;
};

TEST_F(WaiterTest, ALeaseDirectoryThatChangesNonStopIsLookedAtAtMostFiftyTimesASecondAfterABurstOfTen) {
  ChangingDir clock;
  ScriptedGpus gpus(clock, [](double) { return WithForeign(Gpus(1), 0); });
  WaitRequest w = Request(1);
  w.timeout_s = 2;
  LeaseWaiter waiter(gpus, *dir_, std::move(w), "r1", "test", {}, clock, processes_);
  auto r = waiter.Acquire();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ErrorKind::kTimeout);
  const auto looks = std::count(clock.waits.begin(), clock.waits.end(), 'c');
  // Unbounded, it looked 20,000 times in these 2 s (one look per change).
  EXPECT_LE(looks, 10 + 2 * 50 + 2) << clock.waits.substr(0, 200);
  EXPECT_GE(looks, 10 + 2 * 50 - 10) << "the changes are still looked at, fifty times a second";
  EXPECT_EQ(clock.waits.substr(0, 11), std::string(11, 'c')) << "the first ten changes are looked at at once";
  EXPECT_EQ(clock.waits[11], 'p');
}

}  // namespace
}  // namespace gpulane::lease
