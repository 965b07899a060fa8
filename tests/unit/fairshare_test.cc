// Priorities and fair share (sched/fairshare.h) on a virtual clock: decay over half-lives, shares,
// the factor, age, and the launch order they give (sched::PlanLaunches) with --priority first.
#include "sched/fairshare.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "sched/launch.h"

namespace gpulane::sched {
namespace {

constexpr double kDayS = 86400;
constexpr double kHourS = 3600;

TEST(DecayedUsage, RunningNowCountsFullyAndHalvesEachHalfLife) {
  // One GPU for one second just ended: ~1 GPU-s; the same second one, two and ten half-lives ago.
  const double now = 100 * kDayS;
  const UsageRecord just{"alice", now - 1, now, 1};
  EXPECT_NEAR(DecayedUsageGpuS(just, now, kDayS), 1.0, 1e-4);
  for (int halvings : {1, 2, 10}) {
    const UsageRecord old{"alice", now - halvings * kDayS - 1, now - halvings * kDayS, 1};
    EXPECT_NEAR(DecayedUsageGpuS(old, now, kDayS), std::pow(0.5, halvings), 1e-4) << halvings << " half-lives";
  }
  // A whole day of 2 GPUs ended now: 2 x h/ln2 x (1 - 1/2) GPU-s.
  const UsageRecord day{"alice", now - kDayS, now, 2};
  EXPECT_NEAR(DecayedUsageGpuS(day, now, kDayS), 2 * kDayS / std::log(2.0) * 0.5, 1e-6 * kDayS);
  // A running job counts up to now only; nothing before its start.
  EXPECT_NEAR(DecayedUsageGpuS({"alice", now - 10, std::nullopt, 1}, now, 1e9), 10, 1e-3);
  EXPECT_EQ(DecayedUsageGpuS({"alice", now + 5, std::nullopt, 1}, now, kDayS), 0);
  // Kept as one number and brought forward, it is the same as computed from the record later.
  const double then = DecayedUsageGpuS(day, now, kDayS);
  EXPECT_NEAR(DecayTo(then, now, now + 3 * kDayS, kDayS), DecayedUsageGpuS(day, now + 3 * kDayS, kDayS), 1e-6);
}

TEST(DecayedUsage, SummedPerUserAndAMemShareCountsItsFractionOfAGpu) {
  EXPECT_DOUBLE_EQ(GpuShareOfRequest(2, std::nullopt, 80ULL << 30), 2);
  EXPECT_DOUBLE_EQ(GpuShareOfRequest(1, 20ULL << 30, 80ULL << 30), 0.25);
  EXPECT_DOUBLE_EQ(GpuShareOfRequest(2, 200ULL << 30, 80ULL << 30), 2) << "at most the whole GPUs";
  EXPECT_DOUBLE_EQ(GpuShareOfRequest(1, 20ULL << 30, std::nullopt), 1) << "unknown memory: the whole GPU";
  const std::vector<UsageRecord> records = {{"alice", 0, 100, 1}, {"bob", 0, 100, 0.25}, {"alice", 50, 100, 1}};
  auto by_user = DecayedUsageByUserGpuS(records, 100, 1e12);
  EXPECT_NEAR(by_user["alice"], 150, 1e-3);
  EXPECT_NEAR(by_user["bob"], 25, 1e-3);
}

TEST(Shares, OwnEntryThenLargestGroupThenOne) {
  const std::map<std::string, double> shares = {{"alice", 2}, {"@ml", 3}, {"@ops", 5}};
  EXPECT_EQ(ShareOf("alice", {"ml"}, shares), 2) << "the user's own entry wins";
  EXPECT_EQ(ShareOf("bob", {"ml"}, shares), 3);
  EXPECT_EQ(ShareOf("carol", {"ml", "ops"}, shares), 5);
  EXPECT_EQ(ShareOf("dave", {"users"}, shares), 1);
}

TEST(FairShare, FactorIsOneUnusedHalfAtTheShareAndWeightedByShares) {
  EXPECT_EQ(FairShareFactor(0, 0.5), 1);
  EXPECT_DOUBLE_EQ(FairShareFactor(0.5, 0.5), 0.5);
  EXPECT_DOUBLE_EQ(FairShareFactor(1, 0.5), 0.25);
  // Equal use, shares 2:1: the user with the larger share keeps the larger factor.
  auto table = FairShareTable({{"alice", 2}, {"bob", 1}}, {{"alice", 100}, {"bob", 100}});
  ASSERT_EQ(table.size(), 2u);
  EXPECT_EQ(table[0].user, "alice");
  EXPECT_NEAR(table[0].share_norm, 2.0 / 3, 1e-12);
  EXPECT_NEAR(table[0].factor, std::exp2(-0.5 / (2.0 / 3)), 1e-12);
  EXPECT_NEAR(table[1].factor, std::exp2(-0.5 / (1.0 / 3)), 1e-12);
  EXPECT_GT(table[0].factor, table[1].factor);
  // Use in proportion to the shares: equal factors.
  auto fair = FairShareTable({{"alice", 2}, {"bob", 1}}, {{"alice", 200}, {"bob", 100}});
  EXPECT_NEAR(fair[0].factor, fair[1].factor, 1e-12);
  // Nobody used anything: everyone 1.
  for (const auto& row : FairShareTable({{"alice", 1}, {"bob", 1}}, {})) EXPECT_EQ(row.factor, 1);
}

TEST(FairShare, AgeRaisesPriorityUpToItsCap) {
  FairShareSettings s;  // weights 1 and 1, max age 7 d
  EXPECT_DOUBLE_EQ(PriorityOf(0.5, 0, s).value, 0.5);
  EXPECT_DOUBLE_EQ(PriorityOf(0.5, 3.5 * kDayS, s).value, 0.5 + 0.5);
  EXPECT_DOUBLE_EQ(PriorityOf(0.5, 7 * kDayS, s).value, 1.5);
  EXPECT_DOUBLE_EQ(PriorityOf(0.5, 70 * kDayS, s).value, 1.5) << "capped";
  s.weight_age = 0.1;
  EXPECT_DOUBLE_EQ(PriorityOf(0.5, 7 * kDayS, s).value, 0.6);
  EXPECT_GT(PriorityOf(0.5, kHourS, s).value, PriorityOf(0.5, 0, s).value);
}

// The line the daemon's launch decision sees, from users' usage.
struct Line {
  FairShareSettings settings;
  std::vector<UsageRecord> usage;
  std::vector<QueuedJob> jobs;
  std::vector<std::pair<std::string, double>> job_user_submit;  // by position in jobs

  void Add(std::int64_t id, const std::string& user, double submit_s, int priority = 0) {
    jobs.push_back({id, priority, false, {}, {}});
    job_user_submit.push_back({user, submit_s});
  }
  std::vector<std::int64_t> Order(double now) {
    auto used = DecayedUsageByUserGpuS(usage, now, settings.half_life_s);
    std::map<std::string, double> shares;
    for (auto& [user, submit] : job_user_submit) shares[user] = ShareOf(user, {}, settings.shares);
    auto table = FairShareTable(shares, used);
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      double factor = 1;
      for (const auto& row : table)
        if (row.user == job_user_submit[i].first) factor = row.factor;
      jobs[i].fair_priority = PriorityOf(factor, now - job_user_submit[i].second, settings).value;
    }
    return PlanLaunches(jobs, [](const JobRef&) { return DependencyState::kCompleted; }, {100, 0}).launch;
  }
};

TEST(FairShareOrder, AHeavyUsersJobGoesAfterALightUsersLaterJob) {
  Line line;
  const double now = 10 * kDayS;
  line.usage = {{"alice", now - 5 * kHourS, now - kHourS, 4}, {"bob", now - 2 * kHourS, now - kHourS, 1}};
  line.Add(1, "alice", now - 600);
  line.Add(2, "alice", now - 500);
  line.Add(3, "bob", now - 10);
  EXPECT_EQ(line.Order(now), (std::vector<std::int64_t>{3, 1, 2}));
  // Without any past use, submission order.
  line.usage.clear();
  EXPECT_EQ(line.Order(now), (std::vector<std::int64_t>{1, 2, 3}));
  // Alice's use ten half-lives ago, bob's now: bob's use outweighs hers.
  line.usage = {{"alice", now - 10 * kDayS - 4 * kHourS, now - 10 * kDayS, 4}, {"bob", now - kHourS, now, 1}};
  EXPECT_EQ(line.Order(now), (std::vector<std::int64_t>{1, 2, 3}));
}

TEST(FairShareOrder, SharesLetAUserUseMoreBeforeFallingBehind) {
  Line line;
  const double now = 10 * kDayS;
  // Alice used 3 times what bob used.
  line.usage = {{"alice", now - 3 * kHourS, now, 1}, {"bob", now - kHourS, now, 1}};
  line.Add(1, "alice", now - 60);
  line.Add(2, "bob", now - 30);
  EXPECT_EQ(line.Order(now), (std::vector<std::int64_t>{2, 1})) << "equal shares: bob first";
  line.settings.shares = {{"alice", 4}};
  EXPECT_EQ(line.Order(now), (std::vector<std::int64_t>{1, 2})) << "alice's share 4: she is below it";
}

TEST(FairShareOrder, AgeLetsAnOldJobOvertakeANearTie) {
  Line line;
  const double now = 10 * kDayS;
  line.usage = {{"alice", now - 105 * 60, now, 1}, {"bob", now - 100 * 60, now, 1}};  // alice a little heavier
  line.Add(1, "alice", now - 6 * kDayS);  // old
  line.Add(2, "bob", now);
  EXPECT_EQ(line.Order(now), (std::vector<std::int64_t>{1, 2})) << "six days of age outweigh a 5 % difference in use";
  line.jobs[0].id = 1;
  line.job_user_submit[0].second = now - 600;
  EXPECT_EQ(line.Order(now), (std::vector<std::int64_t>{2, 1})) << "ten minutes do not";
  line.settings.weight_age = 0;
  EXPECT_EQ(line.Order(now), (std::vector<std::int64_t>{2, 1})) << "without the age factor the lighter user goes first";
}

TEST(FairShareOrder, NoJobWaitsLongerThanMaxAgeBehindLaterJobsOfLighterUsers) {
  Line line;
  const double now = 30 * kDayS;
  // Alice had all of the use (factor 2^-2 = 0.25); bob none (1). Her job overtakes bob's new one
  // once its age factor makes up the difference: after 0.75 x max_age (5.25 d), at the latest max_age.
  line.usage = {{"alice", now - 2 * kDayS, now, 8}};
  line.Add(1, "alice", now - 5 * kDayS);
  line.Add(2, "bob", now);
  EXPECT_EQ(line.Order(now), (std::vector<std::int64_t>{2, 1}));
  line.jobs.clear();
  line.job_user_submit.clear();
  line.Add(1, "alice", now - 5.5 * kDayS);
  line.Add(2, "bob", now);
  EXPECT_EQ(line.Order(now), (std::vector<std::int64_t>{1, 2})) << "after 5.25 d her job goes first";
}

TEST(FairShareOrder, ALoweredPriorityGoesAfterEveryFairShareOrderedJob) {
  Line line;
  const double now = 10 * kDayS;
  line.usage = {{"alice", now - 5 * kHourS, now, 4}};
  line.Add(1, "alice", now - 600);
  line.Add(2, "bob", now - 500, -1);  // bob lowered his own job
  line.Add(3, "bob", now - 400);
  EXPECT_EQ(line.Order(now), (std::vector<std::int64_t>{3, 1, 2}));
}

TEST(FairShareText, TheWaitReasonNamesPriorityUseAndTheJobAhead) {
  UserShare alice{"alice", 1, 0.5, 14.2 * kHourS, 0.9, FairShareFactor(0.9, 0.5)};
  JobPriority p = PriorityOf(alice.factor, 0, FairShareSettings{});
  EXPECT_EQ(WaitReason("alice", alice, p, JobAhead{"bob", "12", 1.0}, kDayS),
            "priority 0.287 (fair share 0.287, age 0.000): alice used 14.2 GPU-h (half-life 1 d, 90 % of all use, share "
            "50 %); behind bob's job 12 (priority 1.000)");
  EXPECT_EQ(UsageText(30), "30 GPU-s");
  EXPECT_EQ(UsageText(90), "1.5 GPU-min");
  EXPECT_EQ(HalfLifeText(12 * kHourS), "12 h");
}

}  // namespace
}  // namespace gpulane::sched
