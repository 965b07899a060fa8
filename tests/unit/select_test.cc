// Which GPUs qualify for a request, in what order, which set is taken, and how it is printed.
#include "gpu/select.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace gpulane {
namespace {

using Indices = std::vector<unsigned>;
constexpr std::uint64_t kGiB = 1ULL << 30;
constexpr std::uint32_t kSelf = 1000;

GpuSnapshot Idle(unsigned n) {
  GpuSnapshot s;
  for (unsigned i = 0; i < n; ++i) {
    GpuDevice d;
    d.pci_index = d.nvml_index = i;
    d.uuid = "GPU-" + std::to_string(i) + "0000000-92ce-068a-58c5-7c2f58de6be6";
    d.pci_bus_id = "00000000:1" + std::to_string(i) + ":00.0";
    d.memory_total_bytes = 140 * kGiB;
    d.memory_free_bytes = 140 * kGiB;
    d.memory_used_bytes = 0;
    d.utilization_gpu_pct = 0;
    d.compute_mode = ComputeMode::kDefault;
    d.mig_enabled = false;
    d.processes = std::vector<GpuProcess>{};
    s.devices.push_back(d);
  }
  return s;
}

GpuProcess Proc(std::uint32_t pid, std::optional<std::uint32_t> uid, const char* user = nullptr) {
  GpuProcess p;
  p.pid = pid;
  p.uid = uid;
  if (user) p.user = user;
  p.command = "python";
  return p;
}

std::vector<GpuVerdict> Judge(const GpuSnapshot& s, const GpuRequest& r, VisibleDevices allowed = {}) {
  return JudgeGpus(s, allowed, r, kSelf);
}

TEST(JudgeGpus, IdleGpusQualify) {
  auto verdicts = Judge(Idle(2), {});
  ASSERT_EQ(verdicts.size(), 2u);
  for (unsigned i = 0; i < 2; ++i) {
    EXPECT_EQ(verdicts[i].pci_index, i);
    EXPECT_TRUE(verdicts[i].qualifies);
    EXPECT_EQ(verdicts[i].reason, "");
  }
}

// Each rule on its own GPU; every other GPU stays idle and qualifies.
TEST(JudgeGpus, EachReasonNamesItsCause) {
  GpuSnapshot s = Idle(10);
  s.devices[1].error = "NVML_ERROR_GPU_IS_LOST";
  s.devices[2].mig_enabled = true;
  s.devices[3].compute_mode = ComputeMode::kProhibited;
  s.devices[4].compute_mode = ComputeMode::kExclusiveProcess;
  s.devices[4].processes->push_back(Proc(40, kSelf, "me"));
  s.devices[5].processes->push_back(Proc(50, 2000, "alice"));
  s.devices[6].processes->push_back(Proc(60, std::nullopt));
  s.devices[7].memory_free_bytes = 3 * kGiB;
  s.devices[8].utilization_gpu_pct = 95;
  s.devices[9].memory_free_bytes.reset();
  GpuRequest r;
  r.min_free_bytes = 20 * kGiB;
  r.max_util_pct = 50;
  VisibleDevices allowed;
  allowed.restricted = true;
  allowed.pci_indices = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  auto v = Judge(s, r, allowed);
  const char* expected[] = {"not in CUDA_VISIBLE_DEVICES", "NVML_ERROR_GPU_IS_LOST", "MIG", "PROHIBITED",
                            "EXCLUSIVE_PROCESS",          "alice",                  "pid 60", "3.0 GiB free < 20.0 GiB",
                            "95% busy > 50%",             "free memory not reported"};
  for (unsigned i = 0; i < 10; ++i) {
    EXPECT_FALSE(v[i].qualifies) << i;
    EXPECT_NE(v[i].reason.find(expected[i]), std::string::npos) << i << ": " << v[i].reason;
  }
  EXPECT_NE(v[6].reason.find("not visible"), std::string::npos) << v[6].reason;
}

TEST(JudgeGpus, OwnProcessesDoNotExcludeAGpu) {
  GpuSnapshot s = Idle(1);
  s.devices[0].processes->push_back(Proc(10, kSelf, "me"));
  EXPECT_TRUE(Judge(s, {})[0].qualifies);
}

TEST(JudgeGpus, ShareForeignAcceptsOtherUsersAndInvisiblePids) {
  GpuSnapshot s = Idle(2);
  s.devices[0].processes->push_back(Proc(10, 2000, "alice"));
  s.devices[1].processes->push_back(Proc(11, std::nullopt));
  GpuRequest r;
  r.share_foreign = true;
  auto v = Judge(s, r);
  EXPECT_TRUE(v[0].qualifies) << v[0].reason;
  EXPECT_TRUE(v[1].qualifies) << v[1].reason;
}

TEST(JudgeGpus, LimitsAreInclusiveAndUnreportedUtilisationFailsAUtilLimit) {
  GpuSnapshot s = Idle(3);
  s.devices[0].memory_free_bytes = 20 * kGiB;
  s.devices[0].utilization_gpu_pct = 50;
  s.devices[1].memory_free_bytes = 20 * kGiB - 1;
  s.devices[2].utilization_gpu_pct.reset();
  GpuRequest r;
  r.min_free_bytes = 20 * kGiB;
  r.max_util_pct = 50;
  auto v = Judge(s, r);
  EXPECT_TRUE(v[0].qualifies) << v[0].reason;
  EXPECT_FALSE(v[1].qualifies);
  EXPECT_FALSE(v[2].qualifies);
  EXPECT_NE(v[2].reason.find("utilisation not reported"), std::string::npos) << v[2].reason;
  // Without limits, the unreported values do not matter.
  EXPECT_TRUE(Judge(s, {})[2].qualifies);
}

std::vector<unsigned> Rank(const GpuSnapshot& s, PickOrder order) { return RankQualifying(s, Judge(s, {}), order); }

TEST(RankQualifying, MostFreeFirstThenLowerUtilisationThenPciOrder) {
  GpuSnapshot s = Idle(5);
  s.devices[0].memory_free_bytes = 10 * kGiB;
  s.devices[1].memory_free_bytes = 50 * kGiB;
  s.devices[1].utilization_gpu_pct = 30;
  s.devices[2].memory_free_bytes = 50 * kGiB;
  s.devices[2].utilization_gpu_pct = 10;
  s.devices[3].memory_free_bytes = 50 * kGiB;
  s.devices[3].utilization_gpu_pct = 10;
  s.devices[4].memory_free_bytes = 90 * kGiB;
  s.devices[4].utilization_gpu_pct = 100;
  EXPECT_EQ(Rank(s, PickOrder::kMostFree), (Indices{4, 2, 3, 1, 0}));
}

TEST(RankQualifying, LeastUtilFirstThenMostFreeThenPciOrder) {
  GpuSnapshot s = Idle(4);
  s.devices[0].utilization_gpu_pct = 40;
  s.devices[1].utilization_gpu_pct = 5;
  s.devices[1].memory_free_bytes = 10 * kGiB;
  s.devices[2].utilization_gpu_pct = 5;
  s.devices[3].utilization_gpu_pct = 5;
  EXPECT_EQ(Rank(s, PickOrder::kLeastUtil), (Indices{2, 3, 1, 0}));
}

TEST(RankQualifying, UnreportedUtilisationRanksAfterAnyReportedValue) {
  GpuSnapshot s = Idle(2);
  s.devices[0].utilization_gpu_pct.reset();
  s.devices[1].utilization_gpu_pct = 100;
  EXPECT_EQ(Rank(s, PickOrder::kMostFree), (Indices{1, 0}));
  EXPECT_EQ(Rank(s, PickOrder::kLeastUtil), (Indices{1, 0}));
}

TEST(RankQualifying, PciOrderAndOnlyQualifyingGpus) {
  GpuSnapshot s = Idle(4);
  s.devices[3].memory_free_bytes = 1;
  s.devices[1].error = "NVML_ERROR_GPU_IS_LOST";
  EXPECT_EQ(Rank(s, PickOrder::kPci), (Indices{0, 2, 3}));
  EXPECT_EQ(Rank(s, PickOrder::kMostFree), (Indices{0, 2, 3}));
}

void Link(GpuSnapshot& s, unsigned a, unsigned b) {
  s.devices[a].nvlink_peers.push_back({s.devices[b].pci_bus_id, 4});
  s.devices[b].nvlink_peers.push_back({s.devices[a].pci_bus_id, 4});
}

TEST(ChooseSet, WithoutNvLinksTakesTheTopOfTheRanking) {
  GpuSnapshot s = Idle(4);
  EXPECT_EQ(ChooseSet(s, {3, 1, 0, 2}, 2), (Indices{3, 1}));
  EXPECT_EQ(ChooseSet(s, {3, 1, 0, 2}, 1), (Indices{3}));
  EXPECT_EQ(ChooseSet(s, {3, 1}, 3), (Indices{3, 1})) << "fewer only when the ranking is shorter";
}

TEST(ChooseSet, PrefersAnNvLinkedSet) {
  GpuSnapshot s = Idle(4);
  Link(s, 0, 1);
  Link(s, 2, 3);
  // Best two are 0 and 2, not linked; 0 and 1 are.
  Indices set = ChooseSet(s, {0, 2, 1, 3}, 2);
  EXPECT_EQ(set, (Indices{0, 1}));
}

TEST(ChooseSet, EveryPairOfTheSetIsLinked) {
  GpuSnapshot s = Idle(6);
  // A chain 0-1-2 (0 and 2 not linked) and a triangle 3-4-5.
  Link(s, 0, 1);
  Link(s, 1, 2);
  Link(s, 3, 4);
  Link(s, 4, 5);
  Link(s, 3, 5);
  Indices set = ChooseSet(s, {0, 1, 2, 3, 4, 5}, 3);
  std::sort(set.begin(), set.end());
  EXPECT_EQ(set, (Indices{3, 4, 5}));
}

TEST(ChooseSet, NoFullyLinkedSetFallsBackToTheRanking) {
  GpuSnapshot s = Idle(4);
  Link(s, 0, 1);
  EXPECT_EQ(ChooseSet(s, {2, 0, 3, 1}, 3), (Indices{2, 0, 3}));
}

TEST(FormatVisibleDevices, PciIndicesAscendingOrUuids) {
  GpuSnapshot s = Idle(4);
  EXPECT_EQ(FormatVisibleDevices(s, {3, 1}, false), "1,3");
  EXPECT_EQ(FormatVisibleDevices(s, {2}, false), "2");
  EXPECT_EQ(FormatVisibleDevices(s, {3, 0}, true), s.devices[0].uuid + "," + s.devices[3].uuid);
  EXPECT_EQ(FormatVisibleDevices(s, {}, false), "");
}

}  // namespace
}  // namespace gpulane
