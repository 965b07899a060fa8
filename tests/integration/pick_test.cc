// `gpulane pick`: CUDA_VISIBLE_DEVICES=$(gpulane pick -n 2 --min-free 20GiB) python train.py
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "support/harness.h"
#include "support/scenarios.h"
#include "support/text.h"
#include "support/units.h"
#include "integration/judge_support.h"

namespace gpulane::test {
namespace {

using nlohmann::json;

RunResult Pick(const FakeMachine& machine, std::vector<std::string> args, const Env& extra = {}) {
  args.insert(args.begin(), "pick");
  Env env = machine.env();
  for (const auto& [k, v] : extra) env[k] = v;
  return RunGpulane(args, env);
}

// Too few GPUs free now: exit 5, nothing on stdout, one line on stderr.
::testing::AssertionResult TooFew(const RunResult& r, int code = 5) {
  if (r.exit_code == code && r.out.empty() && LineCount(r.err) == 1) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "expected exit " << code << " and one line on stderr, got exit " << r.exit_code
                                       << ", stdout '" << r.out << "', stderr '" << r.err << "'";
}

// A request these GPUs can never meet (more GPUs than may qualify): a bad request, exit 2.
::testing::AssertionResult NeverQualifies(const RunResult& r) { return TooFew(r, 2); }

TEST(Pick, TheDocumentedShellLineSetsCudaVisibleDevices) {
  FakeMachine machine(EightGpus());
  Env env = machine.env();
  env["GPULANE"] = GpulaneBinary();
  Child shell({"/bin/sh", "-c",
               "CUDA_VISIBLE_DEVICES=$(\"$GPULANE\" pick -n 2 --min-free 20GiB) sh -c 'echo \"[$CUDA_VISIBLE_DEVICES]\"'"},
              env);
  auto r = shell.Wait(30);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->exit_code, 0) << r->err;
  EXPECT_EQ(r->out, "[0,1]\n") << "eight idle GPUs: the first two in PCI order, which are NVLinked";
  EXPECT_TRUE(r->err.empty()) << r->err;
}

// Mixed models: NVML order differs from PCI order. Printed indices are PCI positions, ascending.
TEST(Pick, PrintsPciOrderIndicesAscendingOrUuids) {
  json state = MixedModels();
  // PCI order: 01 (H200), 41 (A100), 81 (H200), C1 (L40S). Freest: the L40S, then the A100.
  SetFreeMemory(DeviceByBus(state, "00000000:C1:00.0"), 44 * kGiB);
  SetFreeMemory(DeviceByBus(state, "00000000:41:00.0"), 30 * kGiB);
  SetFreeMemory(DeviceByBus(state, "00000000:01:00.0"), 20 * kGiB);
  SetFreeMemory(DeviceByBus(state, "00000000:81:00.0"), 10 * kGiB);
  FakeMachine machine(state);
  const Env pci_order{{"CUDA_DEVICE_ORDER", "PCI_BUS_ID"}};
  EXPECT_TRUE(Picked(Pick(machine, {"-n", "2"}, pci_order), "1,3"));
  EXPECT_TRUE(Picked(Pick(machine, {"-n", "1"}, pci_order), "3"));
  const std::string uuid1 = DeviceByBus(state, "00000000:41:00.0")["uuid"];
  const std::string uuid3 = DeviceByBus(state, "00000000:C1:00.0")["uuid"];
  EXPECT_TRUE(Picked(Pick(machine, {"-n", "2", "--uuid"}, pci_order), uuid1 + "," + uuid3));
  EXPECT_TRUE(Picked(Pick(machine, {"--count", "4"}, pci_order), "0,1,2,3"));
  EXPECT_TRUE(Picked(Pick(machine, {"-g", "4"}, pci_order), "0,1,2,3")) << "-g as for run and submit";
}

// On mixed models CUDA's default order (fastest first) would give the printed index to another card.
TEST(Pick, MixedModelsWarnWithoutPciBusOrderAndExportSetsIt) {
  FakeMachine machine(MixedModels());
  RunResult r = Pick(machine, {}, {{"CUDA_DEVICE_ORDER", "\x01unset"}});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(LineCount(r.out), 1) << r.out;
  EXPECT_EQ(LineCount(r.err), 1) << r.err;
  EXPECT_TRUE(Contains(r.err, "warning: the GPUs here are of different models and CUDA_DEVICE_ORDER is not PCI_BUS_ID"))
      << r.err;
  EXPECT_TRUE(Contains(r.err, "--export")) << "the warning names the fix: " << r.err;
  EXPECT_TRUE(Picked(Pick(machine, {}, {{"CUDA_DEVICE_ORDER", "PCI_BUS_ID"}}), r.out.substr(0, r.out.size() - 1)));

  RunResult exported = Pick(machine, {"--export"}, {{"CUDA_DEVICE_ORDER", "\x01unset"}});
  EXPECT_TRUE(Picked(exported, "export CUDA_VISIBLE_DEVICES=" + r.out.substr(0, r.out.size() - 1) + " CUDA_DEVICE_ORDER=PCI_BUS_ID"))
      << "--export sets the order itself: no warning";
}

// The README's lines, exactly as written, in each shell users type them into: the variables must
// reach the PROGRAM the line starts (a child process), not just the shell. `--export` once printed
// the assignments without `export`, so eval set shell variables no child saw and the program ran on
// every GPU; the old test exported them itself and could not see it.
TEST(Pick, ExportLineEvalGivesTheChildItsGpusInBashZshAndDash) {
  json state = EightGpus();
  SetUsedMemory(state["devices"][0], 10 * kGiB);
  FakeMachine machine(state);
  Env env = machine.env();
  const std::string bin_dir = std::filesystem::path(GpulaneBinary()).parent_path().string();
  env["PATH"] = bin_dir + ":/usr/bin:/bin";  // `gpulane` as the README writes it
  env["CUDA_VISIBLE_DEVICES"] = "\x01unset";
  env["CUDA_DEVICE_ORDER"] = "\x01unset";
  // The child: what its environment holds of the two variables ("-" for unset).
  const std::string prog = "sh -c 'echo \"[${CUDA_VISIBLE_DEVICES--} ${CUDA_DEVICE_ORDER--}]\"'";
  const std::string readme_pick = "out=$(gpulane pick -g 2 --export) && eval \"$out\" && " + prog;
  const std::string readme_eval = "eval \"$(gpulane pick --export)\"\n" + prog;
  // What plain pick prints (GPU 0 is the fullest, so not "0"), without the newline.
  const RunResult two = Pick(machine, {"-g", "2"}), one = Pick(machine, {});
  ASSERT_EQ(two.exit_code, 0) << two.err;
  ASSERT_EQ(one.exit_code, 0) << one.err;
  ASSERT_NE(one.out, "0\n");
  int shells = 0;
  for (const char* shell : {"/bin/bash", "/usr/bin/zsh", "/bin/zsh", "/bin/dash"}) {
    if (access(shell, X_OK) != 0) continue;
    if (std::string(shell) == "/bin/zsh" && access("/usr/bin/zsh", X_OK) == 0) continue;
    ++shells;
    SCOPED_TRACE(shell);
    for (const auto& [line, picked] : {std::pair{readme_pick, two.out}, std::pair{readme_eval, one.out}}) {
      const std::string expected = "[" + picked.substr(0, picked.size() - 1) + " PCI_BUS_ID]\n";
      Child child({shell, "-c", line}, env);
      auto r = child.Wait(30);
      ASSERT_TRUE(r);
      EXPECT_EQ(r->exit_code, 0) << line << "\n" << r->err;
      EXPECT_EQ(r->out, expected) << line;
    }
    // A refused pick stops the line: the program never runs on GPUs it was not given.
    Child refused({shell, "-c", "out=$(gpulane pick -g 9 --export) && eval \"$out\" && " + prog}, env);
    auto r = refused.Wait(30);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->exit_code, 2) << "pick's exit status stops the line";
    EXPECT_EQ(r->out, "") << "the program did not run";
  }
  EXPECT_GE(shells, 2) << "bash and dash at least (zsh: scripts/setup.sh installs it)";
}

TEST(Pick, MostFreeFirstThenLowerUtilisationThenPciOrder) {
  json state = EightGpus();
  for (auto& d : state["devices"]) d.erase("nvlinks");  // ranking only
  FakeMachine machine(state);
  json& gpus = machine.state()["devices"];
  EXPECT_TRUE(Picked(Pick(machine, {}), "0")) << "all equal: PCI order";

  SetUsedMemory(gpus[0], 5 * kGiB);
  SetUsedMemory(gpus[5], 1 * kGiB);
  for (unsigned i : {1, 2, 3, 4, 6, 7}) SetUsedMemory(gpus[i], 2 * kGiB);
  machine.Save();
  EXPECT_TRUE(Picked(Pick(machine, {}), "5")) << "most free";

  SetUsedMemory(gpus[5], 2 * kGiB);
  SetUsedMemory(gpus[3], 1 * kGiB);
  SetUsedMemory(gpus[6], 1 * kGiB);
  SetUtilization(gpus[3], 40);
  SetUtilization(gpus[6], 10);
  machine.Save();
  EXPECT_TRUE(Picked(Pick(machine, {}), "6")) << "equal free memory: lower utilisation";

  SetUtilization(gpus[3], 10);
  machine.Save();
  EXPECT_TRUE(Picked(Pick(machine, {}), "3")) << "equal free memory and utilisation: PCI order";
  // Then, among the GPUs with 2 GiB used and utilisation 0, the first in PCI order.
  EXPECT_TRUE(Picked(Pick(machine, {"-n", "3"}), "1,3,6"));
}

TEST(Pick, OtherOrders) {
  json state = EightGpus();
  for (auto& d : state["devices"]) {
    d.erase("nvlinks");
    SetUtilization(d, 50);
  }
  SetUtilization(state["devices"][7], 0);
  SetUsedMemory(state["devices"][7], 50 * kGiB);
  SetUsedMemory(state["devices"][0], 60 * kGiB);
  FakeMachine machine(state);
  EXPECT_TRUE(Picked(Pick(machine, {}), "1"));
  EXPECT_TRUE(Picked(Pick(machine, {"--order", "util"}), "7"));
  EXPECT_TRUE(Picked(Pick(machine, {"--order", "pci"}), "0"));
}

TEST(Pick, MaxUtilLeavesOutBusyGpus) {
  json state = RecordedH200x2(UnusedPid());
  state["devices"][1]["processes"] = json::array();
  SetUsedMemory(state["devices"][0], 50 * kGiB);  // GPU 1 (100 % busy) is now the freest
  FakeMachine machine(state);
  const unsigned busy = state["devices"][1]["util"]["gpu"].get<unsigned>();
  ASSERT_GT(busy, 50u);
  EXPECT_TRUE(Picked(Pick(machine, {}), "1"));
  EXPECT_TRUE(Picked(Pick(machine, {"--max-util", "50"}), "0"));
  EXPECT_TRUE(Picked(Pick(machine, {"--max-util", std::to_string(busy)}), "1")) << "the limit itself is allowed";
  RunResult r = Pick(machine, {"-n", "2", "--max-util", "50"});
  EXPECT_TRUE(TooFew(r));
  EXPECT_TRUE(Contains(r.err, fmt::format("GPU1: {}% busy > 50%", busy))) << r.err;
  EXPECT_EQ(Pick(machine, {"--max-util", "101"}).exit_code, 2);
}

TEST(Pick, OtherUsersProcessesTakeAGpuUnlessShareForeign) {
  ForeignProcess foreign;
  if (!foreign.foreign()) GTEST_SKIP() << "pid 1 is this user's own: no other user's process to show";
  json state = RecordedH200x2(foreign.pid());  // the recorded process on GPU 1 is someone else's
  SetUsedMemory(state["devices"][0], 50 * kGiB);
  FakeMachine machine(state);
  EXPECT_TRUE(Picked(Pick(machine, {}), "0"));
  EXPECT_TRUE(Picked(Pick(machine, {"--share-foreign"}), "1"));
  RunResult r = Pick(machine, {"-n", "2"});
  EXPECT_TRUE(TooFew(r));
  EXPECT_TRUE(Contains(r.err, "GPU1: in use by " + foreign.user())) << r.err;
  EXPECT_TRUE(Contains(r.err, std::to_string(foreign.pid()))) << r.err;
  EXPECT_FALSE(Contains(r.err, "GPU0:")) << r.err;
}

// A user's own notebook holding a GPU outside gpulane keeps that GPU from the user's next job too.
TEST(Pick, TheCallersOwnProcessOutsideGpulaneTakesTheGpu) {
  Child own = StartProcess({"/bin/sleep", "60"});
  json state = RecordedH200x2(own.pid());  // on GPU1
  SetUsedMemory(state["devices"][0], 50 * kGiB);
  FakeMachine machine(state);
  EXPECT_TRUE(Picked(Pick(machine, {}), "0")) << "GPU1 has more free memory but runs the caller's own process";
  RunResult r = Pick(machine, {"-n", "2"});
  EXPECT_TRUE(TooFew(r));
  EXPECT_TRUE(Contains(r.err, fmt::format("GPU1: in use by {}'s sleep (pid {})", UserName(getuid()), own.pid()))) << r.err;
  EXPECT_TRUE(Picked(Pick(machine, {"-n", "2", "--share-foreign"}), "0,1"));
}

TEST(Pick, AProcessThisPidNamespaceCannotSeeCountsAsForeign) {
  json state = RecordedH200x2(UnusedPid());
  SetUsedMemory(state["devices"][0], 50 * kGiB);
  FakeMachine machine(state);
  EXPECT_TRUE(Picked(Pick(machine, {}), "0"));
  EXPECT_TRUE(Picked(Pick(machine, {"--share-foreign"}), "1"));
  RunResult r = Pick(machine, {"-n", "2"});
  EXPECT_TRUE(TooFew(r));
  EXPECT_TRUE(Contains(r.err, "GPU1:")) << r.err;
  EXPECT_TRUE(Contains(r.err, "not visible")) << r.err;
}

TEST(Pick, TooFewNamesEveryGpuThatDoesNotQualifyOnOneLine) {
  json state = EightGpus();
  SetFreeMemory(state["devices"][2], 10 * kGiB);
  SetFreeMemory(state["devices"][5], 19 * kGiB);
  FakeMachine machine(state);
  RunResult r = Pick(machine, {"-n", "7", "--min-free", "20GiB"});
  EXPECT_TRUE(TooFew(r));
  EXPECT_TRUE(Contains(r.err, "6 of 7")) << r.err;
  EXPECT_TRUE(Contains(r.err, "GPU2: 10.0 GiB free < 20.0 GiB")) << r.err;
  EXPECT_TRUE(Contains(r.err, "GPU5: 19.0 GiB free < 20.0 GiB")) << r.err;
  for (unsigned i : {0, 1, 3, 4, 6, 7}) EXPECT_FALSE(Contains(r.err, fmt::format("GPU{}:", i))) << r.err;
  EXPECT_TRUE(Picked(Pick(machine, {"-n", "6", "--min-free", "20GiB"}), "0,1,3,4,6,7"));

  r = Pick(machine, {"-n", "9"});
  EXPECT_TRUE(NeverQualifies(r));
  EXPECT_TRUE(Contains(r.err, "asked for 9 GPUs but only 8 of the 8 GPUs here can ever qualify")) << r.err;
}

TEST(Pick, MinFreeAcceptsTheSizesUsersType) {
  json state = RecordedH200x2(UnusedPid());
  state["devices"][1]["processes"] = json::array();
  FakeMachine machine(state);
  const std::uint64_t free0 = state["devices"][0]["memory"]["free"].get<std::uint64_t>();
  const std::uint64_t free1 = state["devices"][1]["memory"]["free"].get<std::uint64_t>();
  ASSERT_GT(free0, free1);
  for (const char* size : {"20GiB", "20G", "20GB", "512MiB", "20gib", "1073741824B"})
    EXPECT_TRUE(Picked(Pick(machine, {"-n", "2", "--min-free", size}), "0,1")) << size;
  // Bytes (with B): exactly the free memory qualifies, one byte more does not.
  EXPECT_TRUE(Picked(Pick(machine, {"--min-free", std::to_string(free0) + "B"}), "0"));
  EXPECT_TRUE(TooFew(Pick(machine, {"--min-free", std::to_string(free0 + 1) + "B"})));
  // A whole number of GiB between the two GPUs' free memory.
  const std::uint64_t between = free0 / kGiB;
  ASSERT_GT(between * kGiB, free1);
  RunResult r = Pick(machine, {"-n", "2", "--min-free", fmt::format("{}GiB", between)});
  EXPECT_TRUE(TooFew(r));
  EXPECT_TRUE(Contains(r.err, "GPU1:")) << r.err;
  EXPECT_TRUE(Picked(Pick(machine, {"--min-free", fmt::format("{}G", between)}), "0"));
}

TEST(Pick, UnreadableMinFreeIsAOneLineUsageError) {
  FakeMachine machine(RecordedH200x2(UnusedPid()));
  for (const char* bad : {"lots", "20XB", "-5G", ""}) {
    SCOPED_TRACE(bad);
    RunResult r = Pick(machine, {"--min-free", bad});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_TRUE(r.out.empty()) << r.out;
    EXPECT_EQ(LineCount(r.err), 1) << r.err;
    EXPECT_TRUE(Contains(r.err, fmt::format("'{}'", bad))) << r.err;
  }
}

// "--min-free 30": 30 bytes or 30 GiB? Refused, with the likely meaning as the fix.
TEST(Pick, AMinFreeWithoutAUnitIsRefusedWithAHint) {
  FakeMachine machine(RecordedH200x2(UnusedPid()));
  RunResult r = Pick(machine, {"--min-free", "30"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_EQ(LineCount(r.err), 1) << r.err;
  EXPECT_EQ(r.err.rfind("gpulane: error: --min-free", 0), 0u) << r.err;
  EXPECT_TRUE(Contains(r.err, "'30' has no unit")) << r.err;
  EXPECT_TRUE(Contains(r.err, "did you mean 30GiB?")) << r.err;
}

TEST(Pick, CountMustBeAtLeastOne) {
  FakeMachine machine(RecordedH200x2(UnusedPid()));
  for (const char* n : {"0", "two"}) {
    SCOPED_TRACE(n);
    RunResult r = Pick(machine, {"-n", n});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_TRUE(r.out.empty()) << r.out;
    EXPECT_EQ(LineCount(r.err), 1) << r.err;
  }
}

TEST(Pick, GarbageInCudaVisibleDevicesWarnsAndHonoursTheEntriesBeforeIt) {
  json state = EightGpus();
  SetUsedMemory(state["devices"][3], 1 * kGiB);  // GPU 0 would be first without the restriction
  FakeMachine machine(state);
  const Env env{{"CUDA_VISIBLE_DEVICES", "3,bogus,0"}, {"CUDA_DEVICE_ORDER", "PCI_BUS_ID"}};
  RunResult r = Pick(machine, {}, env);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "3\n");
  EXPECT_EQ(LineCount(r.err), 1) << r.err;
  EXPECT_TRUE(Contains(r.err, "warning")) << r.err;
  EXPECT_TRUE(Contains(r.err, "bogus")) << r.err;

  r = Pick(machine, {"-n", "2"}, env);
  EXPECT_EQ(r.exit_code, 2) << "only GPU 3 may be used: two can never qualify";
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_TRUE(Contains(r.err, "GPU0: not among the GPUs this job may use (CUDA_VISIBLE_DEVICES, a Slurm job's GPUs, --gpus, --partition)")) << r.err;
}

TEST(Pick, InheritedCudaVisibleDevicesRestrictsTheChoice) {
  json state = EightGpus();
  FakeMachine machine(state);
  const std::string uuid6 = state["devices"][6]["uuid"];
  const std::string prefix6 = uuid6.substr(0, 12);  // "GPU-a0000006": unique among the eight
  EXPECT_TRUE(Picked(Pick(machine, {"-n", "2"}, {{"CUDA_VISIBLE_DEVICES", prefix6 + ",2"}}), "2,6"));
  EXPECT_TRUE(Picked(Pick(machine, {"-n", "1"}, {{"CUDA_VISIBLE_DEVICES", uuid6}}), "6"));
  EXPECT_TRUE(Picked(Pick(machine, {"-n", "2"}, {{"CUDA_VISIBLE_DEVICES", "7,5,4"}}), "4,5"));
  EXPECT_TRUE(NeverQualifies(Pick(machine, {"-n", "3"}, {{"CUDA_VISIBLE_DEVICES", "7,5"}})));
  EXPECT_TRUE(NeverQualifies(Pick(machine, {}, {{"CUDA_VISIBLE_DEVICES", ""}})));
  EXPECT_TRUE(Picked(Pick(machine, {"--gpus", "5,7"}, {{"CUDA_VISIBLE_DEVICES", "7,5,4"}}), "5"))
      << "--gpus within the inherited CUDA_VISIBLE_DEVICES; 5 has the lower PCI index of the two equal GPUs";

  RunResult r = Pick(machine, {}, {{"CUDA_VISIBLE_DEVICES", "GPU-a000000"}});  // ambiguous: ends the list
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(Contains(r.err, "warning")) << r.err;
}

TEST(Pick, MigEnabledGpusAreNeverPicked) {
  Child own = StartProcess({"/bin/sleep", "60"});
  json state = WithMigGpu(own.pid());
  state["devices"][1]["processes"] = json::array();
  FakeMachine machine(state);
  // The MIG-enabled GPU has the most free memory and PCI index 2.
  EXPECT_TRUE(Picked(Pick(machine, {}), "0"));
  EXPECT_TRUE(Picked(Pick(machine, {"-n", "2", "--share-foreign"}), "0,1"));
  RunResult r = Pick(machine, {"-n", "3", "--share-foreign"});
  EXPECT_TRUE(NeverQualifies(r));
  EXPECT_TRUE(Contains(r.err, "GPU2: MIG mode on")) << r.err;
  r = Pick(machine, {}, {{"CUDA_VISIBLE_DEVICES", MigDeviceUuids()[1]}});
  EXPECT_TRUE(NeverQualifies(r));
  EXPECT_TRUE(Contains(r.err, "GPU2: MIG mode on")) << r.err;
}

TEST(Pick, LostGpusAreNeverPicked) {
  json state = WithLostGpu();
  state["devices"][1]["processes"] = json::array();
  FakeMachine machine(state);
  EXPECT_TRUE(Picked(Pick(machine, {"-n", "2"}), "0,1"));
  RunResult r = Pick(machine, {"-n", "3"});
  EXPECT_TRUE(NeverQualifies(r));
  EXPECT_TRUE(Contains(r.err, "GPU2: failed (NVML_ERROR_GPU_IS_LOST)")) << r.err;
}

TEST(Pick, EightGpusPreferAnNvLinkedSet) {
  json state = EightGpus();
  json& gpus = state["devices"];
  // Ranking by free memory: 0, 2, 1, 3, 4, 5, 6, 7.
  SetUsedMemory(gpus[0], 1 * kGiB);
  SetUsedMemory(gpus[2], 2 * kGiB);
  SetUsedMemory(gpus[1], 3 * kGiB);
  SetUsedMemory(gpus[3], 4 * kGiB);
  for (unsigned i = 4; i < 8; ++i) SetUsedMemory(gpus[i], (5 + i) * kGiB);
  FakeMachine linked(state);
  EXPECT_TRUE(Picked(Pick(linked, {"-n", "2"}), "0,1")) << "0 and 2 are the two freest but not linked";
  EXPECT_TRUE(Picked(Pick(linked, {"-n", "4"}), "4,5,6,7")) << "the only four GPUs all linked to each other";
  EXPECT_TRUE(Picked(Pick(linked, {"-n", "1"}), "0"));
  EXPECT_TRUE(Picked(Pick(linked, {"-n", "8"}), "0,1,2,3,4,5,6,7"));

  for (auto& d : gpus) d.erase("nvlinks");
  FakeMachine unlinked(state);
  EXPECT_TRUE(Picked(Pick(unlinked, {"-n", "2"}), "0,2"));
  EXPECT_TRUE(Picked(Pick(unlinked, {"-n", "4"}), "0,1,2,3"));
}

TEST(Pick, AMachineWithoutGpusHasNoneToGive) {
  json state = RecordedH200x2(UnusedPid());
  state["devices"] = json::array();
  FakeMachine machine(state);
  RunResult r = Pick(machine, {});
  EXPECT_TRUE(NeverQualifies(r));
  EXPECT_TRUE(Contains(r.err, "of the 0 GPUs here")) << r.err;
}

TEST(Pick, NoDriverAndNvmlErrorsKeepTheirExitCodes) {
  json state = RecordedH200x2(UnusedPid());
  FakeMachine machine(state);
  RunResult r = Pick(machine, {}, {{"GPULANE_NVML_LIBRARY", (machine.dir() / "none" / "libnvidia-ml.so.1").string()}});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_EQ(LineCount(r.err), 1) << r.err;
  machine.state()["init_error"] = 18;
  machine.Save();
  r = Pick(machine, {});
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_TRUE(Contains(r.err, "reboot")) << r.err;
}

}  // namespace
}  // namespace gpulane::test

namespace gpulane::test {
namespace {

TEST(Pick, LeasedGpusAreTakenEvenBeforeTheirJobShowsInNvml) {
  json state = RecordedH200x2(UnusedPid());
  for (auto& d : state["devices"]) d["processes"] = json::array();
  FakeMachine machine(state);
  // A gpulane run job holds GPU0 (the freest) but has not allocated anything yet.
  const std::string gate = (machine.dir() / "gate").string();
  Child holder({GpulaneBinary(), "run", "-q", "--gpus", "0", "--", "sh", "-c", "while [ ! -e " + gate + " ]; do sleep 0.02; done"},
               machine.env());
  ASSERT_TRUE(Eventually([&] { return RunGpulane({"status", "--json"}, machine.env()).out.find("held_by") != std::string::npos; }));
  RunResult r = RunGpulane({"pick"}, machine.env());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "1\n") << "GPU0 is leased";
  RunResult both = RunGpulane({"pick", "-n", "2"}, machine.env());
  EXPECT_EQ(both.exit_code, 5);
  EXPECT_NE(both.err.find(fmt::format("GPU0: leased by {} (job r", UserName(getuid()))), std::string::npos) << both.err;
  std::ofstream(gate).put('x');
  ASSERT_TRUE(holder.Wait(30).has_value());
}

}  // namespace
}  // namespace gpulane::test
