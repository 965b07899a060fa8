// Preemptible jobs in the lease policy (sched::Schedule, "Preemptible jobs" in sched/policy.h):
// they use idle and reserved GPUs, block nobody, and are named for preemption when a job that is
// not preemptible could start only on their GPUs.
#include "sched/policy.h"
#include "support/idle_gpus.h"
#include "support/units.h"
#include "support/decisions.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace gpulane::sched {
namespace {

using test::IdleGpus;
using test::UuidOf;

using Indices = std::vector<unsigned>;

// GPU `i` leased by a preemptible job whose processes use `used` of its memory.
void HeldByPreemptible(GpuState& g, const std::string& who, std::uint64_t used = 60 * kGiB) {
  g.exclusive_holder = who;
  g.preemptible_holder = who;
  g.preemptible_used_bytes = used;
  g.has_context = true;
  *g.free_bytes -= used;
  g.util_pct = 100;
}

Request Whole(std::string who, unsigned count) {
  Request r;
  r.user = std::move(who);
  r.count = count;
  return r;
}

Request Preemptible(std::string who, unsigned count) {
  Request r = Whole(std::move(who), count);
  r.preemptible = Preemptible::kRequeue;
  return r;
}

TEST(PreemptionPolicy, AJobThatCanStartOnlyOnAPreemptibleJobsGpuNamesItForPreemption) {
  auto gpus = IdleGpus(2);
  gpus[0].exclusive_holder = "carol (job 3)";  // a normal lease
  HeldByPreemptible(gpus[1], "bob (job 12)");
  auto d = Schedule(gpus, {Whole("alice", 1)}, kNoMargin);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_FALSE(d[0].granted) << "it starts once the preemptible job has gone, not on top of it";
  EXPECT_EQ(d[0].preempt, Indices{1});
  EXPECT_EQ(d[0].gpus, Indices{1}) << "the GPU is reserved for it meanwhile";
  EXPECT_EQ(ReasonsOf(d[0]), "[GPU1: preempting bob (job 12), a preemptible job] ");
}

TEST(PreemptionPolicy, FreeGpusAreTakenFirstSoNoJobGivesWayForNothing) {
  auto gpus = IdleGpus(2);
  HeldByPreemptible(gpus[0], "bob (job 12)");
  auto d = Schedule(gpus, {Whole("alice", 1)}, kNoMargin);
  ASSERT_TRUE(d[0].granted);
  EXPECT_EQ(d[0].gpus, Indices{1});
  EXPECT_TRUE(d[0].preempt.empty());

  // Two GPUs: the free one and one preemptible job's, never both preemptible ones.
  gpus = IdleGpus(3);
  HeldByPreemptible(gpus[0], "bob (job 12)");
  HeldByPreemptible(gpus[1], "bob (job 13)");
  d = Schedule(gpus, {Whole("alice", 2)}, kNoMargin);
  EXPECT_FALSE(d[0].granted);
  ASSERT_EQ(d[0].preempt.size(), 1u) << ReasonsOf(d[0]);
  EXPECT_NE(d[0].preempt[0], 2u);
  EXPECT_TRUE(std::find(d[0].gpus.begin(), d[0].gpus.end(), 2u) != d[0].gpus.end());
}

TEST(PreemptionPolicy, NoPreemptionWhenGivingWayWouldNotBeEnough) {
  // Two GPUs wanted: one is a normal lease's, so preempting the other would idle it for nothing.
  auto gpus = IdleGpus(2);
  gpus[0].exclusive_holder = "carol (job 3)";
  HeldByPreemptible(gpus[1], "bob (job 12)");
  auto d = Schedule(gpus, {Whole("alice", 2)}, kNoMargin);
  EXPECT_FALSE(d[0].granted);
  EXPECT_TRUE(d[0].preempt.empty()) << ReasonsOf(d[0]);
}

TEST(PreemptionPolicy, APreemptibleJobNeverPreemptsAnother) {
  auto gpus = IdleGpus(1);
  HeldByPreemptible(gpus[0], "bob (job 12)");
  auto d = Schedule(gpus, {Preemptible("dave", 1)}, kNoMargin);
  EXPECT_FALSE(d[0].granted);
  EXPECT_TRUE(d[0].preempt.empty());
}

TEST(PreemptionPolicy, APreemptibleJobUsesAGpuReservedForAWaitingJob) {
  // alice waits for two GPUs, one leased: the free one is reserved for her. A normal job may not
  // take it; a preemptible one may (it gives way once alice can start).
  auto gpus = IdleGpus(2);
  gpus[0].exclusive_holder = "carol (job 3)";
  auto d = Schedule(gpus, {Whole("alice", 2), Whole("erin", 1), Preemptible("bob", 1)}, kNoMargin);
  EXPECT_FALSE(d[0].granted);
  EXPECT_FALSE(d[1].granted) << "GPU1 is reserved for alice";
  ASSERT_TRUE(d[2].granted) << ReasonsOf(d[2]);
  EXPECT_EQ(d[2].gpus, Indices{1});

  // Once carol's job has ended, alice could start if bob gave way: he is named.
  gpus = IdleGpus(2);
  HeldByPreemptible(gpus[1], "bob (job 12)");
  d = Schedule(gpus, {Whole("alice", 2)}, kNoMargin);
  EXPECT_EQ(d[0].preempt, Indices{1});
}

TEST(PreemptionPolicy, AWaitingPreemptibleJobReservesNothingEvenUnderFifo) {
  auto gpus = IdleGpus(2);
  gpus[0].exclusive_holder = "carol (job 3)";
  for (PolicyKind policy : {PolicyKind::kDefault, PolicyKind::kFifo, PolicyKind::kEasy}) {
    Limits limits{0, policy};
    Request first = Preemptible("bob", 2);  // waits: only GPU1 is free
    auto d = Schedule(gpus, {first, Whole("alice", 1)}, limits);
    EXPECT_FALSE(d[0].granted);
    ASSERT_TRUE(d[1].granted) << PolicyName(policy) << ": " << ReasonsOf(d[1]);
    EXPECT_EQ(d[1].gpus, Indices{1});
  }
}

TEST(PreemptionPolicy, AGpuReservedForAPreemptionIsNotTakenByAnotherPreemptibleJob) {
  auto gpus = IdleGpus(2);
  HeldByPreemptible(gpus[1], "bob (job 12)");
  // alice needs both GPUs: GPU0 is free and reserved for her while bob gives way on GPU1. dave's
  // preemptible job may not take GPU0 meanwhile (he would be preempted at once, and she would wait).
  auto d = Schedule(gpus, {Whole("alice", 2), Preemptible("dave", 1)}, kNoMargin);
  EXPECT_EQ(d[0].preempt, Indices{1});
  EXPECT_EQ(d[0].gpus.size(), 2u);
  EXPECT_FALSE(d[1].granted) << ReasonsOf(d[1]);
  EXPECT_TRUE(d[1].preempt.empty());
}

TEST(PreemptionPolicy, TheMemoryOfThePreemptibleJobCountsAsFreedForAMinFreeRequest) {
  auto gpus = IdleGpus(1);
  HeldByPreemptible(gpus[0], "bob (job 12)", 70 * kGiB);
  Request r = Whole("alice", 1);
  r.min_free_bytes = 40 * kGiB;  // 10 GiB free now, 80 GiB once bob has gone
  auto d = Schedule(gpus, {r}, kNoMargin);
  EXPECT_EQ(d[0].preempt, Indices{0}) << ReasonsOf(d[0]);
  r.min_free_bytes = 90 * kGiB;  // more than the GPU has: never, and nobody is preempted for it
  d = Schedule(gpus, {r}, kNoMargin);
  EXPECT_TRUE(d[0].impossible);
  EXPECT_TRUE(d[0].preempt.empty());
}

TEST(PreemptionPolicy, AGpuSharedWithANormalLeaseOrAForeignProcessIsNotPreemptible) {
  // Only GpuState::preemptible_holder makes a GPU preemptible (lease/occupancy.h sets it only when
  // every lease is preemptible and nothing else runs there): without it, the job waits as usual.
  auto gpus = IdleGpus(1);
  gpus[0].exclusive_holder = "bob (job 12)";
  auto d = Schedule(gpus, {Whole("alice", 1)}, kNoMargin);
  EXPECT_FALSE(d[0].granted);
  EXPECT_TRUE(d[0].preempt.empty());
}

}  // namespace
}  // namespace gpulane::sched
