// sched/lease_deadline.h: which time limit a lease has, and when a watcher outside its job acts.
#include "sched/lease_deadline.h"

#include <gtest/gtest.h>

#include <random>

namespace gpulane::sched {
namespace {

LimitsConfig LimitsOf(std::optional<double> max_s, std::optional<double> default_s) {
  LimitsConfig l;
  l.max_time_limit_s = max_s;
  l.default_time_limit_s = default_s;
  return l;
}

TEST(LeaseDeadline, TheLeasesOwnLimitBoundedByMaxElseTheDefault) {
  std::string source;
  EXPECT_EQ(EnforcedTimeLimitS(60.0, LimitsOf(std::nullopt, std::nullopt), &source), 60.0);
  EXPECT_EQ(source, "--time-limit");
  EXPECT_EQ(EnforcedTimeLimitS(600.0, LimitsOf(120.0, 20.0), &source), 120.0) << "a lease cannot ask past max_time_limit";
  EXPECT_EQ(source, "limits.max_time_limit");
  EXPECT_EQ(EnforcedTimeLimitS(std::nullopt, LimitsOf(std::nullopt, 20.0), &source), 20.0) << "a lease that says nothing";
  EXPECT_EQ(source, "limits.default_time_limit");
  EXPECT_EQ(EnforcedTimeLimitS(-5.0, LimitsOf(std::nullopt, 20.0)), 20.0) << "no limit a lease could mean";
  EXPECT_FALSE(EnforcedTimeLimitS(std::nullopt, LimitsOf(std::nullopt, std::nullopt)));
  EXPECT_FALSE(EnforcedTimeLimitS(std::nullopt, LimitsOf(3600.0, std::nullopt))) << "as at submission";
}

TEST(LeaseDeadline, AStartWrittenInTheFutureCountsFromTheFirstSight) {
  const auto d = OutsideDeadline(/*started_s=*/5000, std::nullopt, /*first_seen_s=*/1000, LimitsOf(std::nullopt, 20.0), 10);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->start_s, 1000);
  EXPECT_EQ(d->term_at_s, 1000 + 20 + 10 + kOutsideSlackS);
}

TEST(LeaseDeadline, SigtermAtTheDeadlineThenSigkillEveryGraceWhileItLives) {
  const auto d = OutsideDeadline(100, 20.0, 150, LimitsOf(std::nullopt, std::nullopt), 5);
  ASSERT_TRUE(d);
  EXPECT_EQ(ActionAt(*d, d->term_at_s - 0.01, std::nullopt, 5), LimitAction::kNone);
  EXPECT_EQ(ActionAt(*d, d->term_at_s, std::nullopt, 5), LimitAction::kTerm);
  EXPECT_EQ(ActionAt(*d, d->term_at_s + 4, d->term_at_s, 5), LimitAction::kNone);
  EXPECT_EQ(ActionAt(*d, d->term_at_s + 5, d->term_at_s, 5), LimitAction::kKill);
}

// Property: whatever a lease writes (start, limit), an outside watcher acts no later than its first
// sight + the machine's bound (max, else default) + grace + slack, and never before the lease's
// own side had its limit and grace (counted from the earliest start it is known by).
TEST(LeaseDeadline, PropertyNoLeaseOutlivesTheMachinesBoundAndNoneIsStoppedBeforeItsOwnSideCould) {
  std::mt19937_64 rng(23);
  std::uniform_real_distribution<double> t(0, 1e6), limit(-10, 1e5), grace(0, 60);
  for (int i = 0; i < 10000; ++i) {
    const double started = t(rng), seen = t(rng), g = grace(rng);
    const std::optional<double> asked = rng() % 3 ? std::optional<double>(limit(rng)) : std::nullopt;
    const LimitsConfig limits = LimitsOf(rng() % 2 ? std::optional<double>(1000) : std::nullopt,
                                       rng() % 2 ? std::optional<double>(300) : std::nullopt);
    const auto d = OutsideDeadline(started, asked, seen, limits, g);
    const bool bounded = limits.default_time_limit_s || (asked && *asked > 0);
    ASSERT_EQ(d.has_value(), bounded);
    if (!d) continue;
    const double bound = limits.max_time_limit_s ? *limits.max_time_limit_s
                         : asked && *asked > 0   ? *asked
                                                 : *limits.default_time_limit_s;
    EXPECT_LE(d->term_at_s, seen + bound + g + kOutsideSlackS + 1e-6);
    EXPECT_GE(d->term_at_s, std::min(started, seen) + d->limit_s + g);
  }
}

}  // namespace
}  // namespace gpulane::sched
