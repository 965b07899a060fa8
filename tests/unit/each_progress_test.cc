#include "render/each_progress.h"

#include <gtest/gtest.h>

namespace gpulane {
namespace {

TEST(EstimateEtaS, UnknownBeforeAnyLineEnded) {
  EXPECT_FALSE(EstimateEtaS({}, {5, 5}, 6, 2).has_value());
}

TEST(EstimateEtaS, SpreadsTheMeanOverTheSlots) {
  // Mean 10 s; 4 lines not running on 2 slots: 20 s.
  EXPECT_DOUBLE_EQ(*EstimateEtaS({8, 12}, {}, 4, 2), 20);
  // Two running lines 4 s and 6 s in (6 + 4 s left), 2 more to start: (10 + 20) / 2.
  EXPECT_DOUBLE_EQ(*EstimateEtaS({10}, {4, 6}, 2, 2), 15);
  // More slots than lines: each line runs at once; the longest rest decides.
  EXPECT_DOUBLE_EQ(*EstimateEtaS({10}, {1}, 1, 8), 10);
}

TEST(EstimateEtaS, RunningLinesPastTheMeanCountNothingAndNothingLeftIsZero) {
  EXPECT_DOUBLE_EQ(*EstimateEtaS({10}, {30}, 0, 4), 0);
  EXPECT_DOUBLE_EQ(*EstimateEtaS({10}, {}, 0, 4), 0);
  EXPECT_DOUBLE_EQ(*EstimateEtaS({10}, {}, 3, 0), 30) << "no slots count as one";
}

TEST(EachProgressLine, CountsAndEta) {
  EachCounts c{8, 3, 1, 2, 1};
  EXPECT_EQ(EachProgressLine(c, 130), "3/8 done, 2 running, 2 waiting, 1 failed, ETA 2m 10s")
      << "waiting: those in the lease line and those not started";
  EXPECT_EQ(EachProgressLine(c, std::nullopt), "3/8 done, 2 running, 2 waiting, 1 failed, ETA unknown");
  EXPECT_EQ(EachProgressLine(EachCounts{8, 7, 1, 0, 0}, 0), "7/8 done, 0 running, 0 waiting, 1 failed") << "all ended: no ETA";
}

TEST(EachSummaryLine, NamesTheFailedLines) {
  EXPECT_EQ(EachSummaryLine(EachCounts{8, 8}, {}), "8 lines: all 8 done");
  EXPECT_EQ(EachSummaryLine(EachCounts{8, 7, 1}, {9}), "8 lines: 7 done, 1 failed (line 9)");
  EXPECT_EQ(EachSummaryLine(EachCounts{5, 1, 2}, {3, 4}), "5 lines: 1 done, 2 failed, 2 not run (lines 3, 4)");
  std::vector<int> many;
  for (int i = 1; i <= 12; ++i) many.push_back(i);
  EXPECT_EQ(EachSummaryLine(EachCounts{12, 0, 12}, many), "12 lines: 0 done, 12 failed (lines 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, ...)");
  EXPECT_EQ(EachSummaryLine(EachCounts{1, 1}, {}), "1 line: all 1 done");
}

}  // namespace
}  // namespace gpulane
