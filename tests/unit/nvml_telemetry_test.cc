// The telemetry fields of a GPU read (ReadOptions::telemetry: the daemon's sampler) through the
// real dlopen path and the fake NVML: present exactly when the fake reports them, never made up.
#include <cstdlib>

#include <gtest/gtest.h>

#include "gpu/nvml_backend.h"
#include "gpu/snapshot_json.h"
#include "support/harness.h"
#include "support/scenarios.h"

namespace gpulane::test {
namespace {

using nlohmann::json;

// NVML as the daemon's sampler opens it, over `machine` (this process's FAKE_NVML_STATE).
std::unique_ptr<NvmlBackend> OpenOver(const FakeMachine& machine, const std::string& variant = "current") {
  setenv("FAKE_NVML_STATE", machine.env().at("FAKE_NVML_STATE").c_str(), 1);
  static const SystemClock clock{};  // the backends' (GPULANE_TIMING only)
  auto backend = NvmlBackend::Open(clock, FakeNvmlLibrary(variant));
  EXPECT_TRUE(backend) << backend.error().message;
  return backend ? std::move(backend).value() : nullptr;
}

ReadOptions Telemetry() {
  ReadOptions options;
  options.telemetry = true;
  return options;
}

TEST(NvmlTelemetry, EnergyClocksReasonsEccAndProcessUtilizationAsTheDriverReportsThem) {
  const std::uint32_t pid = UnusedPid();
  json state = RecordedH200x2(pid);  // GPU 1 runs `pid`; recorded clocks and throttle reasons
  state["devices"][0]["energy_mj"] = 123456789;
  state["devices"][0]["ecc_uncorrected"] = 2;
  state["devices"][1]["process_util"] = json::array({{{"pid", pid}, {"sm", 87}, {"mem", 12}}});
  FakeMachine machine(state);
  auto backend = OpenOver(machine);
  ASSERT_TRUE(backend);

  auto plain = backend->Read();
  ASSERT_TRUE(plain) << plain.error().message;
  EXPECT_FALSE(plain->devices[0].energy_mj) << "telemetry is read only when asked for";
  EXPECT_FALSE(plain->devices[0].clock_sm_mhz);

  auto snap = backend->Read(Telemetry());
  ASSERT_TRUE(snap) << snap.error().message;
  const GpuDevice& g0 = snap->devices[0];
  const GpuDevice& g1 = snap->devices[1];
  EXPECT_EQ(g0.energy_mj, 123456789u);
  EXPECT_FALSE(g1.energy_mj) << "not reported: absent, not 0";
  EXPECT_EQ(g0.clock_sm_mhz, 345u);
  EXPECT_EQ(g0.clock_mem_mhz, 3201u);
  EXPECT_EQ(g1.clock_sm_mhz, 1980u);
  EXPECT_EQ(g0.clocks_event_reasons, nvmlClocksEventReasonGpuIdle);
  EXPECT_EQ(g1.clocks_event_reasons, 0u);
  EXPECT_EQ(g0.ecc_uncorrected_volatile, 2u);
  EXPECT_FALSE(g1.ecc_uncorrected_volatile);
  ASSERT_TRUE(g1.processes);
  ASSERT_EQ(g1.processes->size(), 1u);
  EXPECT_EQ((*g1.processes)[0].sm_util_pct, 87u);
}

// The sampler reads one GPU after another on its own thread after its first sample (no thread a GPU
// a second: bench/results/sampler-floor-2026-12-06.md); that read must see every GPU, each field
// as the parallel read does.
TEST(NvmlTelemetry, ASequentialReadSeesEveryGpuAsTheParallelReadDoes) {
  const std::uint32_t pid = UnusedPid();
  json state = RecordedH200x2(pid);
  state["devices"][0]["energy_mj"] = 123456789;
  state["devices"][1]["process_util"] = json::array({{{"pid", pid}, {"sm", 87}, {"mem", 12}}});
  FakeMachine machine(state);
  auto parallel_backend = OpenOver(machine);
  auto sequential_backend = OpenOver(machine);
  ASSERT_TRUE(parallel_backend && sequential_backend);
  ReadOptions sequential = Telemetry();
  sequential.parallel = false;
  auto a = parallel_backend->Read(Telemetry());
  auto b = sequential_backend->Read(sequential);
  ASSERT_TRUE(a && b);
  ASSERT_EQ(b->devices.size(), 2u);
  EXPECT_EQ(b->devices[0].energy_mj, 123456789u);
  ASSERT_TRUE(b->devices[1].processes);
  ASSERT_EQ(b->devices[1].processes->size(), 1u);
  EXPECT_EQ((*b->devices[1].processes)[0].sm_util_pct, 87u);
  EXPECT_EQ(SnapshotToJson(*a).dump(), SnapshotToJson(*b).dump());
}

TEST(NvmlTelemetry, AProcessWithoutAUtilizationSampleUsedNoneAndAGpuWithoutTheCallLeavesItAbsent) {
  const std::uint32_t busy = UnusedPid();
  json state = RecordedH200x2(busy);
  const std::uint32_t idle = busy + 1;
  AddProcess(state["devices"][1], idle, 1ULL << 30);
  state["devices"][1]["process_util"] = json::array({{{"pid", busy}, {"sm", 40}}});
  AddProcess(state["devices"][0], idle + 1, 1ULL << 30);  // GPU 0 does not report process utilisation
  FakeMachine machine(state);
  auto backend = OpenOver(machine);
  ASSERT_TRUE(backend);
  auto snap = backend->Read(Telemetry());
  ASSERT_TRUE(snap) << snap.error().message;
  for (const auto& p : *snap->devices[1].processes) EXPECT_EQ(p.sm_util_pct, p.pid == busy ? 40u : 0u) << p.pid;
  for (const auto& p : *snap->devices[0].processes) EXPECT_FALSE(p.sm_util_pct) << p.pid;
}

TEST(NvmlTelemetry, XidErrorsAreThoseRaisedSinceThePreviousReadOnGpusThatCanReportThem) {
  json state = RecordedH200x2(UnusedPid());
  state["devices"][0]["xids"] = json::array({13});  // raised before gpulane watched: not reported
  FakeMachine machine(state);
  auto backend = OpenOver(machine);
  ASSERT_TRUE(backend);
  auto first = backend->Read(Telemetry());
  ASSERT_TRUE(first);
  ASSERT_TRUE(first->devices[0].xid_errors);
  EXPECT_TRUE(first->devices[0].xid_errors->empty());
  EXPECT_FALSE(first->devices[1].xid_errors) << "a GPU that cannot be watched: unknown, not none";

  machine.state()["devices"][0]["xids"].push_back(79);
  machine.state()["devices"][0]["xids"].push_back(48);
  machine.Save();
  auto second = backend->Read(Telemetry());
  ASSERT_TRUE(second);
  ASSERT_TRUE(second->devices[0].xid_errors);
  EXPECT_EQ(*second->devices[0].xid_errors, (std::vector<std::uint64_t>{79, 48}));

  auto third = backend->Read(Telemetry());
  ASSERT_TRUE(third);
  ASSERT_TRUE(third->devices[0].xid_errors);
  EXPECT_TRUE(third->devices[0].xid_errors->empty()) << "each Xid is reported once";
}

TEST(NvmlTelemetry, DriversBefore535GiveTheClockReasonsUnderTheirOlderName) {
  FakeMachine machine(RecordedH200x2(UnusedPid()), "legacy");
  auto backend = OpenOver(machine, "legacy");
  ASSERT_TRUE(backend);
  auto snap = backend->Read(Telemetry());
  ASSERT_TRUE(snap) << snap.error().message;
  EXPECT_EQ(snap->devices[0].clocks_event_reasons, nvmlClocksEventReasonGpuIdle)
      << "nvmlDeviceGetCurrentClocksThrottleReasons, the fallback of the entry";
}

}  // namespace
}  // namespace gpulane::test
