// telemetry/: the in-memory ring, the downsampled history rows and per-job accounting, on
// made-up times (no clock).
#include <gtest/gtest.h>

#include "telemetry/history.h"
#include "telemetry/job_usage.h"

namespace gpulane::telemetry {
namespace {

GpuPoint Point(double t, std::optional<std::uint16_t> util, std::optional<std::uint64_t> mem = std::nullopt,
               std::optional<std::uint64_t> energy_mj = std::nullopt) {
  GpuPoint p;
  p.time_s = t;
  p.reading.util_gpu_pct = util;
  p.reading.memory_used_bytes = mem;
  p.reading.energy_mj = energy_mj;
  return p;
}

TEST(GpuRing, KeepsTheNewestPointsOldestFirst) {
  GpuRing ring(3);
  EXPECT_FALSE(ring.Latest());
  for (int t = 1; t <= 5; ++t) ring.Push(Point(t, t * 10));
  auto all = ring.Since(0);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].time_s, 3);
  EXPECT_EQ(all[2].time_s, 5);
  EXPECT_EQ(ring.Latest()->reading.util_gpu_pct, 50);
  EXPECT_EQ(ring.Since(4.5).size(), 1u);
}

TEST(Downsampler, ARowPerBucketWithMeansOverTheSamplesThatReportedTheField) {
  Downsampler d(10);
  EXPECT_FALSE(d.Add(Point(100, 20, 1000, 5000)));
  EXPECT_FALSE(d.Add(Point(104, std::nullopt, 3000)));  // utilisation not reported this time
  GpuPoint busy = Point(109.5, 60, std::nullopt, 9000);
  busy.reading.clocks_event_reasons = 0x20;
  busy.reading.xid_errors = 1;
  EXPECT_FALSE(d.Add(busy));
  auto row = d.Add(Point(110, 0));  // the next bucket starts: the first one is done
  ASSERT_TRUE(row);
  EXPECT_EQ(row->start_s, 100);
  EXPECT_EQ(row->length_s, 10);
  EXPECT_EQ(row->samples, 3u);
  EXPECT_DOUBLE_EQ(*row->util_gpu_mean_pct, 40);
  EXPECT_DOUBLE_EQ(*row->util_gpu_max_pct, 60);
  EXPECT_DOUBLE_EQ(*row->memory_used_mean_bytes, 2000);
  EXPECT_DOUBLE_EQ(*row->memory_used_max_bytes, 3000);
  EXPECT_EQ(row->energy_mj, 9000u) << "the counter's last reading";
  EXPECT_FALSE(row->power_mean_mw) << "no sample reported power: absent, not 0";
  EXPECT_EQ(row->clocks_event_reasons, 0x20u);
  EXPECT_EQ(row->xid_errors, 1u);
  auto last = d.Flush();
  ASSERT_TRUE(last);
  EXPECT_EQ(last->start_s, 110);
  EXPECT_EQ(last->samples, 1u);
  EXPECT_FALSE(d.Flush());
}

TEST(JobMeter, AWholeGpuJobsUsageFromItsSamples) {
  JobMeter meter({1.0, 1.0});
  // Ten samples a second apart; GPU 0 busy, GPU 1 idle for the first four.
  for (int s = 0; s < 10; ++s) {
    JobGpuObservation g0{90.0, 10ULL << 30, 1000000ULL + s * 500000ULL};  // 500 J a second
    JobGpuObservation g1{s < 4 ? 0.0 : 80.0, (s + 1ULL) << 30, 2000000ULL + s * 100000ULL};
    meter.Observe({g0, g1});
  }
  JobUsage u = meter.Summary(1000, 1000 + 3600, 30);
  EXPECT_EQ(u.samples, 10u);
  EXPECT_DOUBLE_EQ(u.gpus, 2);
  EXPECT_DOUBLE_EQ(u.run_s, 3600);
  EXPECT_DOUBLE_EQ(u.gpu_s, 7200);
  EXPECT_DOUBLE_EQ(*u.wait_s, 30);
  ASSERT_TRUE(u.energy_j);
  EXPECT_DOUBLE_EQ(*u.energy_j, 9 * 500 + 9 * 100) << "between the first and the last sample";
  EXPECT_EQ(u.peak_memory_bytes, 20ULL << 30);
  EXPECT_DOUBLE_EQ(*u.mean_memory_bytes, (10.0 + 5.5) * (1ULL << 30));
  EXPECT_DOUBLE_EQ(*u.mean_util_pct, (10 * 90.0 + 6 * 80.0) / 20);
  EXPECT_DOUBLE_EQ(*u.p10_util_pct, 0) << "4 of 20 pairs idle";
  EXPECT_DOUBLE_EQ(*u.idle_fraction, 0.2);
  EXPECT_EQ(UsageLine("12", u), "job 12 used 2 GPUs for 1h 00m, 2.0 GPU-h, 1.5 Wh, peak 20.0 GiB, mean util 69 %, idle 20 %");
}

TEST(JobMeter, ASharedGpuCountsAsItsFractionAndUnknownFiguresStayUnknown) {
  JobMeter meter({0.25});
  meter.Observe({JobGpuObservation{std::nullopt, std::nullopt, 1000}});
  meter.Observe({JobGpuObservation{std::nullopt, std::nullopt, 401000}});
  JobUsage u = meter.Summary(0, 7200, std::nullopt);
  EXPECT_DOUBLE_EQ(u.gpus, 0.25);
  EXPECT_DOUBLE_EQ(u.gpu_s, 1800);
  EXPECT_DOUBLE_EQ(*u.energy_j, 100) << "a quarter of the GPU's 400 J";
  EXPECT_FALSE(u.mean_util_pct) << "no per-process figure on a shared GPU: unknown, not 0";
  EXPECT_FALSE(u.idle_fraction);
  EXPECT_FALSE(u.peak_memory_bytes);
  EXPECT_FALSE(u.wait_s);
  EXPECT_EQ(UsageLine("r4121", u), "job r4121 used 0.25 of a GPU for 2h 00m, 0.5 GPU-h, 100 J");
}

TEST(JobMeter, EnergyIsUnknownWhenAnyGpuDoesNotReportItAndSurvivesACounterReset) {
  JobMeter partial({1.0, 1.0});
  partial.Observe({JobGpuObservation{50.0, 1, 100}, JobGpuObservation{50.0, 1, std::nullopt}});
  partial.Observe({JobGpuObservation{50.0, 1, 200}, JobGpuObservation{50.0, 1, std::nullopt}});
  EXPECT_FALSE(partial.Summary(0, 2, std::nullopt).energy_j);

  JobMeter reset({1.0});
  reset.Observe({JobGpuObservation{50.0, 1, 5000}});
  reset.Observe({JobGpuObservation{50.0, 1, 7000}});
  reset.Observe({JobGpuObservation{50.0, 1, 100}});  // the driver reloaded: the counter restarts
  reset.Observe({JobGpuObservation{50.0, 1, 1100}});
  EXPECT_DOUBLE_EQ(*reset.Summary(0, 4, std::nullopt).energy_j, 3);
}

TEST(JobMeter, OneSampleGivesNoEnergy) {
  JobMeter meter({1.0});
  meter.Observe({JobGpuObservation{100.0, 1, 5000}});
  JobUsage u = meter.Summary(0, 1, std::nullopt);
  EXPECT_FALSE(u.energy_j);
  EXPECT_DOUBLE_EQ(*u.mean_util_pct, 100);
  EXPECT_DOUBLE_EQ(*u.idle_fraction, 0);
}

}  // namespace
}  // namespace gpulane::telemetry
