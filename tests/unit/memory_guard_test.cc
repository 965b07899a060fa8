// telemetry/memory_guard: a job sharing a GPU by --mem is warned at the first sample over its
// declaration plus the margin, stopped once it stayed over for the grace (never with grace 0), and
// a GPU held whole or a figure not reported is never judged; on made-up times.
#include <gtest/gtest.h>

#include "telemetry/memory_guard.h"
#include "support/units.h"

namespace gpulane::telemetry {
namespace {

GuardedGpu Share(std::optional<std::uint64_t> used, std::uint64_t declared = 30 * kGiB, unsigned index = 0) {
  return {index, declared, used};
}

MemoryGuardSettings Settings(double grace_s) { return {kGiB, grace_s}; }

TEST(MemoryGuard, AJobOverItsDeclarationIsWarnedAtOnceAndStoppedOnceAfterTheGrace) {
  MemoryGuard guard("12", Settings(10));
  EXPECT_EQ(guard.Observe(0, {Share(30 * kGiB)}).action, GuardAction::kNone);
  GuardDecision warn = guard.Observe(1, {Share(45 * kGiB)});
  ASSERT_EQ(warn.action, GuardAction::kWarn);
  EXPECT_EQ(warn.message, "job 12 holds 45.0 GiB on GPU 0, over its declared 30.0 GiB (--mem) and the 1.0 GiB margin: "
                          "it is stopped in 10 s unless it frees memory");
  EXPECT_EQ(guard.Observe(5, {Share(45 * kGiB)}).action, GuardAction::kNone);
  EXPECT_EQ(guard.Observe(10.9, {Share(45 * kGiB)}).action, GuardAction::kNone);
  GuardDecision stop = guard.Observe(11, {Share(45 * kGiB)});
  ASSERT_EQ(stop.action, GuardAction::kStop);
  EXPECT_EQ(stop.message, "memory over declaration: held 46080 MiB on GPU 0, over its limit of 31744 MiB (--mem 30720 MiB + "
                          "lease.memory_margin 1024 MiB) for 10 s (anomaly.overuse_grace 10 s)");
  EXPECT_EQ(guard.Observe(12, {Share(45 * kGiB)}).action, GuardAction::kNone) << "stopped once";
}

TEST(MemoryGuard, WithinTheMarginIsNotOverAndOneByteMoreIs) {
  MemoryGuard guard("12", Settings(10));
  EXPECT_EQ(guard.Observe(0, {Share(31 * kGiB)}).action, GuardAction::kNone);
  EXPECT_EQ(guard.Observe(1, {Share(31 * kGiB + 1)}).action, GuardAction::kWarn);
}

TEST(MemoryGuard, WithGraceZeroItIsWarnedAndNeverStopped) {
  MemoryGuard guard("12", Settings(0));
  GuardDecision warn = guard.Observe(0, {Share(60 * kGiB)});
  ASSERT_EQ(warn.action, GuardAction::kWarn);
  EXPECT_NE(warn.message.find("warned only (anomaly.overuse_grace = 0)"), std::string::npos) << warn.message;
  for (double t = 1; t < 1000; t += 1) ASSERT_EQ(guard.Observe(t, {Share(60 * kGiB)}).action, GuardAction::kNone);
}

TEST(MemoryGuard, AWholeGpuIsNeverJudgedWhateverItHolds) {
  MemoryGuard guard("12", Settings(1));
  for (double t = 0; t < 100; t += 1)
    ASSERT_EQ(guard.Observe(t, {GuardedGpu{0, std::nullopt, 140 * kGiB}}).action, GuardAction::kNone);
}

TEST(MemoryGuard, BackUnderItsLineEndsTheGraceAndCrossingAgainWarnsAgain) {
  MemoryGuard guard("12", Settings(10));
  EXPECT_EQ(guard.Observe(0, {Share(45 * kGiB)}).action, GuardAction::kWarn);
  EXPECT_EQ(guard.Observe(9, {Share(20 * kGiB)}).action, GuardAction::kNone);
  EXPECT_FALSE(guard.over_since_s());
  EXPECT_EQ(guard.Observe(10, {Share(45 * kGiB)}).action, GuardAction::kWarn);
  EXPECT_EQ(guard.Observe(19, {Share(45 * kGiB)}).action, GuardAction::kNone) << "a new grace from t=10";
  EXPECT_EQ(guard.Observe(20, {Share(45 * kGiB)}).action, GuardAction::kStop);
}

TEST(MemoryGuard, AnUnknownFigureNeitherStartsNorEndsTheGrace) {
  MemoryGuard guard("12", Settings(10));
  EXPECT_EQ(guard.Observe(0, {Share(std::nullopt)}).action, GuardAction::kNone);
  EXPECT_FALSE(guard.over_since_s()) << "unknown is not over";
  EXPECT_EQ(guard.Observe(1, {Share(45 * kGiB)}).action, GuardAction::kWarn);
  EXPECT_EQ(guard.Observe(5, {Share(std::nullopt)}).action, GuardAction::kNone);
  EXPECT_EQ(guard.over_since_s(), 1) << "unknown is not under either";
  EXPECT_EQ(guard.Observe(11, {Share(45 * kGiB)}).action, GuardAction::kStop);
}

TEST(MemoryGuard, AnyOneOfItsGpusOverCountsAndIsTheOneNamed) {
  MemoryGuard guard("7", Settings(2));
  GuardDecision warn = guard.Observe(0, {Share(10 * kGiB, 30 * kGiB, 2), Share(40 * kGiB, 30 * kGiB, 5)});
  ASSERT_EQ(warn.action, GuardAction::kWarn);
  EXPECT_NE(warn.message.find("on GPU 5"), std::string::npos) << warn.message;
}

TEST(MemoryGuard, AHugeDeclarationWhoseLineOverflowsIsNeverCrossed) {
  EXPECT_FALSE(OverDeclared(GuardedGpu{0, ~0ULL - 5, ~0ULL}, kGiB));
}

}  // namespace
}  // namespace gpulane::telemetry
