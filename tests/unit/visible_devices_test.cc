// CUDA_VISIBLE_DEVICES parsed as CUDA parses it (CUDA C++ Programming Guide, "CUDA Environment
// Variables"): indices, GPU- UUIDs and unique prefixes, MIG- UUIDs; the first bad entry ends the list.
#include "gpu/visible_devices.h"

#include <gtest/gtest.h>

#include <map>

namespace gpulane {
namespace {

using Indices = std::vector<unsigned>;

// Four GPUs in PCI order; GPUs 1 and 2 share the UUID prefix "GPU-7a3c"; GPU 3 is MIG-enabled.
GpuSnapshot FourGpus() {
  GpuSnapshot s;
  const char* uuids[] = {"GPU-9fb12d3a-92ce-068a-58c5-7c2f58de6be6", "GPU-7a3c1111-0843-21da-7a3c-88969e2a9af7",
                         "GPU-7a3c2222-0843-21da-7a3c-88969e2a9af7", "GPU-d0000000-1111-2222-3333-444444444444"};
  for (unsigned i = 0; i < 4; ++i) {
    GpuDevice d;
    d.pci_index = i;
    d.nvml_index = 3 - i;
    d.uuid = uuids[i];
    s.devices.push_back(d);
  }
  s.devices[3].mig_enabled = true;
  s.devices[3].mig_devices = {{"MIG-5c1a3c8e-7f4d-5f7e-9a3b-2d1e0f9c8b7a"}, {"MIG-5c1a9999-7f4d-5f7e-9a3b-2d1e0f9c8b7a"}};
  return s;
}

VisibleDevices Parse(const char* value) { return ParseCudaVisibleDevices(std::string_view(value), FourGpus()); }

TEST(CudaVisibleDevices, UnsetMeansEveryGpu) {
  VisibleDevices v = ParseCudaVisibleDevices(std::nullopt, FourGpus());
  EXPECT_FALSE(v.restricted);
  for (unsigned i = 0; i < 4; ++i) EXPECT_TRUE(v.Allows(i)) << i;
  EXPECT_FALSE(v.ended_by);
}

TEST(CudaVisibleDevices, EmptyMeansNoGpu) {
  VisibleDevices v = Parse("");
  EXPECT_TRUE(v.restricted);
  EXPECT_TRUE(v.pci_indices.empty());
  for (unsigned i = 0; i < 4; ++i) EXPECT_FALSE(v.Allows(i)) << i;
}

TEST(CudaVisibleDevices, IndicesKeepTheListsOrder) {
  VisibleDevices v = Parse("2,0");
  EXPECT_EQ(v.pci_indices, (Indices{2, 0}));
  EXPECT_TRUE(v.Allows(0));
  EXPECT_FALSE(v.Allows(1));
  EXPECT_TRUE(v.Allows(2));
  EXPECT_FALSE(v.Allows(3));
  EXPECT_FALSE(v.ended_by);
}

TEST(CudaVisibleDevices, InvalidEntryEndsTheList) {
  VisibleDevices v = Parse("0,2,-1,1");
  EXPECT_EQ(v.pci_indices, (Indices{0, 2}));
  EXPECT_FALSE(v.Allows(1)) << "entries after the invalid one are ignored";
  ASSERT_TRUE(v.ended_by);
  EXPECT_NE(v.ended_by->find("-1"), std::string::npos) << *v.ended_by;
}

TEST(CudaVisibleDevices, GarbageFirstMeansNoGpu) {
  VisibleDevices v = Parse("gpu0,1");
  EXPECT_TRUE(v.restricted);
  EXPECT_TRUE(v.pci_indices.empty());
  ASSERT_TRUE(v.ended_by);
  EXPECT_NE(v.ended_by->find("gpu0"), std::string::npos) << *v.ended_by;
}

TEST(CudaVisibleDevices, OutOfRangeIndexEndsTheList) {
  VisibleDevices v = Parse("1,4,0");
  EXPECT_EQ(v.pci_indices, (Indices{1}));
  ASSERT_TRUE(v.ended_by);
  EXPECT_NE(v.ended_by->find("4"), std::string::npos) << *v.ended_by;
}

TEST(CudaVisibleDevices, RepeatedGpuEndsTheList) {
  EXPECT_EQ(Parse("0,1,0,2").pci_indices, (Indices{0, 1}));
  EXPECT_TRUE(Parse("0,1,0,2").ended_by);
  // The same GPU named once by index and once by UUID is a repeat too.
  EXPECT_EQ(Parse("3,0,GPU-9fb12d3a-92ce-068a-58c5-7c2f58de6be6,1").pci_indices, (Indices{3, 0}));
}

TEST(CudaVisibleDevices, FullUuids) {
  VisibleDevices v = Parse("GPU-7a3c2222-0843-21da-7a3c-88969e2a9af7,GPU-9fb12d3a-92ce-068a-58c5-7c2f58de6be6");
  EXPECT_EQ(v.pci_indices, (Indices{2, 0}));
  EXPECT_FALSE(v.ended_by);
}

TEST(CudaVisibleDevices, UniqueUuidPrefixes) {
  EXPECT_EQ(Parse("GPU-9f").pci_indices, (Indices{0}));
  EXPECT_EQ(Parse("GPU-7a3c2,GPU-7a3c1").pci_indices, (Indices{2, 1}));
}

TEST(CudaVisibleDevices, AmbiguousPrefixEndsTheList) {
  VisibleDevices v = Parse("0,GPU-7a3c,3");
  EXPECT_EQ(v.pci_indices, (Indices{0}));
  ASSERT_TRUE(v.ended_by);
  EXPECT_NE(v.ended_by->find("GPU-7a3c"), std::string::npos) << *v.ended_by;
}

TEST(CudaVisibleDevices, UnknownUuidEndsTheList) {
  VisibleDevices v = Parse("1,GPU-00000000,2");
  EXPECT_EQ(v.pci_indices, (Indices{1}));
  EXPECT_TRUE(v.ended_by);
}

TEST(CudaVisibleDevices, MigUuidNamesItsParentGpu) {
  VisibleDevices v = Parse("MIG-5c1a9999-7f4d-5f7e-9a3b-2d1e0f9c8b7a");
  EXPECT_EQ(v.pci_indices, (Indices{3}));
  EXPECT_EQ(v.mig_uuids, (std::vector<std::string>{"MIG-5c1a9999-7f4d-5f7e-9a3b-2d1e0f9c8b7a"}));
  EXPECT_TRUE(v.Allows(3));
  EXPECT_FALSE(v.Allows(0));
}

TEST(CudaVisibleDevices, UnknownMigUuidEndsTheList) {
  VisibleDevices v = Parse("0,MIG-ffffffff-7f4d-5f7e-9a3b-2d1e0f9c8b7a,1");
  EXPECT_EQ(v.pci_indices, (Indices{0}));
  EXPECT_TRUE(v.mig_uuids.empty());
  EXPECT_TRUE(v.ended_by);
}

TEST(GpuList, StrictListReportsTheBadEntryInsteadOfEndingQuietly) {
  std::string error;
  VisibleDevices v = ParseGpuList("0,7", FourGpus(), &error);
  EXPECT_NE(error.find("7"), std::string::npos) << error;
  error.clear();
  v = ParseGpuList("1,GPU-9f", FourGpus(), &error);
  EXPECT_TRUE(error.empty()) << error;
  EXPECT_EQ(v.pci_indices, (Indices{1, 0}));
}


// Inside a Slurm job (issue 12, item 3): Slurm's GPU list bounds every choice.

InheritedGpus InSlurm(const char* slurm, std::optional<std::string> cuda = std::nullopt) {
  InheritedGpus in;
  in.cuda_visible_devices = std::move(cuda);
  in.slurm_gpus = slurm;
  in.slurm_variable = "SLURM_JOB_GPUS";
  return in;
}

std::vector<std::string> Allowed(const InheritedGpus& in, const GpuSnapshot& s, const std::string& list = "") {
  auto r = ResolveAllowedGpus(list, in, s);
  EXPECT_TRUE(r.ok());
  return r ? *r : std::vector<std::string>{};
}

TEST(SlurmAllocation, ReadOnlyOnTheJobsNodeAndStepGpusBeforeJobGpus) {
  std::map<std::string, std::string> env = {{"SLURM_JOB_ID", "7"}, {"SLURM_JOB_GPUS", "1,2"}, {"CUDA_VISIBLE_DEVICES", "1,2"}};
  auto lookup = [&](const char* name) -> std::optional<std::string> {
    auto it = env.find(name);
    return it == env.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
  EXPECT_FALSE(InheritedGpusFrom(lookup).in_slurm()) << "an salloc shell on a login node has no SLURMD_NODENAME";
  env["SLURMD_NODENAME"] = "gpu01";
  InheritedGpus in = InheritedGpusFrom(lookup);
  EXPECT_EQ(in.slurm_gpus, "1,2");
  EXPECT_EQ(in.slurm_variable, "SLURM_JOB_GPUS");
  env["SLURM_STEP_GPUS"] = "2";
  in = InheritedGpusFrom(lookup);
  EXPECT_EQ(in.slurm_gpus, "2");
  EXPECT_EQ(in.slurm_variable, "SLURM_STEP_GPUS");
  EXPECT_EQ(in.cuda_visible_devices, "1,2");
}

TEST(SlurmAllocation, WithoutCudaVisibleDevicesOnlyTheJobsGpus) {
  const GpuSnapshot s = FourGpus();
  EXPECT_EQ(Allowed(InSlurm("1,3"), s), (std::vector<std::string>{s.devices[1].uuid, s.devices[3].uuid}));
  EXPECT_EQ(Allowed(InSlurm("0-2"), s).size(), 3u) << "a range";
}

TEST(SlurmAllocation, ACudaVisibleDevicesWiderThanTheJobIsCutToIt) {
  const GpuSnapshot s = FourGpus();
  VisibleDevices v = ParseInheritedGpus(InSlurm("1", "0,1,2"), s);
  EXPECT_EQ(v.pci_indices, (Indices{1}));
  ASSERT_TRUE(v.ended_by);
  EXPECT_NE(v.ended_by->find("GPU 0 is outside the Slurm allocation"), std::string::npos) << *v.ended_by;
  EXPECT_EQ(Allowed(InSlurm("1", "0,1,2"), s), (std::vector<std::string>{s.devices[1].uuid}));
  EXPECT_TRUE(Allowed(InSlurm("1", s.devices[2].uuid), s).empty()) << "a UUID outside the job";
}

TEST(SlurmAllocation, NarrowedByTheUserWithinTheJob) {
  const GpuSnapshot s = FourGpus();
  EXPECT_EQ(Allowed(InSlurm("1,2", "2"), s), (std::vector<std::string>{s.devices[2].uuid}));
  EXPECT_TRUE(Allowed(InSlurm("1,2", "1,2"), s, "0").empty()) << "--gpus 0 is outside the job";
}

TEST(SlurmAllocation, ConstrainedDevicesNumberCudaVisibleDevicesWithinTheJob) {
  // ConstrainDevices: NVML lists the node's four GPUs but cannot read the two outside the job, and
  // Slurm sets CUDA_VISIBLE_DEVICES=0,1 counted within the job's GPUs (1 and 3).
  GpuSnapshot s = FourGpus();
  s.devices[0].error = "Insufficient Permissions";
  s.devices[2].error = "Insufficient Permissions";
  EXPECT_EQ(Allowed(InSlurm("1,3", "0,1"), s), (std::vector<std::string>{s.devices[1].uuid, s.devices[3].uuid}));
  EXPECT_EQ(Allowed(InSlurm("1,3", "1"), s), (std::vector<std::string>{s.devices[3].uuid}));
}

TEST(SlurmAllocation, NvmlThatShowsOnlyTheJobsGpusIsTheAllocation) {
  // The job's cgroup hides the node's other GPUs from NVML: two GPUs here, Slurm's indices 5 and 6.
  GpuSnapshot s = FourGpus();
  s.devices.resize(2);
  EXPECT_EQ(Allowed(InSlurm("5,6", "0,1"), s).size(), 2u);
  EXPECT_EQ(Allowed(InSlurm("5,6", "1"), s), (std::vector<std::string>{s.devices[1].uuid}));
}

TEST(SlurmAllocation, AListThatIsNotIndicesAllowsNoGpuAndSaysWhy) {
  const GpuSnapshot s = FourGpus();
  for (const char* bad : {"gpu:2", "1,x", "3-1", "0,1,2,3,4,5", "11,3"}) {
    VisibleDevices v = ParseInheritedGpus(InSlurm(bad), s);
    EXPECT_TRUE(v.restricted) << bad;
    EXPECT_TRUE(v.pci_indices.empty()) << bad;
    ASSERT_TRUE(v.ended_by) << bad;
    EXPECT_NE(v.ended_by->find("no GPU is used"), std::string::npos) << *v.ended_by;
  }
}

TEST(SlurmAllocation, OutsideSlurmCudaVisibleDevicesAloneDecides) {
  InheritedGpus in;
  in.cuda_visible_devices = "2,0";
  EXPECT_EQ(ParseInheritedGpus(in, FourGpus()).pci_indices, (Indices{2, 0}));
}

}  // namespace
}  // namespace gpulane
