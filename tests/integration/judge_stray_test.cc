// A gpulane job's process on a GPU that job did not lease (a library that opens device 0 whatever
// CUDA_VISIBLE_DEVICES says) is foreign there: pick and run leave that GPU alone, and status flags
// the process. Through the real binary and the fake NVML.
#include <algorithm>

#include "judge_support.h"
#include "support/units.h"

namespace gpulane::test {
namespace {

// `gpulane run --gpus 1` of a shell that starts a child (the job's real work, as `python` under a
// wrapper script) and writes the child's pid to `pid_file`.
Child StartJobOnGpu1(const FakeMachine& machine, const fs::path& pid_file) {
  return StartRun(machine, {"-q", "--gpus", "1", "--", "/bin/sh", "-c",
                            R"(sleep 60 & echo $! > "$0.tmp"; mv "$0.tmp" "$0"; wait)", pid_file.string()});
}

TEST(JudgeStray, AJobsProcessOnAGpuItDidNotLeaseKeepsOthersOffThatGpu) {
  FakeMachine machine(IdleMachine(2));
  const fs::path pid_file = machine.dir() / "child.pid";
  Child run = StartJobOnGpu1(machine, pid_file);
  ASSERT_TRUE(Eventually([&] { return fs::exists(pid_file); }, 30)) << run.ErrSoFar();
  const std::uint32_t child = static_cast<std::uint32_t>(std::stoul(ReadFile(pid_file)));
  const std::string job = fmt::format("r{}", run.pid());
  const std::string user = UserName(geteuid());

  // First on its own GPU only: GPU0 is free.
  AddProcess(DeviceByUuid(machine.state(), MakeUuid(0xf0000001u)), child, 1024 * kMiB);
  machine.Save();
  EXPECT_TRUE(Picked(PickOn(machine, {}), "0"));
  EXPECT_FALSE(Contains(StatusOn(machine).out, "did not lease")) << "a job on its own GPU is no stray";

  // Then also on GPU0, which it did not lease.
  AddProcess(DeviceByUuid(machine.state(), MakeUuid(0xf0000000u)), child, 512 * kMiB);
  machine.Save();
  const std::string stray = fmt::format("GPU0: in use by {}'s sleep (pid {}) of job {}, which did not lease this GPU",
                                        user, child, job);
  EXPECT_TRUE(IsError(PickOn(machine, {}), 5, stray));
  EXPECT_TRUE(IsError(PickOn(machine, {"--gpus", "0"}), 5, stray));
  EXPECT_TRUE(IsError(RunOn(machine, EchoGpus({"--no-wait"})), 5, stray)) << "GPU1 is leased, GPU0 has the stray";
  EXPECT_TRUE(IsError(RunOn(machine, EchoGpus({"--no-wait", "--mem", "1GiB"})), 5, stray));

  RunResult text = StatusOn(machine);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  const std::string line0 = StatusLine(text, 0), line1 = StatusLine(text, 1);
  EXPECT_TRUE(Contains(line0, fmt::format("{}:sleep/{}(512M) !job {} did not lease GPU0", user, child, job))) << line0;
  EXPECT_FALSE(Contains(line0, "[job ")) << "nobody leased GPU0: " << line0;
  EXPECT_TRUE(Contains(line1, fmt::format("{}:sleep/{}(1024M)", user, child))) << line1;
  EXPECT_TRUE(Contains(line1, fmt::format("[job {} ({})]", job, user))) << line1;
  EXPECT_FALSE(Contains(line1, "did not lease")) << line1;
  RunResult full = StatusOn(machine, {"-p"});
  const auto full_lines = Lines(full.out);
  EXPECT_EQ(std::count_if(full_lines.begin(), full_lines.end(),
                          [&](const std::string& l) { return Contains(l, fmt::format("!job {} did not lease GPU0", job)); }),
            2)
      << "the GPU line and the process line: " << full.out;

  json doc = StatusJson(machine);
  ASSERT_FALSE(doc.is_null());
  ASSERT_EQ(doc["gpus"][0]["processes"].size(), 1u);
  EXPECT_EQ(doc["gpus"][0]["processes"][0]["stray"], (json{{"job_id", job}, {"job_text", job}, {"user", user}}))
      << "a `gpulane run` names its job by its job id alone";
  EXPECT_FALSE(doc["gpus"][0].contains("held_by"));
  ASSERT_EQ(doc["gpus"][1]["processes"].size(), 1u);
  EXPECT_FALSE(doc["gpus"][1]["processes"][0].contains("stray")) << doc["gpus"][1].dump();
  EXPECT_EQ(doc["gpus"][1]["held_by"], fmt::format("job {} ({})", job, user));

  run.Kill(SIGTERM);
  auto r = run.Wait(60);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->exit_code, 128 + SIGTERM);
  // Its lease is gone: the same pid in NVML (lagging its exit) is no job's now.
  EXPECT_FALSE(Contains(StatusOn(machine).out, "did not lease"));
}

}  // namespace
}  // namespace gpulane::test
