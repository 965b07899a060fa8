// gpulane submit and its options, as a user sees them: the job's output, environment, GPUs, state and
// exit status through `gpulane wait/logs/show/queue`, with a user-mode daemon on a fake machine.
#include <gtest/gtest.h>

#include <filesystem>
#include <fmt/format.h>

#include "support/daemon_fixture.h"
#include "support/scenarios.h"
#include "support/text.h"
#include "support/units.h"

namespace gpulane::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string EnvLine(const std::string& text, const std::string& key) {
  for (const auto& line : Lines(text))
    if (line.rfind(key + "=", 0) == 0) return line.substr(key.size() + 1);
  return "<unset>";
}

// Tickets of jobs waiting in line for GPUs (the lease folder's *.wait files).
int Tickets(const TestDaemon& d) {
  int n = 0;
  for (const auto& entry : fs::directory_iterator(d.dir() / "leases")) {
    const std::string name = entry.path().filename().string();
    n += name.size() > 5 && name.compare(name.size() - 5, 5, ".wait") == 0;
  }
  return n;
}

TEST(DaemonSubmit, JobRunsInTheSubmissionDirectoryWithTheSubmittersEnvironment) {
  TestDaemon d;
  const fs::path sub = d.work() / "project dir";
  fs::create_directories(sub);
  // ONLY_HERE exists only in the submitting process (the daemon never had it); GPULANE_JOB_ID is
  // gpulane's and cannot be set by the submitter.
  RunResult submit = d.Gpulane({"submit", "--", "sh", "-c", "pwd; env"}, {{"ONLY_HERE", "from the shell 'x'"},
                                                                            {"GPULANE_JOB_ID", "forged"}},
                               60, sub.string());
  ASSERT_EQ(submit.exit_code, 0) << submit.err;
  const std::string id = std::string(Lines(submit.out).at(0));
  RunResult wait = d.Gpulane({"wait", id});
  EXPECT_EQ(wait.exit_code, 0) << wait.err;
  EXPECT_EQ(wait.out, id + " completed 0\n");
  // The default log is gpulane-<id>.out in the submission directory.
  const std::string log = ReadFile(sub / ("gpulane-" + id + ".out"));
  EXPECT_EQ(Lines(log).at(0), sub.string());
  EXPECT_EQ(EnvLine(log, "ONLY_HERE"), "from the shell 'x'");
  EXPECT_EQ(EnvLine(log, "GPULANE_JOB_ID"), id);
  EXPECT_EQ(EnvLine(log, "CUDA_VISIBLE_DEVICES"), "0");
  EXPECT_EQ(EnvLine(d.Gpulane({"logs", id}).out, "ONLY_HERE"), "from the shell 'x'");
  EXPECT_EQ(Contains(d.Log(), "ONLY_HERE"), false);
}

TEST(DaemonSubmit, GpuCountAndGpuList) {
  TestDaemon d;
  const std::int64_t two = d.Submit({"-g", "2", "--", "sh", "-c", "echo $CUDA_VISIBLE_DEVICES $GPULANE_GPU_UUIDS"});
  const std::int64_t second = d.Submit({"--gpus", "1", "--", "sh", "-c", "echo $CUDA_VISIBLE_DEVICES $GPULANE_GPU_UUIDS"});
  ASSERT_EQ(d.Gpulane({"wait", std::to_string(two), std::to_string(second)}).exit_code, 0);
  EXPECT_EQ(d.Gpulane({"logs", std::to_string(two)}).out,
            fmt::format("0,1 {},{}\n", MakeUuid(0xd0000000u), MakeUuid(0xd0000001u)));
  EXPECT_EQ(d.Gpulane({"logs", std::to_string(second)}).out, fmt::format("1 {}\n", MakeUuid(0xd0000001u)));
  json shown = d.Show(second);
  EXPECT_EQ(shown["gpu_uuids"], json::array({MakeUuid(0xd0000001u)}));
  // More GPUs than the machine has is refused at submission.
  EXPECT_TRUE(IsGpulaneError(d.Gpulane({"submit", "-g", "3", "--", "true"}), 2,
                             "asked for 3 GPUs but only 2 of the 2 GPUs here can ever qualify"));
  // -g 0 is a CPU-only job (CpuOnlyJobs.*), which chooses no GPU: options that choose GPUs are refused.
  EXPECT_TRUE(IsGpulaneError(d.Gpulane({"submit", "-g", "0", "--gpus", "1", "--", "true"}), 2, "-g 0 with"));
  EXPECT_TRUE(IsGpulaneError(d.Gpulane({"submit", "-g", "-1", "--", "true"}), 2, "-g -1"));
}

TEST(DaemonSubmit, MemDeclaresMemoryAndTooMuchIsRefused) {
  TestDaemon d;
  const std::int64_t id = d.Submit({"--mem", "2GiB", "--", "sh", "-c", "echo mem=$GPULANE_MEM_BYTES"});
  ASSERT_EQ(d.Gpulane({"wait", std::to_string(id)}).exit_code, 0);
  EXPECT_EQ(d.Gpulane({"logs", std::to_string(id)}).out, "mem=2147483648\n");
  EXPECT_EQ(d.Show(id)["spec"]["request"]["mem_bytes"], 2 * kGiB);
  EXPECT_TRUE(IsGpulaneError(d.Gpulane({"submit", "--mem", "1000GiB", "--", "true"}), 2, "1000 GiB + 1.0 GiB margin > 140 GiB total"));
  EXPECT_TRUE(IsGpulaneError(d.Gpulane({"submit", "--mem", "lots", "--", "true"}), 2, "lots"));
}

TEST(DaemonSubmit, MinFreeWaitsUntilAGpuHasThatMuchFree) {
  json state = IdleGpus(2);
  for (auto& gpu : state["devices"]) SetFreeMemory(gpu, 10 * kGiB);
  TestDaemon d({.state = state});
  const fs::path out = d.work() / "minfree.out";
  const std::int64_t id = d.Submit({"--min-free", "50GiB", "-o", out.string(), "--", "sh", "-c", "echo $CUDA_VISIBLE_DEVICES"});
  // Neither GPU has 50 GiB free: the job waits, saying so (its supervisor's report).
  json shown;
  EXPECT_TRUE(Eventually([&] { return Contains((shown = d.Show(id)).value("reason", ""), "free"); }, 30)) << shown.dump();
  EXPECT_EQ(shown["state"], "launching") << shown.dump();
  EXPECT_FALSE(fs::exists(out));
  // Without --min-free the same job runs at once.
  const std::int64_t plain = d.Submit({"--", "true"});
  EXPECT_EQ(d.Gpulane({"wait", std::to_string(plain)}).exit_code, 0);
  EXPECT_EQ(d.State(id), "launching");
  // GPU 1 frees its memory: the job runs there.
  SetFreeMemory(d.machine().state()["devices"][1], 140 * kGiB);
  d.machine().Save();
  RunResult wait = d.Gpulane({"wait", std::to_string(id)});
  EXPECT_EQ(wait.exit_code, 0) << wait.err;
  EXPECT_EQ(ReadFile(out), "1\n");
}

TEST(DaemonSubmit, NameIsShownAndDefaultsToTheCommand) {
  TestDaemon d;
  const std::int64_t named = d.Submit({"--hold", "--name", "resnet-sweep", "--", "true"});
  const std::int64_t unnamed = d.Submit({"--hold", "--", "/bin/true", "x"});
  json queue = d.Queue();
  ASSERT_EQ(queue.size(), 2u);
  EXPECT_EQ(queue[0]["id"], named);
  EXPECT_EQ(queue[0]["spec"]["name"], "resnet-sweep");
  EXPECT_EQ(queue[1]["id"], unnamed);
  EXPECT_EQ(queue[1]["spec"]["name"], "true");
  RunResult table = d.Gpulane({"queue"});
  EXPECT_TRUE(Contains(table.out, "resnet-sweep")) << table.out;
}

TEST(DaemonSubmit, HigherPriorityRunsFirst) {
  TestDaemon d({.state = IdleGpus(1)});
  const fs::path log = d.work() / "marks.log";
  const fs::path gate = d.work() / "gate";
  const std::int64_t blocker = d.Submit(MarkedJob(log.string(), gate.string()));
  ASSERT_TRUE(Eventually([&] { return CountMarks(ReadMarks(log), "start", blocker) == 1; }, 30));
  std::vector<std::string> quick = MarkedJob(log.string(), "", 0, 0);
  std::vector<std::string> args = {"--priority", "0", "--"};
  args.insert(args.end(), quick.begin(), quick.end());
  const std::int64_t low = d.Submit(args);
  args[1] = "10";
  const std::int64_t high = d.Submit(args);
  // Both wait for the one GPU: let both join the line (a ticket each in the lease folder) before it frees.
  ASSERT_TRUE(Eventually([&] { return Tickets(d) == 2; }, 30)) << Tickets(d);
  Touch(gate);
  ASSERT_EQ(d.Gpulane({"wait", std::to_string(low), std::to_string(high)}).exit_code, 0);
  std::vector<std::int64_t> order;
  for (const auto& m : ReadMarks(log))
    if (m.kind == "start") order.push_back(m.id);
  EXPECT_EQ(order, (std::vector<std::int64_t>{blocker, high, low}));
}

TEST(DaemonSubmit, ArrayTasksGetTheirIndexAndLogNames) {
  TestDaemon d;
  RunResult submit = d.Gpulane({"submit", "--array", "0-3", "-o", "arr-%A-%a.out", "--", "sh", "-c",
                                "echo task $GPULANE_ARRAY_INDEX of job $GPULANE_JOB_ID"});
  ASSERT_EQ(submit.exit_code, 0) << submit.err;
  const std::string array_id = Lines(submit.out).at(0);
  const std::int64_t first = std::stoll(array_id);
  RunResult wait = d.Gpulane({"wait", array_id});
  EXPECT_EQ(wait.exit_code, 0) << wait.err;
  EXPECT_EQ(LineCount(wait.out), 4) << "waiting for the array waits for its four tasks: " << wait.out;
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(ReadFile(d.work() / fmt::format("arr-{}-{}.out", array_id, i)),
              fmt::format("task {} of job {}\n", i, first + i));
    json task = d.Show(first + i);
    EXPECT_EQ(task["array_index"], i);
    EXPECT_EQ(task["array_job_id"], first);
  }
  EXPECT_TRUE(IsGpulaneError(d.Gpulane({"submit", "--array", "3-1", "--", "true"}), 2, "--array"));
  // A stepped range: what submit says of the array's tasks (their indices, their job ids).
  RunResult stepped = d.Gpulane({"submit", "--hold", "--array", "1-5:2", "--", "true"});
  EXPECT_EQ(stepped.exit_code, 0) << stepped.err;
  const std::int64_t a = std::stoll(stepped.out);
  EXPECT_EQ(stepped.err, fmt::format("gpulane: array job {0}: 3 tasks, {0}_[1,3,5] (job ids {0}-{1})\n", a, a + 2));
}

TEST(DaemonSubmit, TimeLimitEndsTheJobAsTimeout) {
  TestDaemon d;
  const std::int64_t id = d.Submit({"--time-limit", "1s", "--kill-grace", "1s", "--", "sleep", "120"});
  RunResult wait = d.Gpulane({"wait", std::to_string(id)}, {}, 60);
  EXPECT_NE(wait.exit_code, 0);
  EXPECT_TRUE(Contains(wait.out, fmt::format("{} timeout", id))) << wait.out;
  json shown = d.Show(id);
  EXPECT_EQ(shown["state"], "timeout");
  ASSERT_TRUE(shown.contains("start_time") && shown.contains("end_time")) << shown.dump();
  const double ran = shown["end_time"].get<double>() - shown["start_time"].get<double>();
  EXPECT_GE(ran, 0.9);
  EXPECT_LT(ran, 30);
  EXPECT_TRUE(IsGpulaneError(d.Gpulane({"submit", "--time-limit", "soon", "--", "true"}), 2, "--time-limit"));
}

TEST(DaemonSubmit, OutputAndErrorFilesWithJobIdPlaceholder) {
  TestDaemon d;
  fs::create_directories(d.work() / "logs");
  const std::int64_t id = d.Submit({"-o", "logs/out-%j.txt", "-e", d.work().string() + "/err-%j.txt", "--", "sh",
                                    "-c", "echo to-stdout; echo to-stderr >&2"});
  ASSERT_EQ(d.Gpulane({"wait", std::to_string(id)}).exit_code, 0);
  EXPECT_EQ(ReadFile(d.work() / fmt::format("logs/out-{}.txt", id)), "to-stdout\n");
  EXPECT_EQ(ReadFile(d.work() / fmt::format("err-{}.txt", id)), "to-stderr\n");
  EXPECT_FALSE(fs::exists(d.work() / fmt::format("gpulane-{}.out", id)));
  EXPECT_EQ(d.Gpulane({"logs", std::to_string(id)}).out, "to-stdout\n");
  EXPECT_EQ(d.Gpulane({"logs", "--err", std::to_string(id)}).out, "to-stderr\n");
}

TEST(DaemonSubmit, CommandLineErrors) {
  TestDaemon d;
  EXPECT_TRUE(IsGpulaneError(d.Gpulane({"submit"}), 2, "no command"));
  EXPECT_TRUE(IsGpulaneError(d.Gpulane({"submit", "-g", "1", "--mem", "", "--", "true"}), 2, "--mem"));
  EXPECT_TRUE(IsGpulaneError(d.Gpulane({"submit", "--after", "x", "--", "true"}), 2, "--after"));
  EXPECT_TRUE(IsGpulaneError(d.Gpulane({"submit", "--after", "12_[0-1000]", "--", "true"}), 2, "more than 1000 jobs"));
  // A GPU the machine does not have is refused at submission, as `gpulane run` refuses it.
  EXPECT_TRUE(IsGpulaneError(d.Gpulane({"submit", "--gpus", "7", "--", "true"}), 2, "--gpus 7"));
  EXPECT_TRUE(IsGpulaneError(d.Gpulane({"run", "--gpus", "7", "--", "true"}), 2, "--gpus 7"));
  // --retry from 0 to 100 (the daemon checks it too: DaemonInProcRecovery); --array indices once each.
  for (const char* bad : {"-1", "1000", "101", "x", "1.5"})
    EXPECT_TRUE(IsGpulaneError(d.Gpulane({"submit", "--retry", bad, "--", "true"}), 2, "from 0 to 100")) << bad;
  EXPECT_TRUE(IsGpulaneError(d.Gpulane({"submit", "--array", "1,1", "--", "true"}), 2, "--array '1,1'"));
  EXPECT_TRUE(IsGpulaneError(d.Gpulane({"submit", "--array", "0-3,2", "--", "true"}), 2, "each once"));
  // An environment over the 1 MiB a job may carry (one execve can still pass: 15 variables of
  // 100 KiB): one line, exit 2 (the daemon's refusal: DaemonInProcBulk.AFourMebibyteEnvironment...).
  Env big;
  for (int i = 0; i < 15; ++i) big[fmt::format("PAD{}", i)] = std::string(100u << 10, 'e');
  EXPECT_TRUE(IsGpulaneError(d.Gpulane({"submit", "--", "true"}, big), 2, "the environment is 1.5 MiB, more than the 1.0 MiB"));
  // Nothing was queued by the refused submissions.
  EXPECT_EQ(d.Queue({"--all"}).size(), 0u);
}

}  // namespace
}  // namespace gpulane::test
