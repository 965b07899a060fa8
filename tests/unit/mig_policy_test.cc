// MIG devices as schedulable units in the lease policy (sched::Schedule with MigUnits): a request
// of a profile gets one free MIG device of it, whole; whole-GPU requests never get a MIG-enabled GPU.
#include "sched/policy.h"
#include "support/units.h"
#include "support/decisions.h"

#include <gtest/gtest.h>

namespace gpulane::sched {
namespace {

std::vector<GpuState> OneWholeAndOneMigGpu() {
  std::vector<GpuState> gpus(2);
  for (unsigned i = 0; i < 2; ++i) {
    gpus[i].index = i;
    gpus[i].uuid = "GPU-" + std::to_string(i);
    gpus[i].total_bytes = gpus[i].free_bytes = 140 * kGiB;
    gpus[i].util_pct = 0;
  }
  gpus[1].usable = false;
  gpus[1].unusable_reason = "MIG mode on";
  return gpus;
}

std::vector<MigUnit> Units() {
  std::vector<MigUnit> units;
  for (const char* profile : {"3g.71gb", "1g.18gb", "1g.18gb"}) {
    MigUnit u;
    u.gpu_index = 1;
    u.gpu_uuid = "GPU-1";
    u.uuid = "MIG-" + std::to_string(units.size());
    u.profile = profile;
    units.push_back(u);
  }
  return units;
}

Request Mig(std::string profile, std::string user = "alice") {
  Request r;
  r.user = std::move(user);
  r.mig_profile = std::move(profile);
  return r;
}

TEST(MigPolicy, ARequestOfAProfileGetsAFreeMigDeviceOfItOnItsGpu) {
  const std::vector<MigUnit> units = Units();
  auto d = Schedule(OneWholeAndOneMigGpu(), {Mig("1g.18gb")}, kNoMargin, units);
  ASSERT_TRUE(d[0].granted);
  EXPECT_EQ(d[0].mig_uuid, "MIG-1");
  EXPECT_EQ(d[0].gpus, std::vector<unsigned>{1});
}

TEST(MigPolicy, EachMigDeviceGoesToOneRequestAndTheNextWaitsSayingWhy) {
  std::vector<MigUnit> units = Units();
  units[1].holder = "bob (job 7)";
  auto d = Schedule(OneWholeAndOneMigGpu(), {Mig("1g.18gb"), Mig("1g.18gb", "carol")}, kNoMargin, units);
  ASSERT_TRUE(d[0].granted);
  EXPECT_EQ(d[0].mig_uuid, "MIG-2");
  EXPECT_FALSE(d[1].granted);
  EXPECT_FALSE(d[1].impossible);
  EXPECT_EQ(d[1].position, 1u);
  ASSERT_EQ(d[1].reasons.size(), 2u);
  EXPECT_EQ(d[1].reasons[0], "MIG-1 (GPU1 1g.18gb): leased by bob (job 7)");
  EXPECT_EQ(d[1].reasons[1], "MIG-2 (GPU1 1g.18gb): given to an earlier request");
}

TEST(MigPolicy, AForeignProcessOnAMigDeviceKeepsItUnlessShareForeign) {
  std::vector<MigUnit> units = Units();
  units[0].foreign = {"bob's python (pid 12)"};
  auto d = Schedule(OneWholeAndOneMigGpu(), {Mig("3g.71gb")}, kNoMargin, units);
  EXPECT_FALSE(d[0].granted);
  Request shared = Mig("3g.71gb");
  shared.share_foreign = true;
  d = Schedule(OneWholeAndOneMigGpu(), {shared}, kNoMargin, units);
  EXPECT_TRUE(d[0].granted);
}

TEST(MigPolicy, AnUnknownProfileIsImpossibleAndNamesTheProfilesHere) {
  const std::vector<MigUnit> units = Units();
  const Request r = Mig("2g.35gb");
  auto d = Schedule(OneWholeAndOneMigGpu(), {r}, kNoMargin, units);
  EXPECT_TRUE(d[0].impossible);
  EXPECT_EQ(ImpossibleReason(r, d[0], 2),
            "asked for a MIG device of profile 2g.35gb but none here can ever qualify: no MIG device of profile "
            "2g.35gb that this job may use; MIG profiles here: 3g.71gb, 1g.18gb (gpulane status lists the MIG devices)");
  d = Schedule(OneWholeAndOneMigGpu(), {r}, kNoMargin, {});
  EXPECT_NE(ImpossibleReason(r, d[0], 2).find("no GPU here is in MIG mode"), std::string::npos);
}

TEST(MigPolicy, WholeGpuRequestsNeverGetTheMigGpuAndMigRequestsBlockNobody) {
  const std::vector<MigUnit> units = Units();
  auto gpus = OneWholeAndOneMigGpu();
  gpus[0].exclusive_holder = "bob (job 3)";
  Request whole;
  whole.user = "dave";
  // dave waits for GPU0 (GPU1 is in MIG mode); alice's MIG request behind him starts at once.
  auto d = Schedule(gpus, {whole, Mig("1g.18gb")}, kNoMargin, units);
  EXPECT_FALSE(d[0].granted);
  EXPECT_TRUE(d[1].granted);
}

TEST(MigPolicy, TheRequestMayNameTheMigDeviceOrItsGpu) {
  const std::vector<MigUnit> units = Units();
  Request by_mig = Mig("1g.18gb");
  by_mig.allowed_uuids = std::vector<std::string>{"MIG-2"};
  auto d = Schedule(OneWholeAndOneMigGpu(), {by_mig}, kNoMargin, units);
  EXPECT_EQ(d[0].mig_uuid, "MIG-2");
  Request by_gpu = Mig("1g.18gb");
  by_gpu.allowed_uuids = std::vector<std::string>{"GPU-0"};  // not the MIG GPU
  d = Schedule(OneWholeAndOneMigGpu(), {by_gpu}, kNoMargin, units);
  EXPECT_TRUE(d[0].impossible);
}

TEST(MigPolicy, CheckRequestRefusesMoreThanOneMigDeviceAndMemoryOptions) {
  Request r = Mig("1g.18gb");
  EXPECT_TRUE(CheckRequest(r).ok());
  r.count = 2;
  EXPECT_EQ(CheckRequest(r).error().message,
            "-g 2 --mig: CUDA uses only one MIG device per process; ask for -g 1 (an array of jobs for more)");
  r = Mig("1g.18gb");
  r.mem_bytes = kGiB;
  EXPECT_FALSE(CheckRequest(r).ok());
  r = Mig("1g 18gb; rm");
  EXPECT_FALSE(CheckRequest(r).ok());
}

}  // namespace
}  // namespace gpulane::sched
