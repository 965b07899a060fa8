// telemetry/anomaly: each rule raises its anomaly once its condition has lasted its threshold, ends
// it when the condition ends (or the job or GPU is gone), and drains a GPU only for Xid errors and
// failures; on made-up times, one observation per "sample".
#include <cmath>

#include <gtest/gtest.h>

#include "telemetry/anomaly.h"
#include "support/units.h"

namespace gpulane::telemetry {
namespace {

GpuState Gpu(unsigned index = 1) {
  GpuState g;
  g.uuid = "GPU-" + std::to_string(index);
  g.index = index;
  g.memory_used_bytes = kGiB;
  g.process_memory_bytes = kGiB;
  return g;
}

JobGpuState Job(std::optional<double> util, std::optional<std::uint64_t> memory = 4 * kGiB) {
  JobGpuState j;
  j.job_id = "12";
  j.user = "alice";
  j.lease = "lease-12";
  j.gpu_uuid = "GPU-1";
  j.gpu_index = 1;
  j.util_pct = util;
  j.memory_bytes = memory;
  return j;
}

bool Has(const AnomalyDetector& d, const std::string& kind) {
  for (const auto& [key, a] : d.current())
    if (a.kind == kind) return true;
  return false;
}

TEST(Anomaly, AnIdleLeaseIsRaisedAfterItsThresholdOnceAndEndsWhenTheJobWorks) {
  AnomalySettings s;
  s.idle_after_s = 600;
  AnomalyDetector d(s);
  std::size_t raised = 0;
  for (double t = 0; t <= 590; t += 10) raised += d.Observe(t, {Gpu()}, {Job(2)}).started.size();
  EXPECT_EQ(raised, 0u) << "9m 50s idle is not yet 10 min";
  auto c = d.Observe(600, {Gpu()}, {Job(2)});
  ASSERT_EQ(c.started.size(), 1u);
  EXPECT_EQ(c.started[0].kind, "idle");
  EXPECT_EQ(c.started[0].message, "job 12 (alice) has used GPU 1 under 5 % for 10m 00s: data loading, a hang, or a session left open?");
  EXPECT_FALSE(c.started[0].drains);
  EXPECT_TRUE(d.Observe(610, {Gpu()}, {Job(2)}).started.empty()) << "raised once";
  c = d.Observe(620, {Gpu()}, {Job(60)});
  ASSERT_EQ(c.ended.size(), 1u);
  EXPECT_FALSE(Has(d, "idle"));
  EXPECT_TRUE(d.Observe(630, {Gpu()}, {Job(std::nullopt)}).started.empty()) << "unknown utilisation is not idle";
}

TEST(Anomaly, AJobStuckAtFullUseIsRaisedOnlyWhileItsMemoryDoesNotMove) {
  AnomalySettings s;
  s.stuck_after_s = 3600;
  AnomalyDetector d(s);
  for (double t = 0; t < 3000; t += 60) d.Observe(t, {Gpu()}, {Job(100, 8 * kGiB)});
  d.Observe(3000, {Gpu()}, {Job(100, 8 * kGiB + 1)});  // it allocated: working
  for (double t = 3060; t < 3000 + 3600; t += 60) EXPECT_TRUE(d.Observe(t, {Gpu()}, {Job(100, 8 * kGiB + 1)}).started.empty());
  auto c = d.Observe(3000 + 3600, {Gpu()}, {Job(100, 8 * kGiB + 1)});
  ASSERT_EQ(c.started.size(), 1u);
  EXPECT_EQ(c.started[0].kind, "stuck");
  c = d.Observe(7000, {Gpu()}, {Job(100, 9 * kGiB)});
  EXPECT_EQ(c.ended.size(), 1u) << "its memory moved again";
}

TEST(Anomaly, MemoryGrowingSteadilyOverTheWindowIsALeakAndASawtoothIsNot) {
  AnomalySettings s;
  s.leak_window_s = 1800;
  s.leak_min_growth_bytes = kGiB;
  AnomalyDetector leak(s), saw(s);
  bool raised = false;
  for (double t = 0; t <= 1800; t += 60) {
    const auto grown = static_cast<std::uint64_t>(10 * kGiB + t / 1800 * 3 * kGiB);
    raised = raised || !leak.Observe(t, {Gpu()}, {Job(90, grown)}).started.empty();
    // Climbs and frees again every 5 minutes: a cache, not a leak.
    const auto tooth = static_cast<std::uint64_t>(10 * kGiB + std::fmod(t, 300) / 300 * 3 * kGiB);
    EXPECT_TRUE(saw.Observe(t, {Gpu()}, {Job(90, tooth)}).started.empty()) << t;
  }
  EXPECT_TRUE(raised);
  ASSERT_TRUE(Has(leak, "leak"));
  // Raised once the points span 90 % of the window (27 of 30 minutes).
  EXPECT_EQ(leak.current().begin()->second.message,
            "job 12 (alice)'s memory on GPU 1 grew steadily from 10.0 GiB to 12.7 GiB in 27m 00s: a leak (tensors kept "
            "across steps, a growing cache)?")
      << leak.current().begin()->second.message;
}

TEST(Anomaly, GhostMemoryThrottlingAndForeignProcesses) {
  AnomalySettings s;
  s.ghost_min_bytes = 2 * kGiB;
  s.ghost_after_s = 120;
  s.throttle_after_s = 60;
  AnomalyDetector d(s);
  GpuState g = Gpu();
  g.memory_used_bytes = 12 * kGiB;  // 11 GiB that no listed process holds
  g.clocks_event_reasons = 0x40;    // hardware thermal slowdown
  JobGpuState j = Job(50);
  j.foreign = {"bob's python (pid 77)"};
  auto c = d.Observe(0, {g}, {j});
  EXPECT_TRUE(c.started.empty()) << "a foreign process is raised when seen twice in a row";
  c = d.Observe(60, {g}, {j});
  ASSERT_EQ(c.started.size(), 2u);
  EXPECT_EQ(c.started[0].kind, "throttle");
  EXPECT_EQ(c.started[0].message, "GPU 1 is slowed to protect itself (hw thermal slowdown): check its cooling and power supply");
  EXPECT_EQ(c.started[1].kind, "foreign");
  EXPECT_EQ(c.started[1].message, "bob's python (pid 77) runs on GPU 1, which job 12 (alice) holds: a program using a GPU by "
                                  "a fixed index (CUDA_VISIBLE_DEVICES unset)?");
  c = d.Observe(120, {g}, {j});
  ASSERT_EQ(c.started.size(), 1u);
  EXPECT_EQ(c.started[0].kind, "ghost");
  EXPECT_NE(c.started[0].message.find("GPU 1 has 11.0 GiB in use that no process accounts for"), std::string::npos);
  g.process_memory_bytes.reset();  // the process list unknown: no ghost can be told
  j.foreign.clear();
  c = d.Observe(180, {g}, {j});
  EXPECT_EQ(c.ended.size(), 2u) << "ghost and foreign over";
  EXPECT_TRUE(Has(d, "throttle"));
}

TEST(Anomaly, AnXidDrainsItsGpuUntilItsClearTimePassesWithoutAnother) {
  AnomalySettings s;
  s.xid_clear_after_s = 600;
  AnomalyDetector d(s);
  GpuState g = Gpu();
  g.xids = {79};
  auto c = d.Observe(0, {g}, {});
  ASSERT_EQ(c.started.size(), 1u);
  EXPECT_TRUE(c.started[0].drains);
  EXPECT_EQ(d.Drained().count("GPU-1"), 1u);
  g.xids.clear();
  d.Observe(300, {g}, {});
  g.xids = {48};
  c = d.Observe(400, {g}, {});
  ASSERT_EQ(c.started.size(), 1u) << "a new Xid is a new event";
  EXPECT_NE(c.started[0].message.find("Xid 48"), std::string::npos);
  g.xids.clear();
  EXPECT_EQ(d.Observe(999, {g}, {}).ended.size(), 0u);
  EXPECT_EQ(d.Observe(1000, {g}, {}).ended.size(), 1u) << "600 s after the last one";
  EXPECT_TRUE(d.Drained().empty());
}

TEST(Anomaly, ALostGpuIsDrainedWhileItFailsAndAJobsAnomaliesEndWithTheJob) {
  AnomalySettings s;
  s.idle_after_s = 10;
  AnomalyDetector d(s);
  GpuState lost = Gpu(0);
  lost.failed = true;
  lost.failure = "NVML_ERROR_GPU_IS_LOST";
  d.Observe(0, {lost, Gpu()}, {Job(0)});
  d.Observe(10, {lost, Gpu()}, {Job(0)});
  EXPECT_TRUE(Has(d, "gpu_lost"));
  EXPECT_TRUE(Has(d, "idle"));
  EXPECT_EQ(d.Drained().at("GPU-0"),
            "GPU 0 failed (NVML_ERROR_GPU_IS_LOST): it takes no new jobs while it does; check dmesg and nvidia-smi (a reset or "
            "a reboot may be needed)");
  auto c = d.Observe(20, {Gpu(0), Gpu()}, {});  // the GPU reads again; the job has ended
  EXPECT_EQ(c.ended.size(), 2u);
  EXPECT_TRUE(d.current().empty());
}

}  // namespace
}  // namespace gpulane::telemetry

namespace gpulane::telemetry {
namespace {

TEST(Anomaly, WithIdleActionCancelAJobIdlePastItsWarningAndTheGraceIsCancelledOnce) {
  AnomalySettings s;
  s.idle_after_s = 600;
  s.idle_cancel_after_s = 3600;
  AnomalyDetector d(s);
  std::size_t cancels = 0;
  for (double t = 0; t < 4200; t += 60) cancels += d.Observe(t, {Gpu()}, {Job(1)}).cancels.size();
  EXPECT_EQ(cancels, 0u) << "warned at 10 min, not yet 70 min";
  auto c = d.Observe(4200, {Gpu()}, {Job(1)});
  ASSERT_EQ(c.cancels.size(), 1u);
  EXPECT_EQ(c.cancels[0].job_id, "12");
  EXPECT_EQ(c.cancels[0].message, "cancelled: GPU 1 idle (under 5 %) for 1h 10m, past its warning and the 1h 00m "
                                  "anomaly.idle_cancel_after allows");
  EXPECT_TRUE(d.Observe(4260, {Gpu()}, {Job(1)}).cancels.empty()) << "once";

  AnomalyDetector warn_only(AnomalySettings{});
  for (double t = 0; t < 86400; t += 600) EXPECT_TRUE(warn_only.Observe(t, {Gpu()}, {Job(1)}).cancels.empty());
}

}  // namespace
}  // namespace gpulane::telemetry
