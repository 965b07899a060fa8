// Bars and sparklines (render/gauges.h) and terminal column widths (util/display_width.h): exact
// widths whatever the value, scaling, and unknown values drawn as unknown, never as 0.
#include "render/gauges.h"

#include <gtest/gtest.h>

#include "util/display_width.h"

namespace gpulane {
namespace {

TEST(DisplayWidth, CountsColumnsNotBytesAndCutsBetweenCharacters) {
  EXPECT_EQ(DisplayColumns("abc"), 3u);
  EXPECT_EQ(DisplayColumns("█▁°"), 3u);      // three bytes each, one column each
  EXPECT_EQ(DisplayColumns("漢字"), 4u);      // wide
  EXPECT_EQ(DisplayColumns("e\xcc\x81"), 1u);  // e + combining acute
  EXPECT_EQ(PrefixOfColumns("漢字x", 3), "漢");  // the second would need columns 3 and 4
  EXPECT_EQ(FitColumns("alice", 8), "alice   ");
  EXPECT_EQ(FitColumns("alice", 8, true), "   alice");
  EXPECT_EQ(FitColumns("a-very-long-name", 6), "a-ver~");
  EXPECT_EQ(FitColumns("漢字漢字", 4), "漢~ ");  // 4 columns, a wide character never split
  EXPECT_EQ(DisplayColumns(FitColumns("漢字漢字", 4)), 4u);
  EXPECT_EQ(FitColumns("x", 0), "");
}

TEST(Bar, FillsItsWidthExactlyAndShowsUnknownAsNotAvailable) {
  for (double f : {0.0, 0.07, 0.5, 0.999, 1.0, 1.7, -3.0})
    for (std::size_t cells : {1u, 4u, 17u}) {
      EXPECT_EQ(DisplayColumns(BarCells(f, cells, true)), cells) << f << " " << cells;
      EXPECT_EQ(DisplayColumns(BarCells(f, cells, false)), cells) << f << " " << cells;
    }
  EXPECT_EQ(BarCells(0.0, 4, true), "    ");
  EXPECT_EQ(BarCells(1.0, 4, true), "████");
  EXPECT_EQ(BarCells(0.5, 4, false), "||  ");
  EXPECT_EQ(BarCells(0.55, 4, true), "██▏ ");  // 2.2 cells: two full, an eighth for the rest
  EXPECT_EQ(BarCells(std::nullopt, 6, true), "n/a   ");
  EXPECT_NE(BarCells(std::nullopt, 6, true), BarCells(0.0, 6, true)) << "unknown is not 0";
}

TEST(Sparkline, ScalesToItsMaximumOneCellPerTimeSlice) {
  // 4 cells of 10 s over [0, 40): 0, 50, 100 % and a value above the scale, clamped.
  std::vector<SparkPoint> points = {{1, 0.0}, {12, 40.0}, {18, 60.0}, {25, 100.0}, {35, 250.0}};
  EXPECT_EQ(Sparkline(points, {0, 40, 4, 100}, true), "▁▅██");
  EXPECT_EQ(Sparkline(points, {0, 40, 4, 100}, false), "_=##");
  // The same readings against twice the scale: half as high.
  EXPECT_EQ(Sparkline(points, {0, 40, 4, 200}, true), "▁▃▅█");
  // Memory in bytes against the GPU's total.
  EXPECT_EQ(Sparkline({{5, 70.0e9}}, {0, 10, 1, 140e9}, true), "▅");
}

TEST(Sparkline, UnknownReadingsAreQuestionMarksAndTimeWithoutReadingsIsBlank) {
  std::vector<SparkPoint> points = {{12, std::nullopt}, {25, 0.0}};
  // Cell 0: no reading (history starts later); 1: a reading without a value; 2: 0 %; 3: nothing.
  EXPECT_EQ(Sparkline(points, {0, 40, 4, 100}, true), " ?▁ ");
  // Readings every 15 s in cells of 10 s: a cell between two holds the earlier one.
  EXPECT_EQ(Sparkline({{1, 100.0}, {16, 100.0}, {31, 100.0}}, {0, 40, 4, 100, 15}, true), "████");
  EXPECT_EQ(Sparkline({{1, 100.0}, {31, 100.0}}, {0, 40, 4, 100, 15}, true), "█  █") << "30 s apart: a gap";
  EXPECT_EQ(DisplayColumns(Sparkline({}, {0, 60, 25, 100}, true)), 25u);
  EXPECT_EQ(Sparkline({{1, 5.0}}, {0, 40, 4, 0}, true), "    ") << "no scale: nothing drawn, nothing made up";
}

}  // namespace
}  // namespace gpulane
