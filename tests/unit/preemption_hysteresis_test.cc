// Preemption's hysteresis (sched/preemption.h; issue 23, item 5: with preemptible jobs of one user
// ahead in the fair-share line, each GPU a preemption freed was taken back by a requeued
// preemptible job, and the jobs that are not preemptible never started).
#include "sched/preemption.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "sched/launch.h"
#include "sched/policy.h"
#include "support/idle_gpus.h"
#include "support/units.h"
#include "support/decisions.h"

namespace gpulane::sched {
namespace {

using test::IdleGpus;

void HeldBy(GpuState& g, const std::string& who, bool preemptible) {
  g.exclusive_holder = who;
  g.has_context = true;
  if (preemptible) g.preemptible_holder = who;
}

Request Normal(unsigned count = 1) {
  Request r;
  r.user = "bob";
  r.count = count;
  return r;
}

Request Preemptible(unsigned preemptions) {
  Request r;
  r.user = "alice";
  r.preemptible = Preemptible::kRequeue;
  r.preemptions = preemptions;
  return r;
}

// The livelock's moment: a preemption freed GPU0, the requeued preemptible job is first in line
// (fair share), the job that preempted it second. The GPU goes to the latter.
TEST(PreemptionHysteresis, ARequeuedPreemptibleJobAheadInLineLeavesTheFreedGpuToTheJobThatIsNot) {
  std::vector<GpuState> gpus = IdleGpus(2);
  HeldBy(gpus[1], "carol (job 9)", false);
  const std::vector<Decision> d = Schedule(gpus, {Preemptible(1), Normal()}, Limits{});
  ASSERT_EQ(d.size(), 2u);
  EXPECT_FALSE(d[0].granted) << "the preemptible job would be preempted again at once";
  EXPECT_NE(ReasonsOf(d[0]).find("GPU0: wanted by bob's job waiting in line, which is not preemptible"), std::string::npos)
      << ReasonsOf(d[0]);
  ASSERT_TRUE(d[1].granted);
  EXPECT_EQ(d[1].gpus, std::vector<unsigned>{0});
}

TEST(PreemptionHysteresis, AFirstTimePreemptibleJobAheadLeavesItToo) {
  std::vector<GpuState> gpus = IdleGpus(1);
  const std::vector<Decision> d = Schedule(gpus, {Preemptible(0), Normal()}, Limits{});
  EXPECT_FALSE(d[0].granted);
  EXPECT_TRUE(d[1].granted);
}

TEST(PreemptionHysteresis, APreemptibleJobStillTakesAGpuNobodyElseWantsNow) {
  std::vector<GpuState> gpus = IdleGpus(2);
  const std::vector<Decision> d = Schedule(gpus, {Preemptible(2), Normal()}, Limits{});
  ASSERT_TRUE(d[0].granted);
  ASSERT_TRUE(d[1].granted);
  EXPECT_NE(d[0].gpus, d[1].gpus);
}

TEST(PreemptionHysteresis, AGpuAWaiterWouldPreemptForIsNotTakenByAPreemptibleJobAheadOfIt) {
  // Bob needs both GPUs: GPU0 is free, GPU1's preemptible job is giving way. GPU0 stays his.
  std::vector<GpuState> gpus = IdleGpus(2);
  HeldBy(gpus[1], "alice (job 3)", true);
  const std::vector<Decision> d = Schedule(gpus, {Preemptible(1), Normal(2)}, Limits{});
  EXPECT_FALSE(d[0].granted) << ReasonsOf(d[0]);
  EXPECT_EQ(d[1].preempt, std::vector<unsigned>{1});
}

TEST(PreemptionHysteresis, OnlyAJobThatGaveWayBeforeLeavesGpusReservedForAWaitingJobAlone) {
  // Bob waits for both GPUs (GPU1 runs carol's job that is not preemptible): GPU0 is reserved for
  // him. A first-time preemptible job may use it until he can start; one preempted before may not.
  std::vector<GpuState> gpus = IdleGpus(2);
  HeldBy(gpus[1], "carol (job 9)", false);
  const std::vector<Decision> fresh = Schedule(gpus, {Normal(2), Preemptible(0)}, Limits{});
  EXPECT_TRUE(fresh[1].granted) << ReasonsOf(fresh[1]);
  const std::vector<Decision> again = Schedule(gpus, {Normal(2), Preemptible(1)}, Limits{});
  EXPECT_FALSE(again[1].granted);
  EXPECT_NE(ReasonsOf(again[1]).find("GPU0: held for an earlier request, 1st in line"), std::string::npos) << ReasonsOf(again[1]);
}

TEST(PreemptionHysteresis, GivesWayUntilTheBoundPerJob) {
  Request r = Preemptible(0);
  EXPECT_TRUE(GivesWay(r, 3));
  r.preemptions = 2;
  EXPECT_TRUE(GivesWay(r, 3));
  r.preemptions = 3;
  EXPECT_FALSE(GivesWay(r, 3)) << "preempted sched.max_preemptions_per_job times: runs to its end";
  EXPECT_FALSE(GivesWay(Preemptible(0), 0)) << "0: preemptible jobs are never preempted";
  EXPECT_FALSE(GivesWay(Normal(), 3));
}

TEST(PreemptionHysteresis, PlanLaunchesKeepsAJobThatGaveWayOutWhileAJobThatIsNotPreemptibleWaitsForTheCap) {
  auto none = [](const JobRef&) { return DependencyState::kCompleted; };
  std::vector<QueuedJob> queue(3);
  queue[0] = {1, 0, false, {}, {}, 0.9, true};  // preemptible, first in line by fair share
  queue[0].preemptions = 1;
  queue[1] = {2, 0, false, {}, {}, 0.1, false};
  queue[2] = {3, 0, false, {}, {}, 0.1, false};
  LaunchLimits limits;
  limits.max_waiting = 1;
  LaunchPlan plan = PlanLaunches(queue, none, limits);
  EXPECT_EQ(plan.launch, std::vector<std::int64_t>{2}) << "job 3 waits for the cap, so job 1 does not join the line";
  ASSERT_EQ(plan.blocked.size(), 1u);
  EXPECT_EQ(plan.blocked[0].id, 1);
  EXPECT_NE(plan.blocked[0].reason.find("gave way to another job before"), std::string::npos);
  // With room for every job that is not preemptible, it joins the line (and leaves them their GPUs there).
  limits.max_waiting = 2;
  plan = PlanLaunches(queue, none, limits);
  EXPECT_EQ(plan.launch, (std::vector<std::int64_t>{1, 2, 3}));
  // A first-time preemptible job has its own cap, as before.
  queue[0].preemptions = 0;
  limits.max_waiting = 1;
  plan = PlanLaunches(queue, none, limits);
  EXPECT_EQ(plan.launch, (std::vector<std::int64_t>{1, 2}));
}

TEST(PreemptionHysteresis, PlanLaunchesStartsNoPreemptibleJobWhileTheMachineWasPreemptedMaxPerMinuteTimes) {
  auto none = [](const JobRef&) { return DependencyState::kCompleted; };
  std::vector<QueuedJob> queue(2);
  queue[0] = {1, 0, false, {}, {}, 0.5, true};
  queue[1] = {2, 0, false, {}, {}, 0.1, false};
  LaunchLimits limits;
  limits.max_preemptions_per_minute = 4;
  limits.preemptions_last_minute = 4;
  LaunchPlan plan = PlanLaunches(queue, none, limits);
  EXPECT_EQ(plan.launch, std::vector<std::int64_t>{2}) << "jobs that are not preemptible start as ever";
  ASSERT_EQ(plan.blocked.size(), 1u);
  EXPECT_EQ(plan.blocked[0].reason,
            "4 preemptions in the last minute, sched.max_preemptions_per_minute allows 4: preemptible jobs start again once fewer");
  limits.preemptions_last_minute = 3;
  EXPECT_EQ(PlanLaunches(queue, none, limits).launch, (std::vector<std::int64_t>{1, 2}));
  limits.max_preemptions_per_minute = 0;  // no bound
  limits.preemptions_last_minute = 100;
  EXPECT_EQ(PlanLaunches(queue, none, limits).launch, (std::vector<std::int64_t>{1, 2}));
}

// ---- The property: bounded waits with any number of preemptible jobs ahead ------------------------
//
// A virtual machine of 1-4 GPUs on a virtual clock, every decision sched::Schedule's, as each
// waiter and each preemptible job's holder makes it (lease/preemption.h: a holder gives way when a
// decision names its GPU in Decision::preempt, and its job ends a kill grace later). Any number of
// preemptible jobs (0-40, some preempted before) wait ahead of the jobs that are not preemptible in
// line (fair share put them first); those arrive at random times, together needing no more GPUs
// than the machine has, and then run longer than the horizon.
//
// The bound proved, over 3,000 random machines:
//   every job that is not preemptible starts at most one kill grace after it arrives, and the
//   preemptions number at most the GPUs those jobs need (each GPU vacated once; no preemptible job
//   restarts on a GPU such a job waits for), however many preemptible jobs are ahead.
// Without the hysteresis the requeued preemptible job first in line takes back each freed GPU and
// the waits are unbounded (the test's horizon is hit).
struct SimJob {
  Request request;
  double arrival_s = 0, duration_s = 0;
  std::optional<double> start_s, giving_way_until_s;
  int gpu = -1;  // the first of its GPUs while it runs
  std::vector<unsigned> gpus;
};

TEST(PreemptionHysteresis, PropertyJobsThatAreNotPreemptibleStartWithinOneKillGraceWhateverIsAheadOfThem) {
  std::mt19937_64 rng(20261206);
  constexpr double kGraceS = 10, kHorizonS = 5000;
  for (int round = 0; round < 3000; ++round) {
    const unsigned n = 1 + static_cast<unsigned>(rng() % 4);
    std::vector<SimJob> jobs;
    const unsigned preemptible = static_cast<unsigned>(rng() % 41);
    for (unsigned k = 0; k < preemptible; ++k) {
      SimJob j;
      j.request = Preemptible(static_cast<unsigned>(rng() % 3));
      j.request.submit_time_s = static_cast<double>(k);
      j.duration_s = 20 + static_cast<double>(rng() % 400);
      jobs.push_back(j);
    }
    unsigned normal_gpus = 0;
    std::size_t first_normal = jobs.size();
    while (normal_gpus < n && (normal_gpus == 0 || rng() % 3 != 0)) {
      SimJob j;
      j.request = Normal(1 + static_cast<unsigned>(rng() % (n - normal_gpus)));
      normal_gpus += j.request.count;
      j.arrival_s = static_cast<double>(rng() % 200);
      j.request.submit_time_s = 1000 + j.arrival_s;  // behind every preemptible job in line
      j.duration_s = 1e9;
      jobs.push_back(j);
    }
    std::vector<int> holder(n, -1);  // job on each GPU
    unsigned preemptions = 0;
    double now = 0;
    while (now <= kHorizonS) {
      // Ends: preemptible jobs giving way or done.
      for (std::size_t j = 0; j < jobs.size(); ++j) {
        SimJob& s = jobs[j];
        if (!s.start_s) continue;
        const bool gave_way = s.giving_way_until_s && *s.giving_way_until_s <= now;
        if (!gave_way && *s.start_s + s.duration_s > now) continue;
        for (unsigned g : s.gpus) holder[g] = -1;
        s.gpus.clear();
        if (gave_way) {  // requeued, counted
          s.start_s.reset();
          s.giving_way_until_s.reset();
          ++s.request.preemptions;
        } else {
          s.start_s = -1;  // done: never again (duration_s past)
          s.duration_s = -1e18;
          s.giving_way_until_s.reset();
        }
      }
      // The line: waiting preemptible jobs first, then those that are not, by submission.
      std::vector<std::size_t> waiting;
      for (std::size_t j = 0; j < jobs.size(); ++j)
        if (!jobs[j].start_s && jobs[j].arrival_s <= now) waiting.push_back(j);
      std::stable_sort(waiting.begin(), waiting.end(), [&](std::size_t a, std::size_t b) {
        return jobs[a].request.submit_time_s < jobs[b].request.submit_time_s;
      });
      std::vector<GpuState> gpus = IdleGpus(n);
      for (unsigned g = 0; g < n; ++g)
        if (holder[g] >= 0)
          HeldBy(gpus[g], "job " + std::to_string(holder[g]), GivesWay(jobs[static_cast<std::size_t>(holder[g])].request, 1000));
      std::vector<Request> line;
      for (std::size_t j : waiting) line.push_back(jobs[j].request);
      Limits limits;
      limits.now_s = now;
      const std::vector<Decision> decisions = Schedule(gpus, line, limits);
      for (std::size_t k = 0; k < decisions.size(); ++k) {
        SimJob& s = jobs[waiting[k]];
        if (decisions[k].granted) {
          s.start_s = now;
          s.gpus = decisions[k].gpus;
          for (unsigned g : s.gpus) {
            ASSERT_EQ(holder[g], -1) << "round " << round << ": GPU" << g << " given twice";
            holder[g] = static_cast<int>(waiting[k]);
          }
        }
        for (unsigned g : decisions[k].preempt) {
          SimJob& held = jobs[static_cast<std::size_t>(holder[g])];
          ASSERT_NE(held.request.preemptible, Preemptible::kNo);
          if (held.giving_way_until_s) continue;  // giving way already
          held.giving_way_until_s = now + kGraceS;
          ++preemptions;
        }
      }
      bool all_started = true;
      for (std::size_t j = first_normal; j < jobs.size(); ++j) all_started = all_started && jobs[j].start_s.has_value();
      if (all_started) break;
      // The next event: an arrival, a grace's end, a job's end.
      double next = kHorizonS + 1;
      for (const SimJob& s : jobs) {
        if (s.arrival_s > now) next = std::min(next, s.arrival_s);
        if (s.giving_way_until_s) next = std::min(next, *s.giving_way_until_s);
        else if (s.start_s && *s.start_s >= 0) next = std::min(next, *s.start_s + s.duration_s);
      }
      now = next;
    }
    for (std::size_t j = first_normal; j < jobs.size(); ++j) {
      ASSERT_TRUE(jobs[j].start_s.has_value()) << "round " << round << ": a job that is not preemptible never started ("
                                               << preemptible << " preemptible jobs ahead, " << n << " GPUs)";
      EXPECT_LE(*jobs[j].start_s - jobs[j].arrival_s, kGraceS) << "round " << round << ", " << preemptible
                                                               << " preemptible jobs ahead, " << n << " GPUs";
    }
    EXPECT_LE(preemptions, normal_gpus) << "round " << round;
  }
}

}  // namespace
}  // namespace gpulane::sched
