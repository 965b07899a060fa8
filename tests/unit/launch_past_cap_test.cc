// Launching past daemon.max_waiting (sched/launch_past_cap.h): a job the cap leaves in the queue
// starts when the lease line grants it GPUs at once behind every request waiting there, and only
// then; it never delays a waiting request, the line's head first of all.
#include "sched/launch_past_cap.h"

#include <gtest/gtest.h>

#include <random>

#include "sched/launch.h"
#include "support/idle_gpus.h"

namespace gpulane::sched {
namespace {

using test::IdleGpus;
using Ids = std::vector<std::int64_t>;

// GPU `i` leased by a job that ends at `until` (nullopt: no time limit).
void LeaseGpu(std::vector<GpuState>& gpus, unsigned i, std::optional<double> until) {
  gpus[i].has_context = true;
  gpus[i].exclusive_holder = "bob (job 1)";
  gpus[i].busy_until_s = until;
}

Request CapJob(unsigned count, std::optional<double> limit = std::nullopt) {
  Request r;
  r.count = count;
  r.time_limit_s = limit;
  r.user = "alice";
  return r;
}

LineNow LineOf(std::vector<GpuState> gpus, std::vector<Request> line, PolicyKind policy = PolicyKind::kDefault) {
  LineNow now;
  now.gpus = std::move(gpus);
  now.line = std::move(line);
  now.limits.policy = policy;
  now.limits.now_s = 0;
  return now;
}

// The scenario a user checks: GPU0 runs a job for another hour; the head of the line waits for
// both GPUs, so it holds GPU1 until then. A short job (10 minutes) fits before that start; one
// without a time limit, or longer than the hour, would delay the head.
TEST(LaunchPastCap, ASmallJobStartsOnTheIdleGpuOnlyWhenItEndsBeforeTheHeadsStart) {
  auto gpus = IdleGpus(2);
  LeaseGpu(gpus, 0, 3600.0);
  const LineNow line = LineOf(gpus, {CapJob(2)});
  const std::vector<CappedJob> capped = {{11, CapJob(1)}, {12, CapJob(1, 7200)}, {13, CapJob(1, 600)}, {14, CapJob(1, 600)}};
  EXPECT_EQ(LaunchPastCap(line, capped), Ids{13}) << "only the short job; the second short one finds GPU1 taken";
  EXPECT_EQ(LaunchPastCap(LineOf(gpus, {}), capped), Ids{11}) << "nobody waits: the first takes the idle GPU";
  EXPECT_TRUE(LaunchPastCap(LineOf(gpus, {CapJob(2)}, PolicyKind::kFifo), capped).empty()) << "fifo: nothing overtakes";
}

TEST(LaunchPastCap, PreemptibleNamedGpusPartitionsAndMigDevicesAreLeftToTheCap) {
  const LineNow line = LineOf(IdleGpus(4), {});
  Request preemptible = CapJob(1), named = CapJob(1), partition = CapJob(1), mig = CapJob(1);
  preemptible.preemptible = Preemptible::kRequeue;
  named.gpu_list = "2";
  partition.partition = "night";
  mig.mig_profile = "1g.10gb";
  EXPECT_TRUE(LaunchPastCap(line, std::vector<CappedJob>{{1, preemptible}, {2, named}, {3, partition}, {4, mig}}).empty());
}

// PlanLaunches names the jobs its cap leaves out: ready GPU jobs that are not preemptible.
TEST(LaunchPastCap, PlanLaunchesNamesTheJobsTheCapLeavesOut) {
  std::vector<QueuedJob> queue(4);
  for (int i = 0; i < 4; ++i) queue[i].id = i + 1;
  queue[2].preemptible = true;
  queue[3].cpu_only = true;
  const LaunchPlan plan = PlanLaunches(queue, [](const JobRef&) { return DependencyState::kCompleted; }, {1, 0});
  EXPECT_EQ(plan.launch, (Ids{1, 3, 4}));
  EXPECT_EQ(plan.capped, Ids{2}) << "the preemptible job keeps its own cap; the CPU-only one is never capped";
}

// A random machine: GPUs free, leased with a known or unknown end, or shared; a random line.
std::vector<GpuState> RandomGpus(std::mt19937& rng, unsigned n) {
  auto gpus = IdleGpus(n);
  for (unsigned i = 0; i < n; ++i) {
    const unsigned kind = rng() % 4;
    if (kind == 1) LeaseGpu(gpus, i, static_cast<double>(rng() % 7200));
    if (kind == 2) LeaseGpu(gpus, i, std::nullopt);
  }
  return gpus;
}

Request RandomJob(std::mt19937& rng, unsigned n) {
  Request r = CapJob(1 + static_cast<unsigned>(rng() % n));
  if (rng() % 3) r.time_limit_s = static_cast<double>(60 + rng() % 7200);
  r.uid = static_cast<std::uint32_t>(rng() % 3);
  return r;
}

bool SameDecision(const Decision& a, const Decision& b) {
  return a.granted == b.granted && a.gpus == b.gpus && a.start_s == b.start_s && a.held == b.held && a.preempt == b.preempt;
}

// Property, over random machines, lines and policies, with full decisions and the simulator's
// grants_only alike: each job launched past the cap is one the
// line, with it placed last (behind the jobs launched before it), grants at once; each one left
// out is one it would not; and with every launched job in the line, every request that was
// waiting there (the head first) is decided exactly as before: granted or not, the same GPUs,
// the same reservation and expected start.
TEST(LaunchPastCap, PropertyALaunchedJobIsGrantedAtOnceAndDelaysNobodyInLine) {
  std::mt19937 rng(12);
  unsigned launched_total = 0, head_waiting = 0;
  for (int round = 0; round < 400; ++round) {
    const unsigned n = 1 + static_cast<unsigned>(rng() % 6);
    const PolicyKind policy = static_cast<PolicyKind>(rng() % 4);
    std::vector<Request> waiting;
    for (unsigned k = rng() % 5; k > 0; --k) waiting.push_back(RandomJob(rng, n));
    LineNow line = LineOf(RandomGpus(rng, n), waiting, policy);
    line.limits.now_s = 10;
    if (rng() % 3 == 0) line.limits.max_gpus_by_uid[1] = 1;
    line.limits.grants_only = rng() % 2 == 0;  // the simulator's decisions: the same grants
    Limits full = line.limits;
    full.grants_only = false;
    std::vector<CappedJob> capped;
    for (int k = 0; k < 6; ++k) capped.push_back({100 + k, RandomJob(rng, n)});
    const Ids launched = LaunchPastCap(line, capped);
    launched_total += static_cast<unsigned>(launched.size());
    const std::vector<Decision> before = Schedule(line.gpus, waiting, full);
    if (!before.empty() && !before[0].granted) ++head_waiting;
    std::vector<Request> with = waiting;
    std::size_t next = 0;
    for (const CappedJob& job : capped) {
      std::vector<Request> trial = with;
      trial.push_back(job.request);
      const bool granted = Schedule(line.gpus, trial, full).back().granted;
      const bool chosen = next < launched.size() && launched[next] == job.id;
      ASSERT_EQ(granted, chosen) << "round " << round << " job " << job.id << " policy " << PolicyName(policy);
      if (chosen) {
        with = trial;
        ++next;
      }
    }
    ASSERT_EQ(next, launched.size()) << "launched in line order, each once";
    const std::vector<Decision> after = Schedule(line.gpus, with, full);
    for (std::size_t k = 0; k < before.size(); ++k)
      ASSERT_TRUE(SameDecision(before[k], after[k])) << "round " << round << ": request " << k << " of the line decided otherwise";
  }
  EXPECT_GT(launched_total, 100u) << "the rounds launch jobs past the cap";
  EXPECT_GT(head_waiting, 100u) << "the rounds have a waiting head to delay";
}

}  // namespace
}  // namespace gpulane::sched
