// gpulane simulate's core: the event loop on its virtual clock (sim/simulator.h), the figures
// (sim/metrics.h, hand-computed cases) and the trace readers and transformations (sim/trace.h).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "sim/metrics.h"
#include "sim/simulator.h"
#include "sim/trace.h"
#include "support/harness.h"

namespace gpulane::sim {
namespace {

using sched::PolicyKind;

Job MakeJob(double submit, double duration, unsigned gpus, std::optional<double> limit = std::nullopt, unsigned user = 0) {
  Job j;
  j.submit_s = submit;
  j.duration_s = duration;
  j.gpus = gpus;
  j.time_limit_s = limit;
  j.user = user;
  return j;
}

std::vector<Outcome> Replay(const std::vector<Job>& jobs, PolicyKind policy, unsigned gpus = 2) {
  SimOptions o;
  o.gpus = gpus;
  o.policy = policy;
  auto out = Simulate(jobs, o);
  EXPECT_TRUE(out.ok()) << (out.ok() ? "" : out.error().message);
  return out.ok() ? *out : std::vector<Outcome>(jobs.size());
}

// ---- the event loop -----------------------------------------------------------------------------

// On 2 GPUs: A holds one GPU until 100; B wants both from t=1; C and D are 1-GPU jobs behind it.
std::vector<Job> BlockedHead(std::optional<double> c_limit, std::optional<double> d_limit) {
  return {MakeJob(0, 100, 1, 100.0), MakeJob(1, 50, 2, 50.0), MakeJob(2, 40, 1, c_limit), MakeJob(3, 40, 1, d_limit)};
}

TEST(Simulate, EasyBackfillsAShortJobAndNotALongOne) {
  // C (limit 60, ends at 62) fits before B's reservation at 100; D (limit 200) does not.
  auto out = Replay(BlockedHead(60.0, 200.0), PolicyKind::kEasy);
  EXPECT_EQ(out[0].start_s, 0);
  EXPECT_EQ(out[2].start_s, 2) << "backfilled";
  EXPECT_EQ(out[2].end_s, 42);
  EXPECT_EQ(out[1].start_s, 100) << "the head starts when its reservation said";
  EXPECT_EQ(out[3].start_s, 150) << "D waits for B";
}

TEST(Simulate, FifoStartsNothingAheadAndFirstFitSkipsAhead) {
  auto fifo = Replay(BlockedHead(60.0, 200.0), PolicyKind::kFifo);
  EXPECT_EQ(fifo[1].start_s, 100);
  EXPECT_EQ(fifo[2].start_s, 150) << "C waits behind B";
  EXPECT_EQ(fifo[3].start_s, 150);
  auto ff = Replay(BlockedHead(60.0, 200.0), PolicyKind::kFirstFit);
  EXPECT_EQ(ff[2].start_s, 2) << "C skips ahead";
  EXPECT_EQ(ff[3].start_s, 42) << "D skips ahead too, when C ends";
  EXPECT_EQ(ff[1].start_s, 100) << "B gets both GPUs only once A and D are gone (A ends at 100, D at 82)";
}

// The simulator makes the daemon's launch decisions itself: sched::PlanLaunches hands at most
// daemon.max_waiting jobs to the lease line, and sched::LaunchPastCap those behind the cap that the
// line grants at once. With max_waiting 1, B waits alone in the line for both GPUs (from 100, when A
// ends); E, another 2-GPU job of the same user, waits in the daemon's queue behind it. C (limit 60)
// ends before B's start: it starts at once past the cap, ahead of E in its user's queue, and runs
// once. D (limit 200) would delay B: it waits in the queue. (Before, C waited for B's end too.)
TEST(Simulate, PastTheCapAJobStartsOnlyWhenTheLeaseLineGrantsItAtOnce) {
  SimOptions o;
  o.gpus = 2;
  o.policy = PolicyKind::kDefault;
  o.max_waiting = 1;
  const std::vector<Job> jobs = {MakeJob(0, 100, 1, 100.0), MakeJob(1, 50, 2, 50.0), MakeJob(1.5, 50, 2, 50.0),
                                 MakeJob(2, 40, 1, 60.0), MakeJob(3, 40, 1, 200.0)};
  auto out = Simulate(jobs, o);
  ASSERT_TRUE(out.ok()) << out.error().message;
  EXPECT_EQ((*out)[3].start_s, 2) << "C starts past the cap: it ends (62) before B's start (100)";
  EXPECT_EQ((*out)[3].end_s, 42) << "and runs once";
  EXPECT_EQ((*out)[1].start_s, 100) << "B is not delayed";
  EXPECT_EQ((*out)[2].start_s, 150) << "E after B";
  EXPECT_EQ((*out)[4].start_s, 200) << "D would have delayed B: it waits its turn, behind E";
}

TEST(Simulate, DefaultLetsGoOfAGpuHeldForAnUnknownStartAfterTenMinutes) {
  // A has no time limit, so B's start is unknown: default holds the free GPU for B for 600 s from
  // B's submission (the GPU has been free since 0), then C runs; easy holds it until B starts.
  const std::vector<Job> jobs = {MakeJob(0, 5000, 1), MakeJob(1, 100, 2, 100.0), MakeJob(2, 10, 1)};
  auto dflt = Replay(jobs, PolicyKind::kDefault);
  EXPECT_EQ(dflt[2].start_s, 601);
  EXPECT_EQ(dflt[1].start_s, 5000);
  auto easy = Replay(jobs, PolicyKind::kEasy);
  EXPECT_EQ(easy[2].start_s, 5100) << "after B, which started at 5000";
  SimOptions quick;
  quick.gpus = 2;
  quick.max_reserve_idle_s = 30;
  EXPECT_EQ((*Simulate(jobs, quick))[2].start_s, 31);
}

TEST(Simulate, DefaultOrdersTheLineByFairShareAndNoFairShareBySubmission) {
  // One GPU. User 0 floods four 100 s jobs at 0..3; user 1 submits one at 10. Once user 0's
  // first job has run, user 1 (no use) goes before user 0's remaining ones.
  std::vector<Job> jobs;
  for (int i = 0; i < 4; ++i) jobs.push_back(MakeJob(i, 100, 1, 100.0, 0));
  jobs.push_back(MakeJob(10, 100, 1, 100.0, 1));
  SimOptions o;
  o.gpus = 1;
  auto fair = *Simulate(jobs, o);
  EXPECT_EQ(fair[0].start_s, 0);
  EXPECT_EQ(fair[4].start_s, 100) << "user 1's job right after the running one";
  EXPECT_EQ(fair[1].start_s, 200);
  EXPECT_EQ(fair[3].start_s, 400);
  o.fair_share = false;
  auto plain = *Simulate(jobs, o);
  EXPECT_EQ(plain[4].start_s, 400) << "submission order: after all of user 0's";
  // fifo keeps submission order with fair share on (only default uses it).
  o.fair_share = true;
  o.policy = PolicyKind::kFifo;
  EXPECT_EQ((*Simulate(jobs, o))[4].start_s, 400);
}

TEST(Simulate, AFairShareReplayOfALongLineIsDeterministicAndStartsNoJobEarly) {
  // 300 jobs of 3 users on 4 GPUs, some 2-GPU, all with limits (backfill reads deep into the
  // line): the replay is deterministic and every job runs once, after its submission.
  std::vector<Job> jobs;
  for (int i = 0; i < 300; ++i)
    jobs.push_back(MakeJob(i, 50 + (i * 37) % 400, 1 + (i % 5 == 0), 600.0, static_cast<unsigned>(i % 7 == 0 ? 1 : i % 3)));
  SimOptions o;
  o.gpus = 4;
  auto a = *Simulate(jobs, o), b = *Simulate(jobs, o);
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    EXPECT_GE(a[i].start_s, jobs[i].submit_s);
    EXPECT_EQ(a[i].start_s, b[i].start_s);
  }
}

TEST(Simulate, AJobIsStoppedAtItsTimeLimit) {
  auto out = Replay({MakeJob(0, 500, 1, 100.0)}, PolicyKind::kDefault);
  EXPECT_EQ(out[0].end_s, 100);
  EXPECT_TRUE(out[0].timed_out);
}

TEST(Simulate, SharedJobsPackOntoOneGpuByDeclaredMemory) {
  Job a = MakeJob(0, 100, 1), b = MakeJob(0, 100, 1), c = MakeJob(0, 100, 1);
  a.mem_bytes = b.mem_bytes = 40ULL << 30;
  c.mem_bytes = 1ULL << 30;
  SimOptions o;
  o.gpus = 1;
  auto out = *Simulate({a, b, c}, o);
  EXPECT_EQ(out[0].start_s, 0);
  EXPECT_EQ(out[1].start_s, 0) << "40 + 40 GiB fit on an 80 GiB GPU";
  EXPECT_EQ(out[2].start_s, 100) << "the third does not";
}

TEST(Simulate, BestFitKeepsAWholeGpuFreeAndMostFreeSpreadsTheShares) {
  // 2 GPUs of 80 GiB: two 30 GiB shares (t=0 and t=1, 100 s each), then a whole-GPU job (t=2, 10 s).
  Job a = MakeJob(0, 100, 1), b = MakeJob(1, 100, 1), c = MakeJob(2, 10, 1);
  a.mem_bytes = b.mem_bytes = 30ULL << 30;
  SimOptions o;
  o.gpus = 2;
  SimStats best, spread;
  auto packed = *Simulate({a, b, c}, o, &best);
  EXPECT_EQ(packed[2].start_s, 2) << "both shares on GPU 0, GPU 1 whole";
  EXPECT_EQ(best.fragmented_s, 0);
  EXPECT_DOUBLE_EQ(best.shared_gpus_mean, 1.0) << "GPU 0 shared from 0 to 101, the whole span";
  EXPECT_DOUBLE_EQ(best.idle_gpus_mean, (2.0 + 89.0) / 101) << "GPU 1 idle but from 2 to 12";
  o.placement = Placement::kMostFree;
  auto out = *Simulate({a, b, c}, o, &spread);
  EXPECT_EQ(out[2].start_s, 100) << "one share on each GPU: the whole-GPU job waits for the first to end";
  EXPECT_DOUBLE_EQ(spread.fragmented_s, 98) << "from 2 to 100 the shares (60 GiB) would have fit on one GPU";
  EXPECT_DOUBLE_EQ(spread.shared_gpus_mean, 200.0 / 110);
  const Metrics m = ComputeMetrics({a, b, c}, out, 2, 80ULL << 30);
  EXPECT_EQ(m.whole_jobs, 1u);
  EXPECT_DOUBLE_EQ(m.whole_wait_mean_s, 98);
  EXPECT_DOUBLE_EQ(m.shared_wait_mean_s, 0);
  EXPECT_STREQ(PlacementName(Placement::kMostFree), "mostfree");
  EXPECT_EQ(ParsePlacement("bestfit"), Placement::kBestFit);
  EXPECT_FALSE(ParsePlacement("worstfit").has_value());
}

TEST(Simulate, EveryPolicyRunsEveryJobOfTheFixtureOnce) {
  auto trace = ReadTrace(test::FixturesDir() + "/simulate/small.csv", Format::kCsv, 80ULL << 30);
  ASSERT_TRUE(trace.ok()) << trace.error().message;
  TransformOptions t;
  t.machine_gpus = 4;
  ASSERT_TRUE(Transform(*trace, t).ok());
  for (PolicyKind p : {PolicyKind::kDefault, PolicyKind::kFifo, PolicyKind::kFirstFit, PolicyKind::kEasy}) {
    auto out = Replay(trace->jobs, p, 4);
    for (std::size_t i = 0; i < out.size(); ++i) {
      ASSERT_GE(out[i].start_s, trace->jobs[i].submit_s) << sched::PolicyName(p) << " job " << i;
      ASSERT_GE(out[i].end_s, out[i].start_s);
    }
    // Never more GPUs in use than the machine has: sweep starts and ends.
    std::vector<std::pair<double, double>> events;
    for (std::size_t i = 0; i < out.size(); ++i) {
      const double share = GpuShare(trace->jobs[i], 80ULL << 30);
      if (out[i].end_s > out[i].start_s) {
        events.emplace_back(out[i].start_s, share);
        events.emplace_back(out[i].end_s, -share);
      }
    }
    std::sort(events.begin(), events.end());
    double busy = 0;
    for (auto [t0, d] : events) {
      busy += d;
      ASSERT_LE(busy, 4 + 1e-9) << sched::PolicyName(p) << " at " << t0;
    }
  }
}

TEST(Simulate, AJobTooBigForTheMachineIsAnError) {
  SimOptions o;
  o.gpus = 2;
  auto out = Simulate({MakeJob(0, 1, 3)}, o);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.error().kind, ErrorKind::kInvalidArgument);
}

// ---- metrics, by hand ---------------------------------------------------------------------------

TEST(Metrics, TwoJobsOnOneGpu) {
  // Job 0: submitted 0, runs 0..10. Job 1: submitted 5, runs 10..30 (waits 5).
  const std::vector<Job> jobs = {MakeJob(0, 10, 1, std::nullopt, 0), MakeJob(5, 20, 1, std::nullopt, 1)};
  const std::vector<Outcome> out = {{0, 10, false}, {10, 30, false}};
  const Metrics m = ComputeMetrics(jobs, out, 1, 80ULL << 30);
  EXPECT_EQ(m.jobs, 2u);
  EXPECT_DOUBLE_EQ(m.wait_mean_s, 2.5);
  EXPECT_DOUBLE_EQ(m.wait_median_s, 0) << "nearest rank: the 1st of 2";
  EXPECT_DOUBLE_EQ(m.wait_p95_s, 5);
  EXPECT_DOUBLE_EQ(m.wait_p99_s, 5);
  EXPECT_DOUBLE_EQ(m.jct_mean_s, 17.5);  // 10 and 25
  EXPECT_DOUBLE_EQ(m.jct_p99_s, 25);
  EXPECT_DOUBLE_EQ(m.bsld_mean, (1.0 + 25.0 / 20.0) / 2);
  EXPECT_DOUBLE_EQ(m.makespan_s, 30);
  EXPECT_DOUBLE_EQ(m.utilisation, 1.0);
  EXPECT_EQ(m.users, 2u);
  EXPECT_NEAR(m.jain, 2.25 * 2.25 / (2 * (1 + 1.5625)), 1e-12);
  EXPECT_EQ(m.starved, 0u);
}

TEST(Metrics, BoundedSlowdownCountsShortJobsAsTenSeconds) {
  // A 1 s job that waited 9 s: (9 + 1) / max(1, 10) = 1; one that waited 29 s: 30 / 10 = 3.
  const std::vector<Job> jobs = {MakeJob(0, 1, 1), MakeJob(0, 1, 1)};
  const std::vector<Outcome> out = {{9, 10, false}, {29, 30, false}};
  EXPECT_DOUBLE_EQ(ComputeMetrics(jobs, out, 1, 80ULL << 30).bsld_mean, 2.0);
}

TEST(Metrics, UtilisationCountsSharesAsFractionsAndStarvationIsOverADay) {
  Job shared = MakeJob(0, 100, 1);
  shared.mem_bytes = 20ULL << 30;  // a quarter of an 80 GiB GPU
  const std::vector<Job> jobs = {shared, MakeJob(0, 100, 2)};
  const std::vector<Outcome> out = {{0, 100, false}, {90000, 90100, false}};
  const Metrics m = ComputeMetrics(jobs, out, 4, 80ULL << 30);
  EXPECT_DOUBLE_EQ(m.utilisation, (0.25 * 100 + 2 * 100) / (4 * 90100.0));
  EXPECT_EQ(m.starved, 1u);
}

TEST(Metrics, PercentileAndJain) {
  const std::vector<double> v = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  EXPECT_EQ(Percentile(v, 50), 5);
  EXPECT_EQ(Percentile(v, 95), 10);
  EXPECT_EQ(Percentile(v, 10), 1);
  EXPECT_EQ(Percentile({}, 50), 0);
  EXPECT_DOUBLE_EQ(JainIndex({3, 3, 3}), 1);
  EXPECT_DOUBLE_EQ(JainIndex({1, 0, 0, 0}), 0.25) << "one user gets everything: 1/n";
}

// ---- traces -------------------------------------------------------------------------------------

std::string WriteTemp(const std::string& name, const std::string& text) {
  const std::filesystem::path p = std::filesystem::path(::testing::TempDir()) / name;
  std::ofstream(p) << text;
  return p.string();
}

TEST(Trace, CsvColumnsInAnyOrderWithSizesAndEmptyLimits) {
  const std::string path = WriteTemp("t.csv",
                                     "# a comment\n"
                                     "user,gpus,submit_s,duration_s,mem_bytes,time_limit_s\n"
                                     "alice,2,10,100,0,3600\n"
                                     "bob,1,0,50,20GiB,\n");
  auto t = ReadTrace(path, Format::kCsv, 80ULL << 30);
  ASSERT_TRUE(t.ok()) << t.error().message;
  ASSERT_EQ(t->jobs.size(), 2u);
  EXPECT_EQ(t->jobs[0].submit_s, 0) << "sorted by submission";
  EXPECT_EQ(t->jobs[0].mem_bytes, 20ULL << 30);
  EXPECT_FALSE(t->jobs[0].time_limit_s.has_value());
  EXPECT_EQ(t->users[t->jobs[0].user], "bob");
  EXPECT_EQ(t->jobs[1].gpus, 2u);
  EXPECT_EQ(t->jobs[1].time_limit_s, 3600.0);
}

TEST(Trace, CsvErrorsNameTheLine) {
  auto t = ReadTrace(WriteTemp("bad.csv", "submit_s,duration_s,gpus,mem_bytes,user,time_limit_s\n0,10,zero,0,a,\n"),
                     Format::kCsv, 80ULL << 30);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.error().message.find("bad.csv:2: gpus"), std::string::npos) << t.error().message;
  t = ReadTrace(WriteTemp("hdr.csv", "submit,duration\n"), Format::kCsv, 80ULL << 30);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.error().message.find("no column 'submit_s'"), std::string::npos) << t.error().message;
}

TEST(Trace, PhillySubmissionTimesAreTheSumOfIntervals) {
  auto t = ReadTrace(WriteTemp("philly.csv",
                               "u_id,user,gpu_num,cpu_num,node_num,interval,run_time,wall_time,new_status\n"
                               "0,1,1,0,1,0,100,0,Pass\n"
                               "1,2,8,0,1,50,200,0,Failed\n"
                               "2,1,2,0,1,25,300,0,Killed\n"),
                     Format::kPhilly, 80ULL << 30);
  ASSERT_TRUE(t.ok()) << t.error().message;
  ASSERT_EQ(t->jobs.size(), 3u);
  EXPECT_EQ(t->jobs[1].submit_s, 50);
  EXPECT_EQ(t->jobs[2].submit_s, 75);
  EXPECT_EQ(t->jobs[2].duration_s, 300);
  EXPECT_EQ(t->users.size(), 2u);
  EXPECT_EQ(t->jobs[0].user, t->jobs[2].user);
}

TEST(Trace, AlibabaDropsCpuOnlyUnscheduledAndEarlyPodsAndSharesFractions) {
  auto t = ReadTrace(WriteTemp("openb.csv",
                               "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
                               "p0,1,1,1,1000,,LS,Running,0,5000,0\n"          // created before observation (first deletion 1000)
                               "p1,1,1,0,0,,LS,Running,1000,2000,1000\n"      // CPU only
                               "p2,1,1,1,500,,LS,Running,1100,1500,1110\n"    // half a GPU, runs 390 s
                               "p3,1,1,2,1000,,LS,Pending,1200,,\n"           // never scheduled
                               "p4,1,1,2,1000,,BE,Failed,1300,1000,1300\n"),  // first deletion: 1000
                     Format::kAlibaba, 80ULL << 30);
  ASSERT_TRUE(t.ok()) << t.error().message;
  ASSERT_EQ(t->jobs.size(), 2u);
  EXPECT_EQ(t->jobs[0].mem_bytes, 40ULL << 30);
  EXPECT_EQ(t->jobs[0].duration_s, 390);
  EXPECT_EQ(t->jobs[1].gpus, 2u);
  EXPECT_EQ(t->jobs[1].duration_s, 0) << "deleted before it was scheduled: no runtime";
  EXPECT_GE(t->notes.size(), 3u);
}

TEST(Trace, TransformClipsOrDropsScalesLoadAndSetsLimits) {
  Trace t;
  t.users = {"-"};
  for (int i = 0; i < 10; ++i) t.jobs.push_back(MakeJob(100 + 100.0 * i, 400, i == 3 ? 16 : 1));
  Trace dropped = t;
  TransformOptions o;
  o.machine_gpus = 4;
  o.time_limit.kind = TimeLimitFrom::kFactor;
  o.time_limit.factor = 2;
  o.load = 0.5;
  ASSERT_TRUE(Transform(t, o).ok());
  EXPECT_EQ(t.jobs.size(), 10u);
  EXPECT_EQ(t.jobs[3].gpus, 4u) << "clipped to the machine";
  EXPECT_EQ(t.jobs[0].submit_s, 0) << "time starts at the first job";
  EXPECT_NEAR(t.offered_load, 0.5, 1e-12);
  EXPECT_EQ(t.jobs[5].time_limit_s, 800.0);
  EXPECT_EQ(t.users.size(), 8u) << "no users in the trace: 8 by default";
  o.drop_oversize = true;
  o.load.reset();
  o.users = 3;
  o.limit_jobs = 5;
  ASSERT_TRUE(Transform(dropped, o).ok());
  EXPECT_EQ(dropped.jobs.size(), 5u);
  for (const Job& j : dropped.jobs) {
    EXPECT_EQ(j.gpus, 1u);
    EXPECT_LT(j.user, 3u);
  }
  // Offered load before any scaling: 9 jobs of 400 GPU-s (+ the 16-GPU one clipped) over 900 s on 4 GPUs.
}

TEST(Trace, TimeLimitFromParses) {
  EXPECT_EQ(ParseTimeLimitFrom("factor:1.5")->factor, 1.5);
  EXPECT_EQ(ParseTimeLimitFrom("none")->kind, TimeLimitFrom::kNone);
  EXPECT_FALSE(ParseTimeLimitFrom("factor:0").ok());
  EXPECT_FALSE(ParseTimeLimitFrom("twice").ok());
}

}  // namespace
}  // namespace gpulane::sim
