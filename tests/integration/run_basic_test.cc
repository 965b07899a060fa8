// `gpulane run`: what the job gets (environment, argv, stdin/stdout/stderr, the lease descriptor)
// and how its end is passed on (exit status, signals, commands that cannot be run).
#include <signal.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "run_support.h"

namespace gpulane::test {
namespace {

std::string UuidOnBus(json& state, const std::string& bus) { return DeviceByBus(state, bus)["uuid"]; }

// MixedModels: NVML order differs from PCI order. PCI order: 01 (H200), 41 (A100), 81 (H200), C1 (L40S).
TEST(RunEnvironment, JobGetsPciOrderIndicesAndTheGpulaneVariables) {
  json state = MixedModels();
  FakeMachine machine(state);
  const std::string uuid81 = UuidOnBus(state, "00000000:81:00.0");  // PCI index 2, NVML index 3
  // Variables gpulane sets must not leak in from the caller's environment.
  Child run = StartRun(machine, {"-q", "--gpus", uuid81, "--", "env"},
                       {{"GPULANE_MEM_BYTES", "999"}, {"GPULANE_JOB_ID", "stale"}, {"CUDA_DEVICE_ORDER", "FASTEST_FIRST"}});
  auto r = run.Wait(60);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->exit_code, 0) << r->err;
  EXPECT_TRUE(r->err.empty()) << r->err;
  auto env = ParseEnv(r->out);
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "2");
  EXPECT_EQ(env["CUDA_DEVICE_ORDER"], "PCI_BUS_ID");
  EXPECT_EQ(env["GPULANE_JOB_ID"], fmt::format("r{}", run.pid()));
  EXPECT_EQ(env["GPULANE_GPU_UUIDS"], uuid81);
  EXPECT_EQ(env["GPULANE_GPU_INDICES"], "2");
  EXPECT_EQ(env.count("GPULANE_MEM_BYTES"), 0u) << "a whole-GPU job declares no memory";
  EXPECT_EQ(env.count("GPULANE_LEASE_FD"), 1u);
}

TEST(RunEnvironment, SeveralGpusAreListedInPciOrder) {
  json state = MixedModels();
  FakeMachine machine(state);
  RunResult r = RunOn(machine, {"-q", "-g", "4", "--", "env"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto env = ParseEnv(r.out);
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "0,1,2,3");
  EXPECT_EQ(env["GPULANE_GPU_INDICES"], "0,1,2,3");
  EXPECT_EQ(env["GPULANE_GPU_UUIDS"],
            fmt::format("{},{},{},{}", UuidOnBus(state, "00000000:01:00.0"), UuidOnBus(state, "00000000:41:00.0"),
                        UuidOnBus(state, "00000000:81:00.0"), UuidOnBus(state, "00000000:C1:00.0")));
}

TEST(RunEnvironment, UuidOptionPutsUuidsInCudaVisibleDevices) {
  json state = MixedModels();
  FakeMachine machine(state);
  const std::string a = UuidOnBus(state, "00000000:41:00.0"), b = UuidOnBus(state, "00000000:C1:00.0");
  RunResult r = RunOn(machine, {"-q", "--uuid", "-g", "2", "--gpus", b + "," + a, "--", "env"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto env = ParseEnv(r.out);
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], a + "," + b) << "PCI order, whatever order --gpus named them in";
  EXPECT_EQ(env["GPULANE_GPU_UUIDS"], a + "," + b);
  EXPECT_EQ(env["GPULANE_GPU_INDICES"], "1,3");
}

TEST(RunEnvironment, MemGivesTheDeclaredBytes) {
  FakeMachine machine(IdleMachine(1));
  RunResult r = RunOn(machine, {"-q", "--mem", "2GiB", "--", "env"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto env = ParseEnv(r.out);
  EXPECT_EQ(env["GPULANE_MEM_BYTES"], "2147483648");
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "0");
}

TEST(RunEnvironment, InheritedCudaVisibleDevicesLimitsTheGpus) {
  json state = MixedModels();
  FakeMachine machine(state);
  const std::string a100 = UuidOnBus(state, "00000000:41:00.0");
  RunResult r = RunOn(machine, {"-q", "--", "env"}, {{"CUDA_VISIBLE_DEVICES", a100}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto env = ParseEnv(r.out);
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "1");
  EXPECT_EQ(env["GPULANE_GPU_UUIDS"], a100);
  EXPECT_TRUE(IsError(RunOn(machine, {"-g", "2", "--", "true"}, {{"CUDA_VISIBLE_DEVICES", a100}}), 2, "ask for fewer"));
}

// The job holds the lease through an inherited descriptor, and nothing else of gpulane's.
TEST(RunEnvironment, JobInheritsOnlyStdioAndTheLease) {
  FakeMachine machine(IdleMachine(1));
  const fs::path pid_file = machine.dir() / "job.pid";
  Child run = StartRun(machine, {"--", "/bin/sh", "-c", R"(echo $$ > "$0.tmp"; mv "$0.tmp" "$0"; exec sleep 60)",
                                 pid_file.string()});
  ASSERT_TRUE(Eventually([&] { return fs::exists(pid_file); }, 30)) << run.ErrSoFar();
  const pid_t job = std::stoi(ReadFile(pid_file));
  // Look once the shell has become `sleep` (before, it may hold descriptors of its own).
  ASSERT_TRUE(Eventually([&] { return ReadFile(fmt::format("/proc/{}/cmdline", job)).rfind("sleep", 0) == 0; }, 30));
  const auto env = [&] {
    std::string raw = ReadFile(fmt::format("/proc/{}/environ", job));
    std::replace(raw.begin(), raw.end(), '\0', '\n');
    return ParseEnv(raw);
  }();
  ASSERT_EQ(env.count("GPULANE_LEASE_FD"), 1u);
  const std::string lease_fd = env.at("GPULANE_LEASE_FD");
  // `sleep` itself opens its locale files for a moment as it starts: look until those are closed.
  const std::set<std::string> expected{"0", "1", "2", lease_fd};
  std::set<std::string> fds;
  EXPECT_TRUE(Eventually([&] {
    fds.clear();
    for (const auto& e : fs::directory_iterator(fmt::format("/proc/{}/fd", job))) fds.insert(e.path().filename());
    return fds == expected;
  }, 5)) << "the job's descriptors: " << ::testing::PrintToString(fds);
  const fs::path target = fs::read_symlink(fmt::format("/proc/{}/fd/{}", job, lease_fd));
  EXPECT_EQ(target.parent_path(), fs::canonical(machine.dir() / "leases"));
  EXPECT_EQ(target.extension(), ".lease");
  run.Kill(SIGTERM);
  auto r = run.Wait(60);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->exit_code, 128 + SIGTERM);
}

// ---- argv and stdio -----------------------------------------------------------------------------

TEST(RunArgv, ArgumentsArriveVerbatimWithoutAShell) {
  FakeMachine machine(IdleMachine(1));
  const std::vector<std::string> words = {"a b", "\"double\"", "it's", "$HOME", "`id`", "x;y", ";", "*", "", "-g",
                                          "--help", "back\\slash", "new\nline"};
  std::string expected;
  for (const auto& w : words) expected += w + "\n";

  std::vector<std::string> args = {"-q", "--", "printf", "%s\\n"};
  args.insert(args.end(), words.begin(), words.end());
  RunResult r = RunOn(machine, args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, expected);
  EXPECT_TRUE(r.err.empty()) << r.err;

  // Without "--": everything from the command's name on is the command's, options included.
  args = {"-q", "printf", "%s\\n"};
  args.insert(args.end(), words.begin(), words.end());
  r = RunOn(machine, args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, expected);

  // A "--" after the command's name is the command's too.
  r = RunOn(machine, {"-q", "printf", "%s\\n", "x", "--", "y"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "x\n--\ny\n");
}

TEST(RunStdio, StdinStdoutAndStderrAreTheCallers) {
  FakeMachine machine(IdleMachine(1));
  const fs::path input = machine.dir() / "input.txt";
  const std::string text = "line one\nline two\n\xce\xbb and binary \x01\x02\n";
  std::ofstream(input, std::ios::binary) << text;
  Env env = RunEnv(machine);
  Child run({"/bin/sh", "-c", R"(exec "$0" run -q -- sh -c 'cat; echo to-stderr >&2' < "$1")", GpulaneBinary(),
             input.string()},
            env);
  auto r = run.Wait(60);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->exit_code, 0) << r->err;
  EXPECT_EQ(r->out, text);
  EXPECT_EQ(r->err, "to-stderr\n");
}

// ---- How the job ended ----------------------------------------------------------------------------

TEST(RunExit, TheJobsExitStatusIsPassedOn) {
  FakeMachine machine(IdleMachine(1));
  for (int code : {0, 1, 3, 42, 255}) {
    RunResult r = RunOn(machine, {"-q", "--", "/bin/sh", "-c", fmt::format("exit {}", code)});
    EXPECT_EQ(r.exit_code, code) << r.err;
    EXPECT_TRUE(r.err.empty()) << r.err;
  }
}

TEST(RunExit, AJobKilledByASignalGives128PlusItsNumber) {
  FakeMachine machine(IdleMachine(1));
  EXPECT_EQ(RunOn(machine, {"-q", "--", "/bin/sh", "-c", "kill -KILL $$"}).exit_code, 128 + SIGKILL);
  EXPECT_EQ(RunOn(machine, {"-q", "--", "/bin/sh", "-c", "kill -TERM $$"}).exit_code, 128 + SIGTERM);
  EXPECT_EQ(RunOn(machine, {"-q", "--", "/bin/sh", "-c", "kill -USR1 $$"}).exit_code, 128 + SIGUSR1);
}

// A run its time limit stopped says so (a 143 alone reads as "someone sent SIGTERM"), as a queued
// job's log does; a job that ends by itself within its limit says nothing of it.
TEST(RunExit, AJobStoppedByItsTimeLimitSaysSo) {
  FakeMachine machine(IdleMachine(1));
  RunResult stopped = RunOn(machine, {"-q", "--time-limit", "1s", "--kill-grace", "1s", "--", "/bin/sleep", "30"});
  EXPECT_EQ(stopped.exit_code, 128 + SIGTERM) << stopped.err;
  EXPECT_TRUE(Contains(stopped.err, "gpulane: warning: the job was stopped by its time limit (1.0 s) after 1.")) << stopped.err;
  RunResult ended = RunOn(machine, {"-q", "--time-limit", "30s", "--", "/bin/true"});
  EXPECT_EQ(ended.exit_code, 0) << ended.err;
  EXPECT_FALSE(Contains(ended.err, "time limit")) << ended.err;
}

TEST(RunExit, MissingCommandIs127AndNotExecutableIs126) {
  FakeMachine machine(IdleMachine(1));
  RunResult r = RunOn(machine, {"--", "gpulane-test-no-such-command"});
  EXPECT_TRUE(IsError(r, 127, "gpulane-test-no-such-command")) << r.err;
  r = RunOn(machine, {"--", (machine.dir() / "nowhere" / "tool").string()});
  EXPECT_TRUE(IsError(r, 127, "tool"));

  const fs::path script = machine.dir() / "not-executable.sh";
  std::ofstream(script) << "#!/bin/sh\necho ran\n";
  fs::permissions(script, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  r = RunOn(machine, {"--", script.string()});
  EXPECT_TRUE(IsError(r, 126, "not-executable.sh"));
  EXPECT_TRUE(IsError(RunOn(machine, {"--", machine.dir().string()}), 126, machine.dir().string()));

  // The GPU was given back each time.
  EXPECT_EQ(RunOn(machine, {"-q", "--no-wait", "--", "true"}).exit_code, 0);
}

// SIGTERM, SIGINT and SIGHUP sent to gpulane reach the job, which decides how to end.
TEST(RunSignals, ForwardedToTheJob) {
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) {
    SCOPED_TRACE(strsignal(sig));
    FakeMachine machine(IdleMachine(1));
    const fs::path ready = machine.dir() / "ready", got = machine.dir() / "got";
    Child run = StartRun(machine, {"-q", "--", "/bin/sh", "-c",
                                   // (stderr silenced: sh reports the killed sleep there)
                                   R"(exec 2>/dev/null; trap 'echo got > "$1"; exit 7' TERM INT HUP; echo ready > "$0"; )"
                                   R"(while :; do sleep 0.05; done)",
                                   ready.string(), got.string()});
    ASSERT_TRUE(Eventually([&] { return fs::exists(ready); }, 30)) << run.ErrSoFar();
    run.Kill(sig);
    auto r = run.Wait(60);
    ASSERT_TRUE(r) << "gpulane did not end after the job should have";
    EXPECT_EQ(r->exit_code, 7) << r->err;
    EXPECT_EQ(ReadFile(got), "got\n");
    EXPECT_TRUE(r->err.empty()) << r->err;
  }
}

TEST(RunSignals, AJobThatDiesOfTheForwardedSignalGives128PlusIt) {
  FakeMachine machine(IdleMachine(1));
  const fs::path ready = machine.dir() / "ready";
  Child run = StartRun(machine, {"-q", "--", "/bin/sh", "-c", R"(echo ready > "$0"; exec sleep 60)", ready.string()});
  ASSERT_TRUE(Eventually([&] { return fs::exists(ready); }, 30)) << run.ErrSoFar();
  run.Kill(SIGTERM);
  auto r = run.Wait(60);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->exit_code, 128 + SIGTERM) << r->err;
}

}  // namespace
}  // namespace gpulane::test
