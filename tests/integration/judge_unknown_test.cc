// Unknown is not free: a GPU whose processes NVML does not report is taken only with
// --share-foreign, and one whose memory it does not report never meets --mem or --min-free, which
// pick and run say at once instead of waiting. On every driver variant, through the real binary
// and the fake NVML.
#include <ostream>

#include "judge_support.h"

namespace gpulane::test {
namespace {

struct Unknown {
  std::string variant;
  bool as_string;  ///< `processes: "ERR:..."` rather than `errors` on every compute call
};

void PrintTo(const Unknown& u, std::ostream* os) { *os << u.variant << (u.as_string ? ", recorded error" : ", refused call"); }

std::string Name(const ::testing::TestParamInfo<Unknown>& info) {
  return info.param.variant + (info.param.as_string ? "_recorded_error" : "_refused_call");
}

class UnknownProcesses : public ::testing::TestWithParam<Unknown> {};

INSTANTIATE_TEST_SUITE_P(Judge, UnknownProcesses,
                         ::testing::Values(Unknown{"current", false}, Unknown{"current", true}, Unknown{"no_v3", false},
                                           Unknown{"legacy", false}, Unknown{"legacy", true}),
                         Name);

TEST_P(UnknownProcesses, AreTakenOnlyWithShareForeign) {
  json state = IdleMachine(2);
  json& gpu0 = state["devices"][0];  // the first in PCI order, otherwise the one picked
  if (GetParam().as_string) gpu0["processes"] = "ERR:NVMLError_NoPermission:Insufficient Permissions";
  else RefuseCalls(gpu0, ComputeProcessCalls(), 4);  // NVML_ERROR_NO_PERMISSION
  FakeMachine machine(state, GetParam().variant);

  const std::string why = "GPU0: its processes are not reported by NVML";
  EXPECT_TRUE(Picked(PickOn(machine, {}), "1"));
  EXPECT_TRUE(IsError(PickOn(machine, {"--gpus", "0"}), 2, why));
  EXPECT_TRUE(IsError(PickOn(machine, {"-n", "2"}), 2, why));
  EXPECT_TRUE(Picked(PickOn(machine, {"--gpus", "0", "--share-foreign"}), "0"));
  EXPECT_TRUE(Picked(PickOn(machine, {"-n", "2", "--share-foreign"}), "0,1"));
  RunResult run = RunOn(machine, EchoGpus({"--no-wait"}));
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, "1\n");
  EXPECT_TRUE(IsError(RunOn(machine, EchoGpus({"--no-wait", "--gpus", "0"})), 2, why));
  run = RunOn(machine, EchoGpus({"--no-wait", "--gpus", "0", "--share-foreign"}));
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, "0\n");

  json doc = StatusJson(machine);
  ASSERT_FALSE(doc.is_null());
  EXPECT_EQ(doc["gpus"][0]["processes_known"], false);
  EXPECT_FALSE(doc["gpus"][0].contains("processes")) << "unknown is not empty";
  EXPECT_EQ(doc["gpus"][1]["processes_known"], true);
  EXPECT_EQ(doc["gpus"][1]["processes"], json::array()) << "none is []";
  RunResult text = StatusOn(machine);
  EXPECT_EQ(StatusLine(text, 0).back(), '?') << text.out;
  EXPECT_NE(StatusLine(text, 1).back(), '?') << text.out;
}

class UnreportedMemory : public ::testing::TestWithParam<std::string> {};

INSTANTIATE_TEST_SUITE_P(Judge, UnreportedMemory, ::testing::Values("current", "no_v3", "legacy"),
                         [](const auto& info) { return info.param; });

TEST_P(UnreportedMemory, FailsMemoryRequestsAtOnceInsteadOfWaiting) {
  json state = IdleMachine(2);
  RefuseCalls(state["devices"][0], MemoryCalls(), 4);  // NVML_ERROR_NO_PERMISSION
  FakeMachine machine(state, GetParam());
  const std::string why = "GPU0: memory not reported by NVML";
  EXPECT_TRUE(IsError(PickOn(machine, {"--mem", "10GiB", "--gpus", "0"}), 2, why));
  EXPECT_TRUE(IsError(PickOn(machine, {"--min-free", "10GiB", "--gpus", "0"}), 2, why));
  EXPECT_TRUE(IsError(PickOn(machine, {"--mem", "10GiB", "-n", "2"}), 2, why));
  EXPECT_TRUE(IsError(RunOn(machine, EchoGpus({"--mem", "10GiB", "--no-wait", "--gpus", "0"})), 2, why));
  // A waiting run says so at once too: nothing it could wait for would change it.
  EXPECT_TRUE(IsError(RunOn(machine, EchoGpus({"--mem", "10GiB", "--gpus", "0"}), {}, 30), 2, why));
  EXPECT_TRUE(IsError(RunOn(machine, EchoGpus({"--min-free", "10GiB", "--gpus", "0"}), {}, 30), 2, why));
  // Requests that need no memory figure still get it; those that do, the other GPU.
  EXPECT_TRUE(Picked(PickOn(machine, {"--gpus", "0"}), "0"));
  EXPECT_TRUE(Picked(PickOn(machine, {"--mem", "10GiB"}), "1"));
  RunResult run = RunOn(machine, EchoGpus({"--mem", "10GiB", "--no-wait"}));
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, "1\n");

  json doc = StatusJson(machine);
  ASSERT_FALSE(doc.is_null());
  for (const char* key : {"memory_total_bytes", "memory_used_bytes", "memory_free_bytes"}) {
    EXPECT_FALSE(doc["gpus"][0].contains(key)) << key;
    EXPECT_TRUE(doc["gpus"][1].contains(key)) << key;
  }
}

}  // namespace
}  // namespace gpulane::test
