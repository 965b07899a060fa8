// The daemon's sampler through the real binary and the fake NVML (issue 11, items 1, 2 and 5): a
// `gpulane run` job's use is metered while it runs, printed when it ends and kept for `gpulane
// report`; a queued job's log ends with its usage line. Telemetry off (the sampler's requests
// answered "telemetry is off", no history.db) is the daemon's decision, tested in-process:
// tests/unit/daemon_inproc_telemetry_test.cc; a bad [telemetry] setting is the config file's:
// tests/unit/telemetry_config_test.cc. The sampler's own behaviour without a user's command in the
// way (a job's history and /metrics while it runs, dcgm-exporter's job mapping files, a job or run
// shorter than one sample, the history floor) is tested in-process on fake GPUs:
// tests/unit/daemon_inproc_sampler_test.cc.
#include <filesystem>

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

}  // namespace
}  // namespace gpulane::test
