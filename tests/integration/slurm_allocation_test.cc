// Inside a Slurm job (issue 12, item 3): `gpulane run`, `pick` and `status` honour Slurm's GPU
// allocation (SLURM_STEP_GPUS, else SLURM_JOB_GPUS, on the job's node) and never lease a GPU
// outside it, also when CUDA_VISIBLE_DEVICES is missing or wider. Jobs get UUIDs in
// CUDA_VISIBLE_DEVICES there (CUDA may see only the allocation, where node-wide indices mislead).
#include <gtest/gtest.h>

#include "run_support.h"

namespace gpulane::test {
namespace {

// The environment slurmd gives a batch script on node "gpu01" for job 42 holding `gpus`.
Env InSlurmJob(const FakeMachine& machine, const std::string& gpus) {
  Env env = machine.env();
  env["SLURM_JOB_ID"] = "42";
  env["SLURMD_NODENAME"] = "gpu01";
  env["SLURM_JOB_GPUS"] = gpus;
  return env;
}

TEST(SlurmAllocation, PickChoosesOnlyAmongTheJobsGpusAndAnswersUuids) {
  json state = IdleMachine(4);
  FakeMachine machine(state);
  Env env = InSlurmJob(machine, "1,3");
  env.erase("CUDA_VISIBLE_DEVICES");
  RunResult r = RunGpulane({"pick", "-n", "2"}, env);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, fmt::format("{},{}\n", state["devices"][1]["uuid"].get<std::string>(),
                               state["devices"][3]["uuid"].get<std::string>()));
  r = RunGpulane({"pick", "-n", "3"}, env);
  EXPECT_EQ(r.exit_code, 2) << "3 GPUs can never qualify in a 2-GPU job: " << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST(SlurmAllocation, AWiderCudaVisibleDevicesDoesNotLeaveTheJob) {
  json state = IdleMachine(4);
  FakeMachine machine(state);
  Env env = InSlurmJob(machine, "2");
  env["CUDA_VISIBLE_DEVICES"] = "0,1,2,3";
  RunResult r = RunGpulane({"pick", "-n", "1"}, env);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, state["devices"][2]["uuid"].get<std::string>() + "\n");
  EXPECT_TRUE(Contains(r.err, "outside the Slurm allocation")) << r.err;
}

TEST(SlurmAllocation, RunLeasesTheJobsGpuAndHandsItOnByUuid) {
  json state = IdleMachine(4);
  FakeMachine machine(state);
  Env env = InSlurmJob(machine, "3");
  env.erase("CUDA_VISIBLE_DEVICES");
  RunResult r = RunGpulane({"run", "-g", "1", "--", "/bin/sh", "-c", "echo \"[$CUDA_VISIBLE_DEVICES]\""}, env);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "[" + state["devices"][3]["uuid"].get<std::string>() + "]\n");
  r = RunGpulane({"run", "-g", "2", "--", "true"}, env);
  EXPECT_EQ(r.exit_code, 2) << "2 GPUs in a 1-GPU job can never qualify: " << r.err;
}

TEST(SlurmAllocation, StatusMarksTheGpusOutsideTheJob) {
  FakeMachine machine(IdleMachine(4));
  Env env = InSlurmJob(machine, "0-1");
  env.erase("CUDA_VISIBLE_DEVICES");
  RunResult r = RunGpulane({"status", "--json"}, env);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json doc = json::parse(r.out);
  EXPECT_EQ(doc["slurm_gpus"], "0-1");
  for (unsigned i = 0; i < 4; ++i) EXPECT_EQ(doc["gpus"][i]["allowed"], i < 2) << i;
}

TEST(SlurmAllocation, AnSallocShellOnALoginNodeIsNotTheJobsNode) {
  FakeMachine machine(IdleMachine(4));
  Env env = InSlurmJob(machine, "3");
  env.erase("SLURMD_NODENAME");
  env.erase("CUDA_VISIBLE_DEVICES");
  RunResult r = RunGpulane({"pick", "-n", "4"}, env);
  EXPECT_EQ(r.exit_code, 0) << "SLURM_JOB_GPUS names the compute node's GPUs, not this machine's: " << r.err;
}

}  // namespace
}  // namespace gpulane::test
