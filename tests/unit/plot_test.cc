// The policy comparison plots of `gpulane simulate --plot` (sim/plot.h): the numbers behind each
// chart on hand-computed cases, and a page that names every policy and draws one line per policy
// in each chart.
#include "sim/plot.h"

#include <gtest/gtest.h>

namespace gpulane::sim {
namespace {

Job At(double submit_s, double duration_s, unsigned gpus = 1, std::uint64_t mem_bytes = 0) {
  Job j;
  j.submit_s = submit_s;
  j.duration_s = duration_s;
  j.gpus = gpus;
  j.mem_bytes = mem_bytes;
  return j;
}

Outcome Ran(double start_s, double end_s) { return Outcome{start_s, end_s, false}; }

TEST(SimulatePlot, WaitCdfCountsEachDistinctWaitOnce) {
  const std::vector<Job> jobs = {At(0, 10), At(0, 10), At(5, 10), At(5, 10)};
  const std::vector<Outcome> runs = {Ran(0, 10), Ran(0, 10), Ran(10, 20), Ran(65, 75)};  // waits 0, 0, 5, 60
  auto cdf = WaitCdf(jobs, runs);
  ASSERT_EQ(cdf.size(), 3u);
  EXPECT_EQ(cdf[0], (std::pair<double, double>{0, 0.5}));
  EXPECT_EQ(cdf[1], (std::pair<double, double>{5, 0.75}));
  EXPECT_EQ(cdf[2], (std::pair<double, double>{60, 1.0}));
  // Thinned to at most 2 points: the first and the last stay.
  auto thin = WaitCdf(jobs, runs, 2);
  ASSERT_EQ(thin.size(), 2u);
  EXPECT_EQ(thin.front().first, 0);
  EXPECT_EQ(thin.back(), (std::pair<double, double>{60, 1.0}));
  EXPECT_TRUE(WaitCdf({}, {}).empty());
}

TEST(SimulatePlot, UtilisationOverTimeIsBusyGpuSecondsPerBinOverTheMachine) {
  // 2 GPUs, 0..100 s in 4 bins of 25 s: a 2-GPU job 0-50 s, then a half-memory share 50-100 s.
  const std::vector<Job> jobs = {At(0, 50, 2), At(0, 50, 1, 40ULL << 30)};
  const std::vector<Outcome> runs = {Ran(0, 50), Ran(50, 100)};
  double bin_s = 0;
  auto u = UtilisationOverTime(jobs, runs, 2, 80ULL << 30, 4, &bin_s);
  EXPECT_DOUBLE_EQ(bin_s, 25);
  ASSERT_EQ(u.size(), 4u);
  EXPECT_DOUBLE_EQ(u[0], 1.0);
  EXPECT_DOUBLE_EQ(u[1], 1.0);
  EXPECT_DOUBLE_EQ(u[2], 0.25) << "half of one GPU of two";
  EXPECT_DOUBLE_EQ(u[3], 0.25);
  // A job across a bin edge counts in both by its overlap.
  auto edge = UtilisationOverTime({At(0, 30)}, {Ran(10, 40)}, 1, 80ULL << 30, 2, &bin_s);
  ASSERT_EQ(edge.size(), 2u);
  EXPECT_DOUBLE_EQ(bin_s, 20);
  EXPECT_DOUBLE_EQ(edge[0], 0.5);
  EXPECT_DOUBLE_EQ(edge[1], 1.0);
}

TEST(SimulatePlot, ThePageNamesEveryPolicyAndDrawsALinePerPolicyInEachChart) {
  const std::vector<Job> jobs = {At(0, 10), At(1, 10)};
  const std::vector<PolicySeries> series = {{"fifo", {Ran(0, 10), Ran(10, 20)}}, {"easy", {Ran(0, 10), Ran(1, 11)}}};
  const std::string html = PlotHtml("trace <small> & test", jobs, series, 1, 80ULL << 30);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("trace &lt;small&gt; &amp; test"), std::string::npos) << "the title is escaped";
  EXPECT_NE(html.find("&#9632; fifo"), std::string::npos);
  EXPECT_NE(html.find("&#9632; easy"), std::string::npos);
  std::size_t lines = 0;
  for (std::size_t at = html.find("<polyline"); at != std::string::npos; at = html.find("<polyline", at + 1)) ++lines;
  EXPECT_EQ(lines, 4u) << "two charts x two policies";
  EXPECT_EQ(html.find("<script"), std::string::npos) << "no script: opens anywhere";
}

}  // namespace
}  // namespace gpulane::sim
