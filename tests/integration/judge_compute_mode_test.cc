// Compute modes: a GPU in EXCLUSIVE_PROCESS mode that has a context takes no other job, whatever
// the request shares (CUDA would refuse the second context); a PROHIBITED GPU never qualifies;
// status shows both. Through the real binary and the fake NVML.
#include "judge_support.h"
#include "support/units.h"

namespace gpulane::test {
namespace {

constexpr std::uint32_t kHiddenPid = 4194400;  // above any pid_max: another PID namespace's process
constexpr int kProhibited = 2;                 // nvmlComputeMode_t
constexpr int kExclusiveProcess = 3;

const char* const kExclusiveBusy = "GPU0: EXCLUSIVE_PROCESS compute mode and already in use";

TEST(JudgeComputeMode, AnExclusiveProcessGpuInUseIsRefusedEvenSharedAndWithShareForeign) {
  json state = IdleMachine(2);
  state["devices"][0]["compute_mode"] = kExclusiveProcess;
  FakeMachine machine(state);
  // Without a context it qualifies like any GPU.
  EXPECT_TRUE(Picked(PickOn(machine, {"--gpus", "0"}), "0"));
  EXPECT_TRUE(Picked(PickOn(machine, {}), "0"));

  AddProcess(machine.state()["devices"][0], kHiddenPid, 300 * kMiB);
  machine.Save();
  for (const std::vector<std::string>& options :
       std::vector<std::vector<std::string>>{{}, {"--share-foreign"}, {"--mem", "1GiB"}, {"--share-foreign", "--mem", "1GiB"}}) {
    SCOPED_TRACE(::testing::PrintToString(options));
    std::vector<std::string> only0 = options;
    only0.insert(only0.end(), {"--gpus", "0"});
    EXPECT_TRUE(IsError(PickOn(machine, only0), 5, kExclusiveBusy));
    std::vector<std::string> run = only0;
    run.insert(run.begin(), "--no-wait");
    EXPECT_TRUE(IsError(RunOn(machine, EchoGpus(run)), 5, kExclusiveBusy));
    EXPECT_TRUE(Picked(PickOn(machine, options), "1")) << "GPU1 is in default mode and free";
  }
  json doc = StatusJson(machine);
  ASSERT_FALSE(doc.is_null());
  EXPECT_EQ(doc["gpus"][0]["compute_mode"], "exclusive_process");
  EXPECT_EQ(doc["gpus"][1]["compute_mode"], "default");
  RunResult text = StatusOn(machine);
  EXPECT_TRUE(Contains(StatusLine(text, 0), "| EXCLUSIVE_PROCESS pid " + std::to_string(kHiddenPid) + " (not visible here")) << text.out;
  EXPECT_FALSE(Contains(StatusLine(text, 1), "EXCLUSIVE")) << text.out;
  EXPECT_FALSE(Contains(StatusLine(text, 1), "DEFAULT")) << "the default mode goes without saying: " << text.out;
}

TEST(JudgeComputeMode, AGpulaneLeaseIsAContextOnAnExclusiveProcessGpuToo) {
  json state = IdleMachine(1);
  state["devices"][0]["compute_mode"] = kExclusiveProcess;
  FakeMachine machine(state);
  const Gate gate(machine.dir() / "gate");
  const fs::path log = machine.dir() / "log";
  Child holder = StartRun(machine, {"--mem", "1GiB", "--", "/bin/sh", "-c",
                                    R"(echo started > "$0"; while [ ! -e "$1" ]; do sleep 0.02; done)", log.string(),
                                    gate.path()});
  ASSERT_TRUE(Eventually([&] { return fs::exists(log); }, 30)) << holder.ErrSoFar();
  EXPECT_TRUE(IsError(PickOn(machine, {"--mem", "1GiB"}), 5, kExclusiveBusy));
  EXPECT_TRUE(IsError(PickOn(machine, {"--mem", "1GiB", "--share-foreign"}), 5, kExclusiveBusy));
  EXPECT_TRUE(IsError(RunOn(machine, EchoGpus({"--no-wait", "--mem", "1GiB", "--share-foreign"})), 5, kExclusiveBusy));
  gate.Open();
  auto r = holder.Wait(60);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->exit_code, 0) << r->err;
  EXPECT_TRUE(Picked(PickOn(machine, {"--mem", "1GiB"}), "0")) << "free again once the lease ends";
}

TEST(JudgeComputeMode, AProhibitedGpuNeverQualifies) {
  json state = IdleMachine(2);
  state["devices"][0]["compute_mode"] = kProhibited;
  FakeMachine machine(state);
  const std::string never = "GPU0: compute mode PROHIBITED";
  for (const std::vector<std::string>& options :
       std::vector<std::vector<std::string>>{{}, {"--share-foreign"}, {"--mem", "1GiB", "--share-foreign"}}) {
    SCOPED_TRACE(::testing::PrintToString(options));
    std::vector<std::string> only0 = options;
    only0.insert(only0.end(), {"--gpus", "0"});
    RunResult pick = PickOn(machine, only0);
    EXPECT_TRUE(IsError(pick, 2, never));
    EXPECT_TRUE(Contains(pick.err, "only 0 of the 2 GPUs here can ever qualify")) << pick.err;
    std::vector<std::string> no_wait = only0;
    no_wait.insert(no_wait.begin(), "--no-wait");
    EXPECT_TRUE(IsError(RunOn(machine, EchoGpus(no_wait)), 2, never));
    // Not even a waiting run waits for it: it can never change while the machine stays as it is.
    EXPECT_TRUE(IsError(RunOn(machine, EchoGpus(only0), {}, 30), 2, never));
    EXPECT_TRUE(Picked(PickOn(machine, options), "1"));
    std::vector<std::string> two = options;
    two.insert(two.end(), {"-n", "2"});
    EXPECT_TRUE(IsError(PickOn(machine, two), 2, never));
  }
  json doc = StatusJson(machine);
  ASSERT_FALSE(doc.is_null());
  EXPECT_EQ(doc["gpus"][0]["compute_mode"], "prohibited");
  RunResult text = StatusOn(machine);
  EXPECT_TRUE(Contains(StatusLine(text, 0), "| PROHIBITED")) << text.out;
  EXPECT_FALSE(Contains(StatusLine(text, 1), "PROHIBITED")) << text.out;
}

}  // namespace
}  // namespace gpulane::test
