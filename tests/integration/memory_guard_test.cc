// Declared memory enforced (issue 26, part 2), through the real binary and the fake NVML: a job
// that shares GPU 0 by --mem 10GiB and whose reported memory grows to 20 GiB (over 10 GiB and the
// 1 GiB lease.memory_margin) is warned at once (its log, `gpulane events`, --notify) and stopped
// after anomaly.overuse_grace with the reason in `show`/`queue` and exit status 18; with grace 0
// it is only warned; a job holding GPU 0 whole is never touched whatever it holds. The same for
// `gpulane run` without a daemon, which also measures the time from the crossing to the stop.
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "support/daemon_fixture.h"
#include "support/scenarios.h"
#include "support/text.h"
#include "support/units.h"

namespace gpulane::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A job as NVML would show a CUDA job that grows: it puts its own process on GPU 0 of the fake
// NVML's state with `start_gib`, 1.5 s later with `grown_gib` (printing "crossed <wall time>"), and
// runs until `gate` exists; at its end, or at SIGTERM, it takes its process off again (as the
// driver does at a process's exit). The state is replaced atomically, as FakeMachine::Save does.
std::vector<std::string> GrowingJob(const fs::path& state, int start_gib, int grown_gib, const fs::path& gate) {
  const std::string script = R"(
import json, os, signal, sys, time
path, start, grown, gate = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
def put(gib):
    state = json.load(open(path))
    procs = [p for p in state["devices"][0].get("processes", []) if p["pid"] != os.getpid()]
    if gib:
        procs.append({"pid": os.getpid(), "used_memory": gib << 30})
    state["devices"][0]["processes"] = procs
    tmp = "%s.%d" % (path, os.getpid())
    json.dump(state, open(tmp, "w")); os.rename(tmp, path)
def leave(*_):
    put(0); sys.exit(143)
signal.signal(signal.SIGTERM, leave)
put(start)
time.sleep(1.5)
put(grown)
print("crossed %.3f" % time.time(), flush=True)
while not os.path.exists(gate):
    time.sleep(0.05)
put(0)
)";
  return {"/usr/bin/python3", "-c", script, state.string(), std::to_string(start_gib), std::to_string(grown_gib),
          gate.string()};
}

std::vector<std::string> GuardArgs(std::vector<std::string> head, const std::vector<std::string>& job) {
  head.push_back("--");
  head.insert(head.end(), job.begin(), job.end());
  return head;
}

bool HasEvent(const TestDaemon& d, const std::string& kind, const std::string& job_id) {
  json reply = d.Call({{"op", "events"}});
  for (const auto& e : reply.value("events", json::array()))
    if (e.value("kind", "") == kind && e.value("job_id", "") == job_id) return true;
  return false;
}

// The daemon's sampler has seen job `job_id` hold `bytes` on a GPU (a sample taken after the growth).
bool SamplerSaw(const TestDaemon& d, const std::string& job_id, std::uint64_t bytes) {
  json reply = d.Call({{"op", "telemetry"}});
  for (const auto& j : reply.value("jobs", json::array()))
    if (j.value("job_id", "") == job_id && j.value("memory_bytes", std::uint64_t{0}) == bytes) return true;
  return false;
}

std::string JobLog(const TestDaemon& d, std::int64_t id) {
  const json shown = d.Show(id);
  return ReadFile(shown["logs"].value("stderr_path", "")) + ReadFile(shown["logs"].value("stdout_path", ""));
}

DaemonOptions WithGrace(const std::string& grace) {
  DaemonOptions options;
  options.state = IdleGpus(1);
  options.state->at("devices")[0]["processes"] = json::array();
  options.config = fmt::format("[telemetry]\ninterval = \"200ms\"\n[anomaly]\noveruse_grace = \"{}\"\n", grace);
  return options;
}

TEST(MemoryGuard, AQueuedMemJobGrowingPastItsShareIsWarnedThenStoppedWithTheReasonAndExit18) {
  if (geteuid() != 0) GTEST_SKIP() << "anomaly.overuse_grace may only be set by root";
  TestDaemon d(WithGrace("1s"));
  const fs::path gate = d.work() / "gate";
  const std::int64_t id = d.Submit(GuardArgs({"--mem", "10GiB"}, GrowingJob(d.machine().dir() / "nvml.json", 4, 20, gate)));
  ASSERT_TRUE(d.WaitForState(id, "running"));
  ASSERT_TRUE(d.WaitForState(id, "failed", 60)) << d.Log() << JobLog(d, id);
  const json shown = d.Show(id);
  EXPECT_EQ(shown.value("exit_code", -1), 18) << shown.dump(2);
  // In MiB (nvidia-smi's unit), the GPU, the limit and the settings that make it.
  const std::string reason = shown.value("reason", "");
  EXPECT_TRUE(std::regex_match(reason, std::regex(R"(memory over declaration: held 20480 MiB on GPU 0, over its limit of )"
                                                  R"(11264 MiB \(--mem 10240 MiB \+ lease\.memory_margin 1024 MiB\) for )"
                                                  R"([0-9.]+ s \(anomaly\.overuse_grace 1\.0 s\))")))
      << shown.dump(2);
  // The warning in its log first; its last line says why gpulane stopped it, as `show` does.
  const std::string log = JobLog(d, id);
  const auto warned = log.find(fmt::format("job {} holds 20.0 GiB on GPU 0, over its declared 10.0 GiB (--mem) and the "
                                           "1.0 GiB margin: it is stopped in 1.0 s unless it frees memory",
                                           id));
  EXPECT_NE(warned, std::string::npos) << log;
  const std::string stopped = LineStartingWith(log, "gpulane: stopped");
  EXPECT_TRUE(IsStoppedAfterLine(stopped, reason)) << log;
  EXPECT_LT(warned, log.find(stopped)) << log;
  // `gpulane events` (the daemon's sampler, the same rule) and the queue's one line.
  EXPECT_TRUE(Eventually([&] { return HasEvent(d, "overuse", std::to_string(id)); }, 10)) << d.Log();
  RunResult events = d.Gpulane({"events"});
  EXPECT_TRUE(Contains(events.out, fmt::format("job {} holds 20.0 GiB on GPU 0", id))) << events.out;
  RunResult queue = d.Gpulane({"queue", "--all"});
  EXPECT_TRUE(Contains(queue.out, "exit 18; memory over declaration: held 20480 MiB on GPU 0")) << queue.out << queue.err;
}

TEST(MemoryGuard, WithGraceZeroAQueuedMemJobIsWarnedAndNotifiedButRunsToItsEnd) {
  if (geteuid() != 0) GTEST_SKIP() << "anomaly.overuse_grace may only be set by root";
  TestDaemon d(WithGrace("0s"));
  const fs::path gate = d.work() / "gate", notified = d.work() / "notified";
  const fs::path user_config = d.dir() / "user.toml";
  std::ofstream(user_config) << fmt::format("[anomaly]\noveruse_grace = \"0s\"\n[notify]\ncommand = \"echo \\\"$GPULANE_MESSAGE\\\" >> {}\"\n",
                                           notified.string());
  const std::int64_t id = d.Submit(GuardArgs({"--mem", "10GiB", "--notify", "anomaly"},
                                        GrowingJob(d.machine().dir() / "nvml.json", 4, 20, gate)),
                                   {{"GPULANE_CONFIG", user_config.string()}});
  ASSERT_TRUE(d.WaitForState(id, "running"));
  ASSERT_TRUE(Eventually([&] { return Contains(JobLog(d, id), "warned only (anomaly.overuse_grace = 0)"); }, 30))
      << d.Log() << JobLog(d, id);
  EXPECT_TRUE(Eventually([&] { return HasEvent(d, "overuse", std::to_string(id)); }, 10)) << d.Log();
  // The supervisor asks for its job's anomalies every 5 s.
  ASSERT_TRUE(Eventually([&] { return Contains(ReadFile(notified), "holds 20.0 GiB on GPU 0"); }, 30)) << d.Log();
  // Not stopped: 3 s more (three of the job's own samples, past any grace) and it still runs.
  EXPECT_FALSE(Eventually([&] { return d.State(id) != "running"; }, 3)) << d.State(id);
  Touch(gate);
  ASSERT_TRUE(d.WaitForState(id, "completed", 30)) << d.Log() << JobLog(d, id);
  EXPECT_EQ(d.Show(id).value("exit_code", -1), 0);
}

TEST(MemoryGuard, AJobHoldingItsGpuWholeIsNeverTouchedWhateverItHolds) {
  if (geteuid() != 0) GTEST_SKIP() << "anomaly.overuse_grace may only be set by root";
  TestDaemon d(WithGrace("1s"));
  const fs::path gate = d.work() / "gate";
  const std::int64_t id = d.Submit(GuardArgs({"-g", "1"}, GrowingJob(d.machine().dir() / "nvml.json", 4, 120, gate)));
  ASSERT_TRUE(d.WaitForState(id, "running"));
  ASSERT_TRUE(Eventually([&] { return SamplerSaw(d, std::to_string(id), 120 * kGiB); }, 30)) << d.Log();
  EXPECT_FALSE(Eventually([&] { return d.State(id) != "running"; }, 3)) << "stopped: " << d.Show(id).dump(2);
  Touch(gate);
  ASSERT_TRUE(d.WaitForState(id, "completed", 30)) << d.Log() << JobLog(d, id);
  EXPECT_FALSE(HasEvent(d, "overuse", std::to_string(id)));
  EXPECT_FALSE(Contains(JobLog(d, id), "over its declared")) << JobLog(d, id);
}

// Without a daemon `gpulane run` watches its own job: warned on stderr, stopped, exit 18. The
// time from the job's crossing (its own clock) to run's exit is the figure docs/security.md quotes.
TEST(MemoryGuard, RunWithoutADaemonStopsItsMemJobAfterTheGraceAndSaysWhyMeasuringTheTimeToStop) {
  if (geteuid() != 0) GTEST_SKIP() << "anomaly.overuse_grace may only be set by root";
  json state = IdleGpus(1);
  state["devices"][0]["processes"] = json::array();
  FakeMachine machine(state);
  const fs::path config = machine.dir() / "machine.toml";
  std::ofstream(config) << "[anomaly]\noveruse_grace = \"1s\"\n";
  Env env = machine.env();
  env["GPULANE_CONFIG"] = config.string();
  RunResult r = RunGpulane(GuardArgs({"run", "--mem", "10GiB"}, GrowingJob(machine.dir() / "nvml.json", 4, 20, machine.dir() / "gate")),
                           env, 60);
  const double ended_s = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  EXPECT_EQ(r.exit_code, 18) << r.err;
  EXPECT_TRUE(Contains(r.err, "over its declared 10.0 GiB (--mem) and the 1.0 GiB margin: it is stopped in 1.0 s")) << r.err;
  EXPECT_TRUE(Contains(r.err, "gpulane: error: the job was stopped: memory over declaration: held 20480 MiB on GPU 0, over "
                              "its limit of 11264 MiB")) << r.err;
  ASSERT_TRUE(Contains(r.out, "crossed ")) << r.out;
  const double crossed_s = std::stod(r.out.substr(r.out.find("crossed ") + 8));
  const double to_stop_s = ended_s - crossed_s;
  // 1 s sampling: seen within 1 s, the grace (1 s), then the stop: the target is 2 s past the grace.
  fmt::print("memory guard: crossing to stop {:.2f} s (grace 1 s, 1 s sampling; {:.2f} s past the grace)\n", to_stop_s,
             to_stop_s - 1);
  EXPECT_LE(to_stop_s, 1 + 2 + 0.5) << r.err;
}

}  // namespace
}  // namespace gpulane::test
