// The snapshot's wire form (daemon -> commands) keeps what the scheduler decides by: each process's
// kind, and unknown process lists as unknown.
#include "gpu/snapshot_json.h"

#include <gtest/gtest.h>

namespace gpulane {
namespace {

GpuSnapshot OneGpu() {
  GpuSnapshot s;
  GpuDevice d;
  d.uuid = "GPU-1";
  d.pci_bus_id = "00000000:18:00.0";
  d.processes.emplace();
  GpuProcess compute, graphics, both;
  compute.pid = 10;
  graphics.pid = 11;
  graphics.kind = ProcessKind::kGraphics;
  both.pid = 12;
  both.kind = ProcessKind::kComputeAndGraphics;
  both.used_memory_bytes = 1 << 20;
  d.processes->assign({compute, graphics, both});
  s.devices.push_back(d);
  GpuDevice unknown;
  unknown.uuid = "GPU-2";
  unknown.pci_bus_id = "00000000:28:00.0";
  unknown.pci_index = 1;
  s.devices.push_back(unknown);
  return s;
}

TEST(SnapshotJson, ProcessKindsAndUnknownListsSurviveTheRoundTrip) {
  auto back = SnapshotFromJson(SnapshotToJson(OneGpu()));
  ASSERT_TRUE(back) << back.error().message;
  ASSERT_EQ(back->devices.size(), 2u);
  ASSERT_TRUE(back->devices[0].processes);
  const auto& procs = *back->devices[0].processes;
  ASSERT_EQ(procs.size(), 3u);
  EXPECT_EQ(procs[0].kind, ProcessKind::kCompute);
  EXPECT_EQ(procs[1].kind, ProcessKind::kGraphics);
  EXPECT_EQ(procs[2].kind, ProcessKind::kComputeAndGraphics);
  EXPECT_EQ(procs[2].used_memory_bytes, 1u << 20);
  EXPECT_FALSE(back->devices[1].processes) << "unknown stays unknown, never empty";
}

TEST(SnapshotJson, AProcessWithoutKindIsComputeAndAnUnknownKindIsAnError) {
  nlohmann::json j = SnapshotToJson(OneGpu());
  j["devices"][0]["processes"][1].erase("kind");
  auto back = SnapshotFromJson(j);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ((*back->devices[0].processes)[1].kind, ProcessKind::kCompute);
  j["devices"][0]["processes"][1]["kind"] = "mps";
  auto bad = SnapshotFromJson(j);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("mps"), std::string::npos) << bad.error().message;
}

}  // namespace
}  // namespace gpulane
