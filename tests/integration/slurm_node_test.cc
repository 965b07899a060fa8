// gpulane on a Slurm GPU node (issue 12, item 4): gres.conf lines from NVML, and the prolog and
// epilog that guard a job's GPUs, called as slurmd calls them (SLURM_JOB_ID, SLURM_JOB_GPUS,
// SLURM_JOB_UID in the environment) on the fake NVML with real processes of the test.
#include <gtest/gtest.h>
#include <pwd.h>
#include <unistd.h>

#include <fmt/format.h>

#include "support/daemon_fixture.h"
#include "support/harness.h"
#include "support/scenarios.h"
#include "support/text.h"
#include "support/units.h"

namespace gpulane::test {
namespace {

using nlohmann::json;

std::string SlurmUserName() {
  const passwd* pw = getpwuid(getuid());
  return pw ? pw->pw_name : std::to_string(getuid());
}

Env SlurmEnv(const FakeMachine& machine, const std::string& gpus) {
  Env env = machine.env();
  env["SLURM_JOB_ID"] = "4242";
  env["SLURM_JOB_GPUS"] = gpus;
  env["SLURM_JOB_UID"] = std::to_string(getuid());
  return env;
}

TEST(SlurmGresConf, LinesAreInPciOrderWithEachGpusOwnDeviceFile) {
  FakeMachine machine(MixedModels());
  RunResult r = RunGpulane({"slurm", "gres-conf"}, machine.env());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> files;
  for (const std::string& line : Lines(r.out))
    if (line.rfind("Name=gpu ", 0) == 0) files.push_back(line.substr(line.find("File=") + 5));
  // PCI order 01 (minor 3), 41 (minor 0), 81 (minor 1), C1 (minor 2): neither NVML's nor minor order.
  EXPECT_EQ(files, (std::vector<std::string>{"/dev/nvidia3", "/dev/nvidia0", "/dev/nvidia1", "/dev/nvidia2"})) << r.out;
  EXPECT_TRUE(Contains(r.out, "Name=gpu Type=nvidia_h200 File=/dev/nvidia3")) << r.out;

  machine.state()["devices"][2].erase("minor");  // NVML index 2: the A100, PCI index 1
  machine.Save();
  r = RunGpulane({"slurm", "gres-conf"}, machine.env());
  EXPECT_TRUE(IsGpulaneError(r, 4, "GPU 1 (00000000:41:00.0): NVML does not report its minor number")) << r.err;
}

TEST(SlurmProlog, RefusesAJobWhoseGpuAProcessOrGhostMemoryHolds) {
  json state = IdleGpus(2);
  FakeMachine machine(state);
  RunResult r = RunGpulane({"slurm", "prolog"}, SlurmEnv(machine, "0,1"));
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, "GPUs 0,1 are free for job 4242\n");

  Child outside = StartProcess({"/bin/sleep", "600"});
  AddProcess(machine.state()["devices"][1], static_cast<std::uint32_t>(outside.pid()), 3 * kGiB);
  SetUsedMemory(machine.state()["devices"][1], 3 * kGiB);
  SetUsedMemory(machine.state()["devices"][0], 5 * kGiB);  // no process accounts for it
  machine.Save();
  r = RunGpulane({"slurm", "prolog"}, SlurmEnv(machine, "1"));
  EXPECT_EQ(r.exit_code, 17) << r.out << r.err;
  EXPECT_TRUE(Contains(r.out, fmt::format("GPU 1: held by {}'s sleep (pid {}, 3.0 GiB): refusing to start job 4242",
                                          SlurmUserName(), outside.pid())))
      << r.out;
  r = RunGpulane({"slurm", "prolog"}, SlurmEnv(machine, "0"));
  EXPECT_EQ(r.exit_code, 17) << r.out;
  EXPECT_TRUE(Contains(r.out, "GPU 0: 5.0 GiB in use that no process accounts for (ghost memory)")) << r.out;
  outside.Kill(SIGKILL);
}

// The job left a process on its GPU: the epilog ends it; once the driver frees its memory the GPU
// is free and the epilog succeeds. A process that ignores SIGTERM gets SIGKILL after the grace.
TEST(SlurmEpilog, EndsWhatTheJobLeftAndSucceedsOnceItsMemoryIsFreed) {
  FakeMachine machine(IdleGpus(2));
  Child left = StartProcess({"/bin/sh", "-c", "trap '' TERM; while :; do sleep 1; done"});
  AddProcess(machine.state()["devices"][1], static_cast<std::uint32_t>(left.pid()), 4 * kGiB);
  SetUsedMemory(machine.state()["devices"][1], 4 * kGiB);
  machine.Save();
  Child epilog({GpulaneBinary(), "slurm", "epilog", "--grace", "0.3", "--settle", "30"}, SlurmEnv(machine, "1"));
  auto ended = left.Wait(30);  // ends when the epilog's SIGKILL lands
  ASSERT_TRUE(ended) << "the leftover was not ended";
  // As the driver does once the process is gone: its memory is free.
  machine.state()["devices"][1]["processes"] = json::array();
  SetUsedMemory(machine.state()["devices"][1], 0);
  machine.Save();
  auto r = epilog.Wait(60);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->exit_code, 0) << r->out << r->err;
  EXPECT_TRUE(Contains(r->out, fmt::format("GPU 1: ending {}'s sh (pid {}, 4.0 GiB), left by job 4242", SlurmUserName(), left.pid())))
      << r->out;
  EXPECT_TRUE(Contains(r->out, fmt::format("pid {} needed SIGKILL after 0.3 s", left.pid()))) << r->out;
  EXPECT_TRUE(Contains(r->out, "GPUs 1 are free after job 4242")) << r->out;
}

// Memory the driver never frees after the process ended (ghost memory): the epilog fails, so
// Slurm drains the node. Another user's process is reported, never signalled.
TEST(SlurmEpilog, GhostMemoryThatStaysFailsItSoSlurmDrainsTheNode) {
  FakeMachine machine(IdleGpus(1));
  Child left = StartProcess({"/bin/sleep", "600"});
  AddProcess(machine.state()["devices"][0], static_cast<std::uint32_t>(left.pid()), 6 * kGiB);
  SetUsedMemory(machine.state()["devices"][0], 6 * kGiB);
  machine.Save();
  RunResult r = RunGpulane({"slurm", "epilog", "--grace", "5", "--settle", "0.5"}, SlurmEnv(machine, "0"));
  EXPECT_EQ(r.exit_code, 17) << r.out << r.err;
  EXPECT_TRUE(left.Wait(10)) << "the leftover got SIGTERM";
  EXPECT_TRUE(Contains(r.out, "GPU 0: 6.0 GiB in use that no process accounts for (ghost memory)")) << r.out;
  EXPECT_TRUE(Contains(r.out, "still held after job 4242")) << r.out;

  Child other = StartProcess({"/bin/sleep", "600"});
  machine.state()["devices"][0]["processes"] = json::array();
  AddProcess(machine.state()["devices"][0], static_cast<std::uint32_t>(other.pid()), 1 * kGiB);
  SetUsedMemory(machine.state()["devices"][0], 1 * kGiB);
  machine.Save();
  Env env = SlurmEnv(machine, "0");
  env["SLURM_JOB_UID"] = std::to_string(getuid() + 1);  // the job was another user's
  r = RunGpulane({"slurm", "epilog", "--settle", "0.2"}, env);
  EXPECT_EQ(r.exit_code, 17) << r.out;
  EXPECT_FALSE(other.Wait(0.5)) << "another user's process must not be signalled";
  EXPECT_TRUE(Contains(r.out, fmt::format("(pid {}, 1.0 GiB): still held after job 4242", other.pid()))) << r.out;
  other.Kill(SIGKILL);
}

TEST(SlurmNode, BadInputIsAOneLineUsageError) {
  FakeMachine machine(IdleGpus(2));
  Env env = machine.env();
  env["SLURM_JOB_GPUS"] = "\x01unset";
  env["CUDA_VISIBLE_DEVICES"] = "\x01unset";
  EXPECT_TRUE(IsGpulaneError(RunGpulane({"slurm", "epilog"}, env), 2, "neither SLURM_JOB_GPUS nor CUDA_VISIBLE_DEVICES"));
  EXPECT_TRUE(IsGpulaneError(RunGpulane({"slurm", "prolog"}, SlurmEnv(machine, "0,7")), 2,
                             "SLURM_JOB_GPUS=0,7: '7' names no GPU of this node"));
  EXPECT_TRUE(IsGpulaneError(RunGpulane({"slurm", "epilog", "--ghost-min", "lots"}, SlurmEnv(machine, "0")), 2,
                             "--ghost-min"));
}

}  // namespace
}  // namespace gpulane::test
