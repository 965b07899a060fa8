// daemon::Sampler on made-up snapshots and times: history points and rows per GPU, a lease's use
// metered from its own processes only, a usage record when the lease is gone, anomalies fed.
#include <gtest/gtest.h>

#include "daemon/sampler.h"
#include "support/units.h"

namespace gpulane::daemon {
namespace {

GpuSnapshot TwoGpus(unsigned util0, std::uint64_t energy0_mj) {
  GpuSnapshot s;
  for (unsigned i = 0; i < 2; ++i) {
    GpuDevice d;
    d.pci_index = d.nvml_index = i;
    d.uuid = "GPU-" + std::to_string(i);
    d.memory_total_bytes = 100 * kGiB;
    d.memory_used_bytes = 0;
    d.utilization_gpu_pct = i == 0 ? util0 : 0;
    if (i == 0) d.energy_mj = energy0_mj;
    d.processes.emplace();
    s.devices.push_back(d);
  }
  GpuProcess mine;
  mine.pid = 100;
  mine.used_memory_bytes = 6 * kGiB;
  mine.user = "alice";
  mine.command = "python";
  GpuProcess other;
  other.pid = 200;
  other.used_memory_bytes = 1 * kGiB;
  other.user = "bob";
  other.command = "python";
  s.devices[0].processes->push_back(mine);
  s.devices[0].processes->push_back(other);
  s.devices[0].memory_used_bytes = 7 * kGiB;
  return s;
}

lease::LeaseRecord Lease() {
  lease::LeaseRecord l;
  l.name = "lease-a";
  l.job_id = "12";
  l.uid = 1000;
  l.user = "alice";
  l.label = "train";
  l.gpus = {{"GPU-0", std::nullopt}};
  l.started_s = 1000;
  l.requested_s = 940;
  return l;
}

TEST(Sampler, MetersALeaseFromItsOwnProcessesAndRecordsItsUseWhenItEnds) {
  SamplerSettings settings;
  settings.anomaly.idle_after_s = 1e9;
  Sampler sampler(settings);
  const std::vector<std::vector<int>> owners = {{0, -1}, {}};  // pid 100 is the lease's, pid 200 foreign
  for (int k = 0; k < 10; ++k) {
    auto out = sampler.Take(1000 + 10 * k, TwoGpus(80, 1000000 + k * 250000ULL), {Lease()}, owners);
    EXPECT_TRUE(out.finished.empty());
    if (k == 1) {
      ASSERT_EQ(out.anomalies.started.size(), 1u) << "bob's process on alice's whole GPU, seen twice";
      EXPECT_EQ(out.anomalies.started[0].kind, "foreign");
    }
  }
  ASSERT_EQ(sampler.live().count("lease-a"), 1u);
  const LiveJobGpu& g = sampler.live().at("lease-a").gpus.at(0);
  EXPECT_EQ(g.memory_bytes, 6 * kGiB) << "its own process only";
  EXPECT_EQ(g.util_pct, 80) << "a whole GPU: the GPU's figure";
  EXPECT_EQ(g.foreign, std::vector<std::string>{"bob's python (pid 200)"});
  EXPECT_EQ(sampler.Points("GPU-0", 0).size(), 10u);

  // The lease is gone at the next sample: its record, once.
  auto out = sampler.Take(1100, TwoGpus(0, 4000000), {}, {{-1, -1}, {}});
  ASSERT_EQ(out.finished.size(), 1u);
  const telemetry::UsageRecord& r = out.finished[0];
  EXPECT_EQ(r.job_id, "12");
  EXPECT_EQ(r.gpu_indices, std::vector<unsigned>{0});
  EXPECT_DOUBLE_EQ(r.usage.run_s, 100);
  EXPECT_DOUBLE_EQ(*r.usage.wait_s, 60);
  EXPECT_DOUBLE_EQ(*r.usage.energy_j, 9 * 250.0);
  EXPECT_EQ(r.usage.peak_memory_bytes, 6 * kGiB);
  EXPECT_DOUBLE_EQ(*r.usage.mean_util_pct, 80);
  EXPECT_EQ(out.anomalies.ended.size(), 1u) << "the foreign anomaly ends with the job";
  EXPECT_TRUE(sampler.live().empty());
  ASSERT_TRUE(sampler.UsageOf("lease-a", 1101)) << "still answerable just after";
  EXPECT_TRUE(sampler.Take(1110, TwoGpus(0, 4000000), {}, {{-1, -1}, {}}).finished.empty());
  // History rows of the finished 10-second buckets.
  auto rows = sampler.Flush();
  EXPECT_FALSE(rows.empty());
}

// A job's usage line in its log (asked as its lease ends) said 3.0 s where `show` later said 4.0 s:
// the record ended at the sample that found the lease gone. The owner's "ending" ends it then.
TEST(Sampler, ALeaseItsOwnerSaysIsEndingIsRecordedAsEndedThenNotAtTheNextSample) {
  SamplerSettings settings;
  settings.anomaly.idle_after_s = 1e9;
  Sampler sampler(settings);
  const std::vector<std::vector<int>> owners = {{0, -1}, {}};
  sampler.Take(1000, TwoGpus(80, 1000000), {Lease()}, owners);
  sampler.Take(1010, TwoGpus(80, 1250000), {Lease()}, owners);
  EXPECT_FALSE(sampler.NoteEnding("lease-a", 1001, 1012.5)) << "another user's lease";
  EXPECT_FALSE(sampler.NoteEnding("lease-b", 1000, 1012.5)) << "no such live lease";
  EXPECT_TRUE(sampler.NoteEnding("lease-a", 1000, 1012.5));
  EXPECT_TRUE(sampler.NoteEnding("lease-a", 0, 1013)) << "root may; the first word stands";
  EXPECT_DOUBLE_EQ(sampler.UsageOf("lease-a", 1014)->usage.run_s, 12.5) << "as the log's line says it";
  auto out = sampler.Take(1020, TwoGpus(0, 1500000), {}, {{-1, -1}, {}});
  ASSERT_EQ(out.finished.size(), 1u);
  EXPECT_DOUBLE_EQ(out.finished[0].usage.run_s, 12.5) << "not 20: the sample that found it gone";
  EXPECT_DOUBLE_EQ(sampler.UsageOf("lease-a", 1021)->usage.run_s, 12.5);
}

// A job shorter than one sample had no usage record, and `report` left it out silently. Ended by
// its owner before a sample saw it, it is recorded with what is known: start, end, GPU-seconds.
TEST(Sampler, ALeaseThatEndsBeforeAnySampleSawItIsRecordedWithoutSampledFigures) {
  Sampler sampler(SamplerSettings{});
  sampler.Take(999, TwoGpus(80, 1000000), {}, {{-1, -1}, {}});
  lease::LeaseRecord shared = Lease();
  shared.gpus = {{"GPU-0", 25 * kGiB}};  // a quarter of the GPU
  EXPECT_FALSE(sampler.NoteEnding("lease-a", 1000, 1000.4)) << "no sample saw it";
  auto record = sampler.EndUnsampled(shared, 1000.4);
  ASSERT_TRUE(record);
  EXPECT_EQ(record->job_id, "12");
  EXPECT_EQ(record->gpu_indices, std::vector<unsigned>{0});
  EXPECT_NEAR(record->usage.run_s, 0.4, 1e-9);
  EXPECT_NEAR(record->usage.gpu_s, 0.1, 1e-9) << "its quarter of one GPU for 0.4 s";
  EXPECT_EQ(record->usage.samples, 0u);
  EXPECT_FALSE(record->usage.mean_util_pct) << "unknown, not 0 %";
  EXPECT_FALSE(record->usage.peak_memory_bytes);
  ASSERT_TRUE(sampler.UsageOf("lease-a", 1001));
  EXPECT_FALSE(sampler.EndUnsampled(shared, 1000.5)) << "recorded once";
  // The lease file is still there at the next sample (released just after): not metered again.
  auto out = sampler.Take(1001, TwoGpus(80, 1250000), {shared}, {{0, -1}, {}});
  EXPECT_TRUE(sampler.live().empty());
  EXPECT_TRUE(sampler.Take(1002, TwoGpus(80, 1500000), {}, {{-1, -1}, {}}).finished.empty());
  EXPECT_TRUE(out.finished.empty());
}

TEST(Sampler, ASharedLeaseCountsItsFractionAndItsProcessesUtilisationOnly) {
  Sampler sampler(SamplerSettings{});
  lease::LeaseRecord l = Lease();
  l.gpus = {{"GPU-0", 25 * kGiB}};  // a quarter of the GPU
  GpuSnapshot s = TwoGpus(90, 0);
  (*s.devices[0].processes)[0].sm_util_pct = 30;
  (*s.devices[0].processes)[1].sm_util_pct = 60;
  sampler.Take(1000, s, {l}, {{0, -1}, {}});
  const LiveJobGpu& g = sampler.live().at("lease-a").gpus.at(0);
  EXPECT_EQ(g.util_pct, 30) << "its process's SM share, not the GPU's 90 %";
  EXPECT_FALSE(g.whole);
  auto record = sampler.UsageOf("lease-a", 1000 + 3600);
  ASSERT_TRUE(record);
  EXPECT_DOUBLE_EQ(record->usage.gpus, 0.25);
  EXPECT_DOUBLE_EQ(record->usage.gpu_s, 900);
}

// A --mem job on a GPU whose per-process utilisation NVML does not report: its use is unknown,
// never 0 % and idle, at no sample: not while its process runs, nor before its process appears
// (a new user saw "mean util 0 %, idle 100 %" for a job that kept its GPU at 50 %).
TEST(Sampler, ASharedLeaseOnAGpuWithoutPerProcessFiguresHasNoUtilisationNotZero) {
  Sampler sampler(SamplerSettings{});
  lease::LeaseRecord l = Lease();
  l.gpus = {{"GPU-1", 10 * kGiB}};
  GpuSnapshot before = TwoGpus(0, 0);  // GPU 1: nothing on it yet
  before.devices[1].utilization_gpu_pct = 0;
  sampler.Take(1000, before, {l}, {{-1, -1}, {}});
  EXPECT_FALSE(sampler.live().at("lease-a").gpus.at(0).util_pct) << "no process there, no per-process figure: unknown";
  GpuSnapshot running = TwoGpus(0, 0);
  GpuProcess p;
  p.pid = 300;
  p.used_memory_bytes = 5 * kGiB;
  running.devices[1].processes->push_back(p);  // no sm_util_pct: not reported
  running.devices[1].utilization_gpu_pct = 50;
  for (int k = 1; k < 5; ++k) sampler.Take(1000 + 10 * k, running, {l}, {{-1, -1}, {0}});
  EXPECT_FALSE(sampler.live().at("lease-a").gpus.at(0).util_pct) << "its process's share is not reported";
  auto record = sampler.UsageOf("lease-a", 1050);
  ASSERT_TRUE(record);
  EXPECT_FALSE(record->usage.mean_util_pct) << *record->usage.mean_util_pct;
  EXPECT_FALSE(record->usage.idle_fraction);
  // Where the GPU reports shares, a job with no process there used none of it: 0 % is known.
  GpuSnapshot reported = TwoGpus(0, 0);
  GpuProcess other = p;
  other.sm_util_pct = 40;
  reported.devices[1].processes->push_back(other);
  sampler.Take(1060, reported, {l}, {{-1, -1}, {-1}});
  ASSERT_TRUE(sampler.live().at("lease-a").gpus.at(0).util_pct);
  EXPECT_EQ(*sampler.live().at("lease-a").gpus.at(0).util_pct, 0);
}

// Fair share counts `gpulane run` and lease() leases (daemon jobs count from the job table, nested
// requests in their job): whole GPUs, a --mem share as its fraction of the GPU's memory.
TEST(OutsideLeaseUsage, CountsRunAndLeaseCallsButNotDaemonJobsNorNestedRequests) {
  lease::LeaseRecord daemon_job = Lease(), run = Lease(), python = Lease(), nested = Lease();
  run.name = "run";
  run.job_id = "r4121";
  run.gpus = {{"GPU-0", std::nullopt}, {"GPU-1", 25 * kGiB}};
  python.name = "python";
  python.job_id = "p77";
  python.user = "bob";
  nested.name = "nested";
  nested.job_id = "r99";
  nested.parent = "lease-a";
  python.started_s = 5000;  // a start after now: counted from now
  const auto usage = OutsideLeaseUsage({daemon_job, run, python, nested}, TwoGpus(0, 0), 2000);
  ASSERT_EQ(usage.size(), 2u);
  EXPECT_EQ(usage.at("run").user, "alice");
  EXPECT_EQ(usage.at("run").start_s, 1000);
  EXPECT_FALSE(usage.at("run").end_s);
  EXPECT_DOUBLE_EQ(usage.at("run").gpus, 1.25) << "GPU 0 whole, a quarter of GPU 1";
  EXPECT_EQ(usage.at("python").user, "bob");
  EXPECT_EQ(usage.at("python").start_s, 2000);
  EXPECT_DOUBLE_EQ(usage.at("python").gpus, 1);
}

}  // namespace
}  // namespace gpulane::daemon
