// The daemon's sampler through the real binary and the fake NVML (issue 11, items 1, 2 and 5): a
// `gpulane run` job's use is metered while it runs (history, metrics), printed when it ends and
// kept for `gpulane report`; a queued job's log ends with its usage line. Telemetry off (the
// sampler's requests answered "telemetry is off", no history.db) is the daemon's decision, tested
// in-process: tests/unit/daemon_inproc_telemetry_test.cc; a bad [telemetry] setting is the config
// file's: tests/unit/telemetry_config_test.cc.
#include <stdlib.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "support/daemon_fixture.h"
#include "support/scenarios.h"
#include "support/text.h"

namespace gpulane::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kFastSampler = "[telemetry]\ninterval = \"100ms\"\n";

// Two idle H200s whose GPU 0 reports energy, busy at 70 %.
json BusyGpu0() {
  json state = IdleGpus(2);
  state["devices"][0]["energy_mj"] = 1000000;
  SetUtilization(state["devices"][0], 70);
  return state;
}

// Samples the daemon has taken of job `job_id`'s lease (0 while none).
std::uint64_t SamplesOf(const TestDaemon& d, const std::string& job_id) {
  json reply = d.Call({{"op", "usage"}, {"job_id", job_id}});
  if (!reply.value("ok", false)) return 0;
  return reply["record"]["usage"].value("samples", 0u);
}

TEST(DaemonTelemetry, ARunJobsUseIsMeteredWhileItRunsPrintedAtItsEndAndReported) {
  DaemonOptions options;
  options.state = BusyGpu0();
  options.config = kFastSampler;
  TestDaemon d(options);
  const fs::path pid_file = d.work() / "job.pid", gate = d.work() / "gate";
  Child run = d.StartGpulane({"run", "-g", "1", "--gpus", "0", "--", "sh", "-c",
                              fmt::format("echo $$ > {}; while [ ! -e {} ]; do sleep 0.05; done", pid_file.string(), gate.string())});
  ASSERT_TRUE(Eventually([&] { return !ReadFile(pid_file).empty(); }, 30)) << run.ErrSoFar();
  const std::uint32_t job_pid = static_cast<std::uint32_t>(std::stoul(ReadFile(pid_file)));
  const std::string job_id = fmt::format("r{}", run.pid());
  // The job's process appears on GPU 0 with 3 GiB, and the GPU's energy counter moves by 720 kJ.
  AddProcess(d.machine().state()["devices"][0], job_pid, 3ULL << 30);
  d.machine().Save();
  ASSERT_TRUE(Eventually([&] { return SamplesOf(d, job_id) >= 2; }, 30)) << d.Log();
  d.machine().state()["devices"][0]["energy_mj"] = 1000000 + 720000000ULL;
  d.machine().Save();
  const std::uint64_t before = SamplesOf(d, job_id);
  ASSERT_TRUE(Eventually([&] { return SamplesOf(d, job_id) >= before + 2; }, 30));

  // While it runs: the GPU's history at full rate, and /metrics' text with the job's labels.
  json history = d.Call({{"op", "history"}, {"gpu", 0}});
  ASSERT_TRUE(history.value("ok", false)) << history.dump();
  ASSERT_FALSE(history["points"].empty());
  EXPECT_EQ(history["points"].back()["util_gpu_pct"], 70);
  EXPECT_FALSE(history["points"].back().contains("power_mw") && history["points"].back()["power_mw"].is_null());
  // A chart's request (the dashboard's): at most max_points, evenly spaced from the first to the
  // latest, each with `t` and the fields asked for only.
  ASSERT_GE(history["points"].size(), 3u);
  json chart = d.Call({{"op", "history"}, {"gpu", 0}, {"max_points", 2}, {"fields", {"util_gpu_pct", "no_such_field"}}});
  ASSERT_TRUE(chart.value("ok", false)) << chart.dump();
  ASSERT_EQ(chart["points"].size(), 2u) << chart.dump();
  EXPECT_EQ(chart["points"][0], json({{"t", history["points"][0]["t"]}, {"util_gpu_pct", 70}}));
  EXPECT_GE(chart["points"][1]["t"].get<double>(), history["points"].back()["t"].get<double>()) << "the latest point";
  EXPECT_EQ(chart["points"][1].size(), 2u) << chart.dump();
  // The same as columns: one array a field asked for, null where no point has it.
  json cols = d.Call({{"op", "history"}, {"gpu", 0}, {"max_points", 2}, {"fields", {"util_gpu_pct", "no_such_field"}},
                      {"columns", true}});
  ASSERT_TRUE(cols.value("ok", false)) << cols.dump();
  EXPECT_FALSE(cols.contains("points")) << cols.dump();
  ASSERT_EQ(cols["columns"]["t"].size(), 2u) << cols.dump();
  EXPECT_EQ(cols["columns"]["t"][0], history["points"][0]["t"]);
  EXPECT_EQ(cols["columns"]["util_gpu_pct"], json({70, 70})) << cols.dump();
  EXPECT_EQ(cols["columns"]["no_such_field"], json({nullptr, nullptr})) << cols.dump();
  json metrics = d.Call({{"op", "metrics"}});
  ASSERT_TRUE(metrics.value("ok", false)) << metrics.dump();
  const std::string text = metrics["text"].get<std::string>();
  EXPECT_TRUE(Contains(text, "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"" + d.machine().state()["devices"][0]["uuid"].get<std::string>()))
      << text;
  EXPECT_TRUE(Contains(text, fmt::format("job=\"{}\"}} {}\n", job_id, 3ULL << 30))) << "the job's memory on GPU 0\n" << text;
  EXPECT_TRUE(Contains(text, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu=\"0\"")) << text;
  EXPECT_FALSE(Contains(text, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu=\"1\"")) << "GPU 1 reports no energy: no line, not 0";

  Touch(gate);
  auto ended = run.Wait(30);
  ASSERT_TRUE(ended);
  EXPECT_EQ(ended->exit_code, 0) << ended->err;
  EXPECT_TRUE(Contains(ended->err, fmt::format("gpulane: job {} used 1 GPU for ", job_id))) << ended->err;
  EXPECT_TRUE(Contains(ended->err, ", 0.2 kWh, peak 3.0 GiB, mean util 70 %")) << ended->err;

  // Once the sampler has seen the lease end, the job is in the report (by job, and by user).
  json rows;
  ASSERT_TRUE(Eventually([&] {
    RunResult r = d.Gpulane({"report", "--by", "job", "--json"});
    if (r.exit_code != 0) return false;
    rows = json::parse(r.out)["rows"];
    return !rows.empty();
  }, 30));
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0]["key"], job_id);
  EXPECT_EQ(rows[0]["peak_memory_bytes"], 3ULL << 30);
  EXPECT_NEAR(rows[0]["energy_j"].get<double>(), 720000, 1);
  EXPECT_GT(rows[0]["gpu_s"].get<double>(), 0);
  RunResult table = d.Gpulane({"report"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_TRUE(Contains(table.out, "USER ")) << table.out;
  EXPECT_TRUE(Contains(table.out, "0.20")) << "0.2 kWh\n" << table.out;
  RunResult csv = d.Gpulane({"report", "--by", "gpu", "--csv"});
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  EXPECT_TRUE(Contains(csv.out, "gpu,jobs,gpu_hours,")) << csv.out;
  EXPECT_TRUE(Contains(csv.out, "0 " + d.machine().state()["devices"][0]["uuid"].get<std::string>() + ",1,")) << csv.out;
}

TEST(DaemonTelemetry, DcgmExportersJobMappingFilesNameTheJobsOnEachGpu) {
  DaemonOptions options;
  options.state = BusyGpu0();
  char folder[] = "/tmp/gpulane-job-mapping-XXXXXX";
  ASSERT_NE(mkdtemp(folder), nullptr);
  const fs::path mapping = folder;
  struct Remove {
    fs::path p;
    ~Remove() { fs::remove_all(p); }
  } remove{mapping};
  options.config = std::string(kFastSampler) + fmt::format("hpc_job_mapping_dir = \"{}\"\n", mapping.string());
  TestDaemon d(options);
  const fs::path gate = d.work() / "gate";
  const std::int64_t id = d.Submit({"--gpus", "1", "--", "sh", "-c", fmt::format("while [ ! -e {} ]; do sleep 0.05; done", gate.string())});
  ASSERT_TRUE(d.WaitForState(id, "running"));
  // GPU 1 (NVML index 1) holds the job; GPU 0 nothing: an empty file.
  EXPECT_TRUE(Eventually([&] { return ReadFile(mapping / "1") == std::to_string(id) + "\n"; }, 30)) << ReadFile(mapping / "1");
  EXPECT_TRUE(fs::exists(mapping / "0"));
  EXPECT_EQ(ReadFile(mapping / "0"), "");
  Touch(gate);
  ASSERT_TRUE(d.WaitForState(id, "completed"));
  EXPECT_TRUE(Eventually([&] { return ReadFile(mapping / "1").empty(); }, 30)) << "the job has ended";
}

TEST(DaemonTelemetry, AQueuedJobsLogEndsWithItsUsageLine) {
  DaemonOptions options;
  options.state = BusyGpu0();
  options.config = kFastSampler;
  TestDaemon d(options);
  const fs::path gate = d.work() / "gate";
  const std::int64_t id = d.Submit({"-o", "job.log", "--gpus", "0", "--", "sh", "-c",
                                    fmt::format("echo started; while [ ! -e {} ]; do sleep 0.05; done", gate.string())});
  ASSERT_TRUE(d.WaitForState(id, "running"));
  ASSERT_TRUE(Eventually([&] { return SamplesOf(d, std::to_string(id)) >= 2; }, 30)) << d.Log();
  Touch(gate);
  ASSERT_TRUE(d.WaitForState(id, "completed"));
  const std::vector<std::string> lines = Lines(ReadFile(d.work() / "job.log"));
  ASSERT_EQ(lines.size(), 2u) << ReadFile(d.work() / "job.log");
  EXPECT_EQ(lines[0], "started");
  EXPECT_TRUE(Contains(lines[1], fmt::format("gpulane: job {} used 1 GPU for ", id))) << lines[1];
  EXPECT_TRUE(Contains(lines[1], "mean util 70 %")) << lines[1];
  // show: the same line as "usage", and its figures in JSON.
  RunResult show = d.Gpulane({"show", std::to_string(id)});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_TRUE(Contains(show.out, fmt::format("  usage     job {} used 1 GPU for ", id))) << show.out;
  json shown = d.Show(id);
  ASSERT_TRUE(shown.contains("usage")) << shown.dump(2);
  EXPECT_GT(shown["usage"]["gpu_s"].get<double>(), 0);
  EXPECT_DOUBLE_EQ(shown["usage"]["mean_util_pct"].get<double>(), 70);
}

// A job shorter than one sample had no usage record: `report` left it out and its log had no usage
// line. Its supervisor's "ending" now has it recorded from its one lease file, which it still holds
// (run time and GPU-seconds, no utilisation: unknown, not 0 %), and the answer carries it to the
// log; the history write comes after the answer. A sample a minute: none sees the job.
TEST(DaemonTelemetry, AJobShorterThanOneSampleIsReportedWithoutSampledFigures) {
  DaemonOptions options;
  options.state = BusyGpu0();
  options.config = "[telemetry]\ninterval = \"60s\"\n";
  TestDaemon d(options);
  const std::int64_t id = d.Submit({"-o", "job.log", "--gpus", "0", "--", "true"});
  ASSERT_TRUE(d.WaitForState(id, "completed"));
  RunResult r = d.Gpulane({"report", "--by", "job", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json rows = json::parse(r.out)["rows"];
  ASSERT_EQ(rows.size(), 1u) << r.out;
  EXPECT_EQ(rows[0]["key"], std::to_string(id));
  EXPECT_FALSE(rows[0].contains("mean_util_pct") && !rows[0]["mean_util_pct"].is_null()) << rows[0].dump();
  EXPECT_GT(rows[0]["gpu_s"].get<double>(), 0) << rows[0].dump();
  EXPECT_TRUE(Contains(ReadFile(d.work() / "job.log"), fmt::format("gpulane: job {} used 1 GPU for ", id)))
      << ReadFile(d.work() / "job.log");
  EXPECT_FALSE(Contains(ReadFile(d.work() / "job.log"), "util")) << ReadFile(d.work() / "job.log");
}

// The same for a `gpulane run` shorter than one sample: it tells the daemon it ends while it still
// holds its lease, so `report` counts it and run prints the run time it was recorded with (no
// utilisation: unknown, not 0 %). It was left out of `report` and its line was missing.
TEST(DaemonTelemetry, ARunShorterThanOneSampleIsReportedAndPrintsItsRecord) {
  DaemonOptions options;
  options.state = BusyGpu0();
  options.config = "[telemetry]\ninterval = \"60s\"\n";
  TestDaemon d(options);
  ASSERT_TRUE(Eventually([&] { return d.Call({{"op", "telemetry"}}).value("ok", false); }, 30)) << d.Log();
  RunResult run = d.Gpulane({"run", "-g", "1", "--gpus", "0", "--", "true"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_TRUE(Contains(run.err, "used 1 GPU for ")) << run.err;
  EXPECT_FALSE(Contains(run.err, "util")) << run.err;
  RunResult r = d.Gpulane({"report", "--by", "job", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json rows = json::parse(r.out)["rows"];
  ASSERT_EQ(rows.size(), 1u) << r.out;
  EXPECT_EQ(rows[0]["key"].get<std::string>().substr(0, 1), "r") << rows[0].dump();
  EXPECT_GT(rows[0]["gpu_s"].get<double>(), 0) << rows[0].dump();
  EXPECT_FALSE(rows[0].contains("mean_util_pct") && !rows[0]["mean_util_pct"].is_null()) << rows[0].dump();
}

// history.db shares the state folder with jobs.db (issue 23, item 8: a full disk stops
// submissions). Under daemon.history_min_free of free space the sampler stores nothing, `status`
// says so, and history resumes once there is room: here the floor is the whole file system, then a
// restart with the default floor.
TEST(DaemonTelemetry, UnderTheHistoryFloorNothingIsStoredStatusSaysSoAndHistoryResumesWithRoom) {
  DaemonOptions options;
  json state = IdleGpus(2);
  state["devices"][1]["xids"] = json::array();
  options.state = state;
  options.config = std::string(kFastSampler) + "[daemon]\nhistory_min_free = \"100%\"\n";
  TestDaemon d(options);
  auto status_text = [&] {
    RunResult r = d.Gpulane({"status"});
    return r.out + r.err;
  };
  ASSERT_TRUE(Eventually([&] { return Contains(status_text(), "GPU history is not stored"); }, 30)) << status_text();
  EXPECT_TRUE(Contains(status_text(), "warning: GPU history is not stored: the state folder " + d.state_dir().string()))
      << status_text();
  EXPECT_TRUE(Contains(status_text(), "(daemon.history_min_free, 100 % of its file system)")) << status_text();
  // An Xid is raised (status marks GPU 1 drained), and not stored: `events` lists nothing.
  d.machine().state()["devices"][1]["xids"].push_back(79);
  d.machine().Save();
  ASSERT_TRUE(Eventually([&] { return Contains(status_text(), "GPU 1 raised Xid 79"); }, 30)) << status_text();
  RunResult events = d.Gpulane({"events"});
  ASSERT_EQ(events.exit_code, 0) << events.err;
  EXPECT_FALSE(Contains(events.out, "Xid 79")) << "stored under the floor:\n" << events.out;

  // The default floor (the larger of 256 MiB and 2 %, which this file system has free): stored again.
  struct statvfs fs_space {};
  ASSERT_EQ(statvfs(d.state_dir().c_str(), &fs_space), 0);
  const double free_bytes = static_cast<double>(fs_space.f_bavail) * fs_space.f_frsize;
  if (free_bytes < std::max(256.0 * (1 << 20), 0.02 * static_cast<double>(fs_space.f_blocks) * fs_space.f_frsize))
    GTEST_SKIP() << "the test folder's file system is under the default floor itself";
  std::ofstream(d.dir() / "config.toml") << kFastSampler << "[web]\nlisten = \"off\"\n";
  d.Kill9();
  ASSERT_TRUE(d.Start());
  // An Xid before the restarted sampler's first read is one it never sees (as with a real driver's
  // events before registration): it is raised once the sampler reads.
  ASSERT_TRUE(Eventually([&] { return d.Call({{"op", "telemetry"}}).value("time_s", 0.0) > 0; }, 30)) << d.Log();
  d.machine().state()["devices"][1]["xids"].push_back(48);
  d.machine().Save();
  ASSERT_TRUE(Eventually([&] { return Contains(d.Gpulane({"events"}).out, "GPU 1 raised Xid 48"); }, 30))
      << d.Gpulane({"events"}).out << d.Log();
  EXPECT_FALSE(Contains(status_text(), "GPU history is not stored")) << status_text();
}

}  // namespace
}  // namespace gpulane::test
