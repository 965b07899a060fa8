// The launch decision (sched::PlanLaunches): which queued jobs get a supervisor, which are
// cancelled because a dependency failed, and why the others wait.
#include "sched/launch.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

namespace gpulane::sched {
namespace {

using Ids = std::vector<std::int64_t>;
using Refs = std::vector<JobRef>;
using DS = DependencyState;

Refs RefsOf(const Ids& ids) {
  Refs out;
  for (auto id : ids) out.push_back({id, std::nullopt});
  return out;
}

// Jobs keep their dependency lists here, as the daemon's jobs do (QueuedJob only points at them).
struct Queue {
  std::map<std::int64_t, std::pair<Refs, Refs>> deps;  // id -> after_ok, after_any
  std::vector<QueuedJob> jobs;

  QueuedJob& Add(std::int64_t id, int priority = 0, Ids after_ok = {}, Ids after_any = {}) {
    return AddRefs(id, priority, RefsOf(after_ok), RefsOf(after_any));
  }
  QueuedJob& AddRefs(std::int64_t id, int priority, Refs after_ok, Refs after_any = {}) {
    auto& d = deps[id] = {std::move(after_ok), std::move(after_any)};
    jobs.push_back({id, priority, false, d.first, d.second});
    return jobs.back();
  }
};

// A lookup from a table of whole jobs; jobs not in it are unfinished (as the daemon answers for unknown ids).
DependencyLookup Table(std::map<std::int64_t, DS> states, std::set<std::int64_t>* asked = nullptr) {
  return [states = std::move(states), asked](const JobRef& ref) {
    const std::int64_t id = ref.id;
    if (asked) asked->insert(id);
    auto it = states.find(id);
    return it == states.end() ? DS::kUnfinished : it->second;
  };
}

LaunchLimits Cap(unsigned max_waiting, unsigned already_waiting = 0) { return {max_waiting, already_waiting}; }

TEST(PlanLaunches, HigherPriorityFirstThenSubmissionOrder) {
  Queue q;
  q.Add(5);
  q.Add(3, -1);
  q.Add(9, 10);
  q.Add(4);
  q.Add(7, 10);
  LaunchPlan plan = PlanLaunches(q.jobs, Table({}), Cap(10));
  EXPECT_EQ(plan.launch, (Ids{7, 9, 4, 5, 3}));
  EXPECT_TRUE(plan.cancel.empty());
  EXPECT_TRUE(plan.blocked.empty());
}

TEST(PlanLaunches, HeldJobsAreSkippedAndTakeNoPlace) {
  Queue q;
  q.Add(1).held = true;
  q.Add(2);
  q.Add(3, 5).held = true;
  q.Add(4);
  LaunchPlan plan = PlanLaunches(q.jobs, Table({}), Cap(1));
  EXPECT_EQ(plan.launch, (Ids{2})) << "the cap's one place goes to the first job that is not held";
  q.jobs[0].held = q.jobs[2].held = false;
  EXPECT_EQ(PlanLaunches(q.jobs, Table({}), Cap(1)).launch, (Ids{3}));
}

TEST(PlanLaunches, AfterWaitsUntilTheDependencyCompleted) {
  Queue q;
  q.Add(10, 0, {1});
  q.Add(11, 0, {2});
  LaunchPlan running = PlanLaunches(q.jobs, Table({{1, DS::kUnfinished}, {2, DS::kCompleted}}), Cap(10));
  EXPECT_EQ(running.launch, (Ids{11}));
  EXPECT_EQ(running.blocked, (std::vector<JobReason>{{10, "waiting for job 1"}}));
  LaunchPlan done = PlanLaunches(q.jobs, Table({{1, DS::kCompleted}, {2, DS::kCompleted}}), Cap(10));
  EXPECT_EQ(done.launch, (Ids{10, 11}));
  EXPECT_TRUE(done.blocked.empty());
}

TEST(PlanLaunches, AfterAJobThatFailedWasCancelledOrTimedOutCancelsTheDependent) {
  Queue q;
  q.Add(10, 0, {1});
  q.Add(11, 0, {2});
  q.Add(12, 0, {3});
  q.Add(13);
  LaunchPlan plan =
      PlanLaunches(q.jobs, Table({{1, DS::kFailed}, {2, DS::kCancelled}, {3, DS::kTimeout}}), Cap(10));
  EXPECT_EQ(plan.launch, (Ids{13}));
  EXPECT_EQ(plan.cancel, (std::vector<JobReason>{{10, "its dependency job 1 failed (--after needs it to complete)"},
                                                 {11, "its dependency job 2 was cancelled (--after needs it to complete)"},
                                                 {12, "its dependency job 3 timed out (--after needs it to complete)"}}));
}

TEST(PlanLaunches, AFailedDependencyDoomsTheJobEvenWhileAnotherIsUnfinished) {
  Queue q;
  q.Add(10, 0, {1, 2});
  LaunchPlan plan = PlanLaunches(q.jobs, Table({{1, DS::kUnfinished}, {2, DS::kFailed}}), Cap(10));
  EXPECT_EQ(plan.cancel, (std::vector<JobReason>{{10, "its dependency job 2 failed (--after needs it to complete)"}}));
  EXPECT_TRUE(plan.blocked.empty());
}

TEST(PlanLaunches, AnUnknownDependencyKeepsTheJobWaiting) {
  Queue q;
  q.Add(10, 0, {77});
  LaunchPlan plan = PlanLaunches(q.jobs, Table({}), Cap(10));
  EXPECT_TRUE(plan.launch.empty());
  EXPECT_EQ(plan.blocked, (std::vector<JobReason>{{10, "waiting for job 77"}}));
}

TEST(PlanLaunches, AfterAnyStartsOnceTheDependencyEndedHowever) {
  Queue q;
  q.Add(10, 0, {}, {1});
  q.Add(11, 0, {}, {2});
  q.Add(12, 0, {}, {3});
  LaunchPlan plan = PlanLaunches(q.jobs, Table({{1, DS::kFailed}, {2, DS::kUnfinished}, {3, DS::kCancelled}}), Cap(10));
  EXPECT_EQ(plan.launch, (Ids{10, 12}));
  EXPECT_TRUE(plan.cancel.empty());
  EXPECT_EQ(plan.blocked, (std::vector<JobReason>{{11, "waiting for job 2 to end"}}));
}

TEST(PlanLaunches, BothKindsOfDependencyMustBeMet) {
  Queue q;
  q.Add(10, 0, {1}, {2});
  EXPECT_EQ(PlanLaunches(q.jobs, Table({{1, DS::kCompleted}, {2, DS::kUnfinished}}), Cap(10)).blocked,
            (std::vector<JobReason>{{10, "waiting for job 2 to end"}}));
  EXPECT_EQ(PlanLaunches(q.jobs, Table({{1, DS::kUnfinished}, {2, DS::kFailed}}), Cap(10)).blocked,
            (std::vector<JobReason>{{10, "waiting for job 1"}}));
  EXPECT_EQ(PlanLaunches(q.jobs, Table({{1, DS::kCompleted}, {2, DS::kFailed}}), Cap(10)).launch, (Ids{10}));
}

TEST(ArrayDependencyState, AllTasksCount) {
  EXPECT_EQ(ArrayDependencyState({DS::kCompleted, DS::kUnfinished, DS::kFailed}), DS::kUnfinished)
      << "an array with a task still queued or running has not ended";
  EXPECT_EQ(ArrayDependencyState({DS::kCompleted, DS::kCompleted}), DS::kCompleted);
  EXPECT_EQ(ArrayDependencyState({DS::kFailed, DS::kCompleted, DS::kCompleted}), DS::kFailed)
      << "one failed task fails the array";
  EXPECT_EQ(ArrayDependencyState({DS::kCancelled, DS::kCompleted, DS::kTimeout, DS::kCompleted}), DS::kTimeout)
      << "named by the last task that did not complete";
  EXPECT_EQ(ArrayDependencyState({}), DS::kCompleted);
}

TEST(PlanLaunches, AfterAnArrayWaitsForEveryTask) {
  Queue q;
  q.Add(20, 0, {10});  // --after 10, an array of three tasks 10, 11, 12
  auto as_array = [](std::vector<DS> tasks) { return Table({{10, ArrayDependencyState(tasks)}}); };
  EXPECT_EQ(PlanLaunches(q.jobs, as_array({DS::kCompleted, DS::kUnfinished, DS::kCompleted}), Cap(10)).blocked,
            (std::vector<JobReason>{{20, "waiting for job 10"}}));
  EXPECT_EQ(PlanLaunches(q.jobs, as_array({DS::kCompleted, DS::kCompleted, DS::kCompleted}), Cap(10)).launch, (Ids{20}));
  EXPECT_EQ(PlanLaunches(q.jobs, as_array({DS::kCompleted, DS::kFailed, DS::kCompleted}), Cap(10)).cancel,
            (std::vector<JobReason>{{20, "its dependency job 10 failed (--after needs it to complete)"}}));
}

// A job waiting for `--after 25` showed fair-share arithmetic ("priority 0.500 (fair share ...)")
// whenever the cap on waiting supervisors was reached: it was skipped before its dependencies were
// looked at. Its dependency names its wait (and a failed one ends it) whatever the cap.
TEST(PlanLaunches, ADependencyWaitIsNamedWhenTheCapIsReached) {
  Queue q;
  q.Add(30, 0, {25});
  q.Add(31, 0, {26});
  const LaunchPlan plan = PlanLaunches(q.jobs, Table({{25, DS::kUnfinished}, {26, DS::kFailed}}), Cap(4, 4));
  EXPECT_TRUE(plan.launch.empty());
  EXPECT_EQ(plan.blocked, (std::vector<JobReason>{{30, "waiting for job 25"}}));
  EXPECT_EQ(plan.cancel, (std::vector<JobReason>{{31, "its dependency job 26 failed (--after needs it to complete)"}}));
}

TEST(PlanLaunches, TheCapCountsJobsAlreadyWaiting) {
  Queue q;
  for (std::int64_t id = 1; id <= 6; ++id) q.Add(id);
  EXPECT_EQ(PlanLaunches(q.jobs, Table({}), Cap(4)).launch, (Ids{1, 2, 3, 4}));
  EXPECT_EQ(PlanLaunches(q.jobs, Table({}), Cap(4, 3)).launch, (Ids{1}));
  EXPECT_TRUE(PlanLaunches(q.jobs, Table({}), Cap(4, 4)).launch.empty());
  EXPECT_TRUE(PlanLaunches(q.jobs, Table({}), Cap(4, 9)).launch.empty()) << "more waiting than the cap (it was lowered)";
}

// Preemptible jobs (submit --preemptible) have a cap of their own: four of them waiting for GPUs
// do not keep a normal job, which would preempt them, out of the lease line.
TEST(PlanLaunches, WaitingPreemptibleJobsDoNotKeepOthersOutOfTheLine) {
  Queue q;
  for (std::int64_t id = 1; id <= 5; ++id) q.Add(id).preemptible = true;
  q.Add(6);
  q.Add(7);
  LaunchLimits limits = Cap(2);
  EXPECT_EQ(PlanLaunches(q.jobs, Table({}), limits).launch, (Ids{1, 2, 6, 7}));
  limits.already_waiting_preemptible = 2;  // two preemptible supervisors wait already
  EXPECT_EQ(PlanLaunches(q.jobs, Table({}), limits).launch, (Ids{6, 7}));
  limits.already_waiting = 2;
  EXPECT_TRUE(PlanLaunches(q.jobs, Table({}), limits).launch.empty());
}

// CPU-only jobs (-g 0) wait for no GPU: a full cap holds them back no more than it counts them.
TEST(PlanLaunches, CpuOnlyJobsStartPastAFullCapAndTakeNoPlaceUnderIt) {
  Queue q;
  q.Add(1);
  q.Add(2).cpu_only = true;
  q.Add(3);
  q.Add(4).cpu_only = true;
  q.Add(5, 0, {100}).cpu_only = true;  // still waits for its dependency
  EXPECT_EQ(PlanLaunches(q.jobs, Table({}), Cap(1)).launch, (Ids{1, 2, 4}));
  EXPECT_EQ(PlanLaunches(q.jobs, Table({}), Cap(1, 1)).launch, (Ids{2, 4}));
  EXPECT_EQ(PlanLaunches(q.jobs, Table({{100, DS::kCompleted}}), Cap(2, 2)).launch, (Ids{2, 4, 5}));
}

TEST(PlanLaunches, BlockedAndDoomedJobsTakeNoPlaceUnderTheCap) {
  Queue q;
  q.Add(1, 0, {100});  // blocked
  q.Add(2, 0, {101});  // doomed
  q.Add(3);
  q.Add(4);
  q.Add(5);
  LaunchPlan plan = PlanLaunches(q.jobs, Table({{101, DS::kFailed}}), Cap(2));
  EXPECT_EQ(plan.launch, (Ids{3, 4}));
  EXPECT_EQ(plan.blocked.size(), 1u);
  EXPECT_EQ(plan.cancel.size(), 1u);
}

TEST(PlanLaunches, OnlyTheHeadOfALongQueueIsConsidered) {
  // 100,000 queued jobs, each waiting for a job that has not ended, but the last-submitted one
  // with the highest priority. The lookahead covers LaunchLookahead(cap) jobs from the head.
  constexpr unsigned kCap = 8;
  Queue q;
  q.deps.clear();
  const Refs waits_for = {{999999, std::nullopt}};
  for (std::int64_t id = 1; id <= 100000; ++id) q.jobs.push_back({id, 0, false, waits_for, {}});
  q.jobs.push_back({100001, 1, false, {}, {}});
  std::set<std::int64_t> asked;
  std::size_t lookups = 0;
  LaunchPlan plan = PlanLaunches(
      q.jobs, [&](const JobRef& ref) { ++lookups, asked.insert(ref.id); return DS::kUnfinished; }, Cap(kCap));
  EXPECT_EQ(plan.launch, (Ids{100001})) << "priority puts it at the head";
  const std::size_t look = LaunchLookahead(kCap);
  EXPECT_EQ(look, 4u * kCap + 64);
  ASSERT_EQ(plan.blocked.size(), look - 1) << "the head minus the one launched; nobody further back";
  EXPECT_EQ(lookups, look - 1);
  for (std::size_t i = 0; i < plan.blocked.size(); ++i)
    EXPECT_EQ(plan.blocked[i].id, static_cast<std::int64_t>(i + 1)) << "in line order";
  // A runnable job just behind the head waits for a later round, even though the cap has room.
  Queue q2;
  for (std::int64_t id = 1; id <= static_cast<std::int64_t>(look); ++id) q2.jobs.push_back({id, 0, false, waits_for, {}});
  q2.jobs.push_back({static_cast<std::int64_t>(look) + 1, 0, false, {}, {}});
  EXPECT_TRUE(PlanLaunches(q2.jobs, Table({}), Cap(kCap)).launch.empty());
}

// --after 12_3: that task alone, asked about as a task, and named so in the reason.
TEST(PlanLaunches, AfterATaskWaitsForThatTaskAloneAndSaysSo) {
  Queue q;
  q.AddRefs(20, 0, {{12, 3}});
  std::vector<JobRef> asked;
  auto lookup = [&](const JobRef& ref) {
    asked.push_back(ref);
    return ref.task == 3 ? DS::kUnfinished : DS::kCompleted;
  };
  LaunchPlan plan = PlanLaunches(q.jobs, lookup, Cap(4));
  EXPECT_TRUE(plan.launch.empty());
  ASSERT_EQ(plan.blocked.size(), 1u);
  EXPECT_EQ(plan.blocked[0].reason, "waiting for job 12_3");
  EXPECT_EQ(asked, (std::vector<JobRef>{{12, 3}}));
  auto done = [](const JobRef&) { return DS::kFailed; };
  plan = PlanLaunches(q.jobs, done, Cap(4));
  ASSERT_EQ(plan.cancel.size(), 1u);
  EXPECT_EQ(plan.cancel[0].reason, "its dependency job 12_3 failed (--after needs it to complete)");
}

TEST(PlanLaunches, TheDefaultCapIsTwoPerGpuAndAtLeastFour) {
  EXPECT_EQ(DefaultMaxWaiting(0), 4u);
  EXPECT_EQ(DefaultMaxWaiting(1), 4u);
  EXPECT_EQ(DefaultMaxWaiting(2), 4u);
  EXPECT_EQ(DefaultMaxWaiting(3), 6u);
  EXPECT_EQ(DefaultMaxWaiting(8), 16u);
}

TEST(PlanLaunches, AnEmptyQueueLaunchesNothing) {
  LaunchPlan plan = PlanLaunches({}, Table({}), Cap(4));
  EXPECT_TRUE(plan.launch.empty() && plan.cancel.empty() && plan.blocked.empty());
}

}  // namespace
}  // namespace gpulane::sched
