// gpulane run / pick inside a gpulane job (a pipeline submitted as one job whose steps call
// `gpulane run`): the steps run inside the job's GPUs at once instead of waiting forever on their
// own parent's lease.
#include "integration/run_support.h"

namespace gpulane::test {
namespace {

TEST(RunNested, AStepInsideAJobRunsOnTheJobsGpuAtOnce) {
  FakeMachine machine(IdleMachine(2));
  Env env = RunEnv(machine);
  env["GPULANE"] = GpulaneBinary();
  // The job holds GPU 1; its step asks for one GPU and must get that one, not wait for it.
  RunResult r = RunOn(machine, {"-q", "--gpus", "1", "--", "/bin/sh", "-c",
                                R"("$GPULANE" run -q -- sh -c 'echo "step on $CUDA_VISIBLE_DEVICES"')"},
                      {{"GPULANE", GpulaneBinary()}}, 30);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "step on 1\n");
}

TEST(RunNested, StepsOfOneJobShareItsGpusThroughTheirOwnLeases) {
  FakeMachine machine(IdleMachine(3));
  // A two-GPU job whose two one-GPU steps run side by side: each gets one of the job's GPUs, never
  // the third GPU, and never the same one.
  const std::string script = R"(
    "$GPULANE" run -q -- sh -c 'echo "a $CUDA_VISIBLE_DEVICES"; sleep 0.3' > a.out &
    "$GPULANE" run -q -- sh -c 'echo "b $CUDA_VISIBLE_DEVICES"; sleep 0.3' > b.out &
    wait
    cat a.out b.out)";
  RunResult r = RunOn(machine, {"-q", "-g", "2", "--gpus", "0,2", "--", "/bin/sh", "-c", "cd '" +
                                    machine.dir().string() + "'\n" + script},
                      {{"GPULANE", GpulaneBinary()}}, 30);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const bool a0 = Contains(r.out, "a 0\n"), a2 = Contains(r.out, "a 2\n");
  const bool b0 = Contains(r.out, "b 0\n"), b2 = Contains(r.out, "b 2\n");
  EXPECT_TRUE((a0 && b2) || (a2 && b0)) << r.out;
}

TEST(RunNested, PickInsideAJobChoosesAmongTheJobsGpus) {
  FakeMachine machine(IdleMachine(4));
  RunResult r = RunOn(machine, {"-q", "-g", "2", "--gpus", "1,3", "--", "/bin/sh", "-c", R"("$GPULANE" pick -g 2)"},
                      {{"GPULANE", GpulaneBinary()}}, 30);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "1,3\n");
  RunResult more = RunOn(machine, {"-q", "--gpus", "2", "--", "/bin/sh", "-c", R"("$GPULANE" pick -g 2)"},
                         {{"GPULANE", GpulaneBinary()}}, 30);
  EXPECT_EQ(more.exit_code, 2) << "a one-GPU job has no two GPUs to give: " << more.err;
  EXPECT_TRUE(Contains(more.err, "can ever qualify")) << more.err;
}

TEST(RunNested, OutsideTheJobItsGpusStayTaken) {
  FakeMachine machine(IdleMachine(1));
  // The same step, not started from inside the job (no GPULANE_JOB_ID of an ancestor): it waits.
  RunResult r = RunOn(machine, {"-q", "--", "/bin/sh", "-c",
                                R"(env -u GPULANE_JOB_ID "$GPULANE" run --no-wait -- true; echo "exit $?")"},
                      {{"GPULANE", GpulaneBinary()}}, 30);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "exit 5\n");
  EXPECT_TRUE(Contains(r.err, "GPU0: leased by")) << r.err;
}

}  // namespace
}  // namespace gpulane::test
