// The daemon's sampler at work, in-process (tests/support/inproc_daemon.h): telemetry on, the
// sampler thread reading the harness's GPUs (LiveGpus, changed by the test) and the lease
// directory, where the test holds each job's lease as its supervisor (or `gpulane run`) would. A
// sample is taken when the test moves the FakeClock one interval on and asks (SampleNow): no
// sleep, no NVML, no gpulane binary. The history, chart, columns and /metrics of a metered job were
// asserted by DaemonTelemetry.ARunJobsUseIsMeteredWhileItRunsPrintedAtItsEndAndReported through the
// binary, which keeps what `gpulane run` and `report` print. Were, through the binary and the fake
// NVML:
// DaemonTelemetry.DcgmExportersJobMappingFilesNameTheJobsOnEachGpu,
// DaemonTelemetry.AJobShorterThanOneSampleIsReportedWithoutSampledFigures,
// DaemonTelemetry.ARunShorterThanOneSampleIsReportedAndPrintsItsRecord,
// DaemonTelemetry.UnderTheHistoryFloorNothingIsStoredStatusSaysSoAndHistoryResumesWithRoom,
// DaemonAnomaly.WithIdleActionCancelAQueuedJobIdlePastTheGraceIsCancelledSayingWhy and
// DaemonAnomaly.AnIdleArrayTaskIsTheOneCancelled. What a user's commands print of it stays through
// the binary: a `gpulane run`'s usage line, `report`'s table and CSV
// (DaemonTelemetry.ARunJobsUseIsMeteredWhileItRunsPrintedAtItsEndAndReported), a queued job's log
// line and `show` (DaemonTelemetry.AQueuedJobsLogEndsWithItsUsageLine), `status` and `events` of an
// Xid (tests/integration/daemon_anomaly_test.cc).
#include <signal.h>
#include <unistd.h>

#include <filesystem>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "proto/telemetry_json.h"
#include "support/harness.h"
#include "support/inproc_daemon.h"
#include "support/text.h"
#include "telemetry/job_usage.h"

namespace gpulane::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class DaemonInProcSampler : public InProcDaemonTest {
 protected:
  void SetUp() override {
    InProcDaemonTest::SetUp();
    config_.telemetry_enabled = true;
    // History always stored (daemon.history_min_free = 0): the state folder may be on a small
    // /dev/shm, under the default floor of 256 MiB.
    config_.daemon_history_min_free_bytes = 0;
  }
  /// The daemon started, its sampler's first sample taken.
  void StartSampling() {
    StartDaemon();
    WaitForSample();
  }
  std::string Uuid(unsigned gpu) const { return IdleSnapshot(gpu + 1).devices[gpu].uuid; }
  /// Plays job `id`'s supervisor once its job runs on GPU `gpu`: its status file and its lease.
  std::string RunsOn(std::int64_t id, unsigned gpu, const std::string& job_text = "") {
    Running(id, {Uuid(gpu)});
    lease::LeaseRecord record;
    record.job_id = std::to_string(id);
    record.job_text = job_text;
    record.gpus = {{Uuid(gpu), std::nullopt}};
    const std::string name = HoldLease(record);
    Turn();
    return name;
  }
  /// `report --by <by> --json`'s rows.
  json ReportRows(const std::string& by) {
    json reply = Call(Root(), {{"op", "report"}, {"by", by}});
    EXPECT_TRUE(reply.value("ok", false)) << reply.dump();
    return reply.value("rows", json::array());
  }
  /// The messages of the events stored (`gpulane events`), one a line.
  std::string StoredEvents() {
    json reply = Call(Root(), {{"op", "events"}});
    EXPECT_TRUE(reply.value("ok", false)) << reply.dump();
    std::string out;
    for (const json& e : reply.value("events", json::array())) out += e.value("kind", "") + " " + e.value("message", "") + "\n";
    return out;
  }
  /// The daemon's warnings `status` prints ("warning: ..."), one a line: its snapshot reply's.
  std::string StatusWarnings() {
    json reply = Call(Root(), {{"op", "snapshot"}});
    EXPECT_TRUE(reply.value("ok", false)) << reply.dump();
    std::string out;
    for (const json& w : reply.value("warnings", json::array())) out += w.get<std::string>() + "\n";
    return out;
  }
};

constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;

// Two idle GPUs whose GPU 0 reports energy, busy at 70 %.
GpuSnapshot BusyGpu0() {
  GpuSnapshot s = IdleSnapshot(2);
  s.devices[0].utilization_gpu_pct = 70;
  s.devices[0].energy_mj = 1000000;
  return s;
}

// A job's use metered while it runs: its GPU's history at full rate (whole points, a chart's
// evenly spaced ones, columns), /metrics' text with the job's labels and the sampler's interval;
// kept when it ends, for its usage line and `report`.
TEST_F(DaemonInProcSampler, AJobsUseIsMeteredWhileItRunsAndReportedWhenItEnds) {
  gpus_.Set(BusyGpu0());
  StartSampling();
  const std::int64_t id = SubmitOne();
  const std::string job_id = std::to_string(id);
  const std::string lease = RunsOn(id, 0);
  // The job's process appears on GPU 0 with 3 GiB, and the GPU's energy counter moves by 720 kJ.
  gpus_.Edit([](GpuSnapshot& s) {
    GpuProcess p;
    p.pid = static_cast<std::uint32_t>(getpid());  // the lease's own process: the job's
    p.used_memory_bytes = 3 * kGiB;
    s.devices[0].processes->push_back(p);
  });
  SampleNow();
  SampleNow();
  gpus_.Edit([](GpuSnapshot& s) { *s.devices[0].energy_mj += 720000000; });
  SampleNow();
  SampleNow();

  const json telemetry = Call(Root(), {{"op", "telemetry"}});
  EXPECT_EQ(telemetry.value("interval_s", 0.0), config_.telemetry_interval_s) << telemetry.dump();
  json history = Call(Root(), {{"op", "history"}, {"gpu", 0}});
  ASSERT_TRUE(history.value("ok", false)) << history.dump();
  ASSERT_GE(history["points"].size(), 3u) << history.dump();
  EXPECT_EQ(history["points"].back()["util_gpu_pct"], 70);
  // A chart's request (the dashboard's): at most max_points, evenly spaced from the first to the
  // latest, each with `t` and the fields asked for only.
  json chart = Call(Root(), {{"op", "history"}, {"gpu", 0}, {"max_points", 2}, {"fields", {"util_gpu_pct", "no_such_field"}}});
  ASSERT_TRUE(chart.value("ok", false)) << chart.dump();
  ASSERT_EQ(chart["points"].size(), 2u) << chart.dump();
  EXPECT_EQ(chart["points"][0], json({{"t", history["points"][0]["t"]}, {"util_gpu_pct", 70}}));
  EXPECT_GE(chart["points"][1]["t"].get<double>(), history["points"].back()["t"].get<double>()) << "the latest point";
  EXPECT_EQ(chart["points"][1].size(), 2u) << chart.dump();
  // The same as columns: one array a field asked for, null where no point has it.
  json cols = Call(Root(), {{"op", "history"}, {"gpu", 0}, {"max_points", 2}, {"fields", {"util_gpu_pct", "no_such_field"}},
                            {"columns", true}});
  ASSERT_TRUE(cols.value("ok", false)) << cols.dump();
  EXPECT_FALSE(cols.contains("points")) << cols.dump();
  ASSERT_EQ(cols["columns"]["t"].size(), 2u) << cols.dump();
  EXPECT_EQ(cols["columns"]["t"][0], history["points"][0]["t"]);
  EXPECT_EQ(cols["columns"]["util_gpu_pct"], json({70, 70})) << cols.dump();
  EXPECT_EQ(cols["columns"]["no_such_field"], json({nullptr, nullptr})) << cols.dump();
  json metrics = Call(Root(), {{"op", "metrics"}});
  ASSERT_TRUE(metrics.value("ok", false)) << metrics.dump();
  const std::string text = metrics["text"].get<std::string>();
  EXPECT_TRUE(Contains(text, "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"" + Uuid(0))) << text;
  EXPECT_TRUE(Contains(text, fmt::format("job=\"{}\"}} {}\n", job_id, 3 * kGiB))) << "the job's memory on GPU 0\n" << text;
  EXPECT_TRUE(Contains(text, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu=\"0\"")) << text;
  EXPECT_FALSE(Contains(text, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu=\"1\"")) << "GPU 1 reports no energy: no line, not 0";

  // It ends: once the sampler has seen its lease go, its record (its log's usage line) and `report`.
  ReleaseLease(lease);
  Done(id, 0);
  Turn();
  SampleNow();
  const json usage = Usage({{"job_id", job_id}});
  ASSERT_TRUE(usage.value("ok", false)) << usage.dump();
  EXPECT_FALSE(usage.value("running", false)) << usage.dump();
  const std::string line = telemetry::UsageLine(job_id, proto::UsageRecordFromJson(usage["record"]).usage);
  EXPECT_TRUE(Contains(line, fmt::format("job {} used 1 GPU for ", job_id))) << line;
  EXPECT_TRUE(Contains(line, ", 0.2 kWh, peak 3.0 GiB, mean util 70 %")) << line;
  const json rows = ReportRows("job");
  ASSERT_EQ(rows.size(), 1u) << rows.dump();
  EXPECT_EQ(rows[0]["key"], job_id);
  EXPECT_EQ(rows[0]["peak_memory_bytes"], 3 * kGiB);
  EXPECT_NEAR(rows[0]["energy_j"].get<double>(), 720000, 1);
  EXPECT_GT(rows[0]["gpu_s"].get<double>(), 0);
  const json by_gpu = ReportRows("gpu");
  ASSERT_EQ(by_gpu.size(), 1u) << by_gpu.dump();
  EXPECT_EQ(by_gpu[0]["key"], "0 " + Uuid(0)) << by_gpu.dump();
  EXPECT_EQ(by_gpu[0]["jobs"], 1) << by_gpu.dump();
}

// dcgm-exporter's job mapping files (telemetry.hpc_job_mapping_dir): one per GPU, by NVML index,
// naming the jobs on it; emptied when the job ends.
TEST_F(DaemonInProcSampler, DcgmExportersJobMappingFilesNameTheJobsOnEachGpu) {
  const fs::path mapping = dir_ / "job-mapping";
  fs::create_directories(mapping);
  config_.telemetry_hpc_job_mapping_dir = mapping.string();
  StartSampling();
  const std::int64_t id = SubmitOne();
  const std::string lease = RunsOn(id, 1);
  SampleNow();
  EXPECT_EQ(ReadFile(mapping / "1"), std::to_string(id) + "\n");
  EXPECT_TRUE(fs::exists(mapping / "0"));
  EXPECT_EQ(ReadFile(mapping / "0"), "") << "GPU 0 holds no job";
  ReleaseLease(lease);
  Done(id, 0);
  Turn();
  SampleNow();
  EXPECT_EQ(ReadFile(mapping / "1"), "") << "the job has ended";
}

// A job shorter than one sample (a sample a minute: none sees it) is recorded from its one lease
// file as its supervisor says it ends, still holding it: run time and GPU-seconds, no utilisation
// (unknown, not 0 %), carried by the answer to its log's usage line and kept for `report`.
// `job_id` is a queued job's ("12") or a `gpulane run`'s ("r4121"): both ask the same way.
void AShortJobIsRecordedWithoutSampledFigures(const std::string& job_id, const json& rows) {
  ASSERT_EQ(rows.size(), 1u) << rows.dump();
  EXPECT_EQ(rows[0]["key"], job_id);
  EXPECT_FALSE(rows[0].contains("mean_util_pct") && !rows[0]["mean_util_pct"].is_null()) << rows[0].dump();
  EXPECT_GT(rows[0]["gpu_s"].get<double>(), 0) << rows[0].dump();
}

class DaemonInProcShortJob : public DaemonInProcSampler {
 protected:
  void SetUp() override {
    DaemonInProcSampler::SetUp();
    config_.telemetry_interval_s = 60;
    gpus_.Set(BusyGpu0());
  }
  /// The owner of lease `name` says its job ends after `run_s`: the answer's record (what its log
  /// line and `gpulane run` print), the lease then let go.
  telemetry::UsageRecord Ends(const std::string& name, double run_s) {
    clock_.Advance(run_s);
    json reply = Usage({{"lease", name}, {"ending", true}}, PeerOf(geteuid(), "owner"));
    EXPECT_TRUE(reply.value("ok", false)) << reply.dump();
    ReleaseLease(name);
    return proto::UsageRecordFromJson(reply.value("record", json::object()));
  }
};

TEST_F(DaemonInProcShortJob, AJobShorterThanOneSampleIsReportedWithoutSampledFigures) {
  StartSampling();
  const std::int64_t id = SubmitOne();
  const std::string lease = RunsOn(id, 0);
  const telemetry::UsageRecord record = Ends(lease, 2);
  const std::string line = telemetry::UsageLine(std::to_string(id), record.usage);
  EXPECT_TRUE(Contains(line, fmt::format("job {} used 1 GPU for ", id))) << line;
  EXPECT_FALSE(Contains(line, "util")) << line;
  Done(id, 0);
  Turn();
  AShortJobIsRecordedWithoutSampledFigures(std::to_string(id), ReportRows("job"));
}

TEST_F(DaemonInProcShortJob, ARunShorterThanOneSampleIsReportedAndPrintsItsRecord) {
  StartSampling();
  lease::LeaseRecord run;
  run.job_id = fmt::format("r{}", getpid());
  run.label = "true";
  run.gpus = {{Uuid(0), std::nullopt}};
  const std::string lease = HoldLease(run);
  const telemetry::UsageRecord record = Ends(lease, 2);
  const std::string line = telemetry::UsageLine(run.job_id, record.usage);
  EXPECT_TRUE(Contains(line, "used 1 GPU for ")) << line;
  EXPECT_FALSE(Contains(line, "util")) << line;
  AShortJobIsRecordedWithoutSampledFigures(run.job_id, ReportRows("job"));
}

// history.db shares the state folder with jobs.db (issue 23, item 8: a full disk stops
// submissions). Under daemon.history_min_free of free space the sampler stores nothing, `status`
// says so, and history resumes once there is room: here the floor is the whole file system, then a
// restart with a floor of 0.
TEST_F(DaemonInProcSampler, UnderTheHistoryFloorNothingIsStoredStatusSaysSoAndHistoryResumesWithRoom) {
  config_.daemon_history_min_free_bytes.reset();
  config_.daemon_history_min_free_pct = 100;
  StartSampling();
  EXPECT_TRUE(Contains(StatusWarnings(), "GPU history is not stored: the state folder " + paths_.state_dir)) << StatusWarnings();
  EXPECT_TRUE(Contains(StatusWarnings(), "(daemon.history_min_free, 100 % of its file system)")) << StatusWarnings();
  // An Xid is raised (GPU 1 drained), and not stored: `events` lists nothing.
  gpus_.RaiseXid(1, 79);
  SampleNow();
  const json snapshot = Call(Root(), {{"op", "snapshot"}});
  EXPECT_TRUE(Contains(snapshot["snapshot"]["devices"][1].value("drained", ""), "GPU 1 raised Xid 79")) << snapshot.dump();
  EXPECT_FALSE(Contains(StoredEvents(), "Xid 79")) << "stored under the floor:\n" << StoredEvents();

  // Room again (a floor of 0 here, where the binary test restarted with the default floor and was
  // skipped on a file system under it): stored again.
  config_.daemon_history_min_free_pct.reset();
  config_.daemon_history_min_free_bytes = 0;
  Restart();
  WaitForSample();
  gpus_.RaiseXid(1, 48);
  SampleNow();
  EXPECT_TRUE(Contains(StoredEvents(), "GPU 1 raised Xid 48")) << StoredEvents();
  EXPECT_FALSE(Contains(StatusWarnings(), "GPU history is not stored")) << StatusWarnings();
}

// anomaly.idle_action = "cancel": a queued job whose GPU stays under 5 % past idle_after and then
// idle_cancel_after more is cancelled as `gpulane cancel` does (its supervisor sent SIGTERM), the
// reason in `show`, the cancel in `events`.
class DaemonInProcIdleCancel : public DaemonInProcSampler {
 protected:
  void SetUp() override {
    DaemonInProcSampler::SetUp();
    config_.anomaly_idle_after_s = 1;
    config_.anomaly_idle_action = "cancel";
    config_.anomaly_idle_cancel_after_s = 1;
  }
  /// Samples (a second apart) until job `id`'s supervisor is sent SIGTERM, 10 at most: how many.
  int SamplesUntilCancelled(std::int64_t id) {
    for (int n = 1; n <= 10; ++n) {
      SampleNow();
      if (!SignalsTo(id).empty()) return n;
    }
    return 0;
  }
};

TEST_F(DaemonInProcIdleCancel, AQueuedJobIdlePastTheGraceIsCancelledSayingWhy) {
  StartSampling();
  const std::int64_t id = SubmitOne();
  RunsOn(id, 0);
  const int samples = SamplesUntilCancelled(id);
  // First seen, idle a second later, cancelled a second after that: not before.
  EXPECT_GE(samples, 2);
  ASSERT_GT(samples, 0) << "not cancelled in 10 s of idling";
  EXPECT_EQ(SignalsTo(id), std::vector<int>{SIGTERM});
  Done(id, 143);
  Turn();
  const json job = ShowJob(id);
  EXPECT_EQ(job.value("state", ""), "cancelled") << job.dump(2);
  EXPECT_TRUE(Contains(job.value("reason", ""), "idle (under 5 %)")) << job.dump(2);
  EXPECT_TRUE(Contains(StoredEvents(), "idle_cancel")) << StoredEvents();
}

// The idle cancel names its job by the lease's job id; an array task's is its own job id, its
// name "12_1" the lease's job text: either way the idle task is the one cancelled, never the
// array's head.
TEST_F(DaemonInProcIdleCancel, AnIdleArrayTaskIsTheOneCancelled) {
  StartSampling();
  const std::vector<std::int64_t> tasks = Submit(Root(), {.hold = true, .array = {0, 1}});
  ASSERT_EQ(tasks.size(), 2u);
  const std::int64_t first = tasks[0];
  ASSERT_TRUE(Control(Root(), "release", {tasks[1]}).value("ok", false));
  Turn();
  ASSERT_EQ(Launched(), std::vector<std::int64_t>{tasks[1]});
  RunsOn(tasks[1], 0, fmt::format("{}_1", first));
  ASSERT_GT(SamplesUntilCancelled(tasks[1]), 0) << "not cancelled in 10 s of idling";
  Done(tasks[1], 143);
  Turn();
  EXPECT_EQ(State(tasks[1]), "cancelled");
  EXPECT_TRUE(Contains(ShowJob(tasks[1]).value("reason", ""), "idle (under 5 %)")) << ShowJob(tasks[1]).dump(2);
  EXPECT_EQ(State(first), "held") << "task 0 was not the one cancelled";
  EXPECT_TRUE(SignalsTo(first).empty());
}

}  // namespace
}  // namespace gpulane::test
