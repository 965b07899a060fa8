// slurm/: sbatch translation, the batch script, Slurm's states mapped to gpulane's, and the
// shared, rate-bounded poll, all against a fake command runner (the real one: tests/slurm).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "slurm/command_runner.h"
#include "slurm/job_registry.h"
#include "slurm/job_state.h"
#include "slurm/poller.h"
#include "slurm/sbatch.h"
#include "util/clock.h"
#include "util/config.h"
#include "util/shell_words.h"

namespace gpulane::slurm {
namespace {

namespace fs = std::filesystem;

// Answers each program (argv[0]) from a queue of scripted outputs; records every call.
class FakeRunner : public CommandRunner {
 public:
  Result<CommandOutput> Run(const std::vector<std::string>& argv) override {
    calls.push_back(argv);
    auto& queue = answers[argv.at(0)];
    if (queue.empty()) return MakeError(ErrorKind::kUnavailable, "fake: no answer for " + argv.at(0));
    CommandOutput out = queue.front();
    if (queue.size() > 1) queue.pop_front();  // the last answer repeats
    return out;
  }
  void Answer(const std::string& program, int code, std::string out, std::string err = "") {
    answers[program].push_back({code, std::move(out), std::move(err)});
  }
  int CallsOf(const std::string& program) const {
    int n = 0;
    for (const auto& c : calls) n += c.at(0) == program;
    return n;
  }
  std::vector<std::vector<std::string>> calls;
  std::map<std::string, std::deque<CommandOutput>> answers;
};

SlurmSubmission Basic() {
  SlurmSubmission s;
  s.request.count = 2;
  s.cwd = "/home/a/proj";
  s.script_path = "/s/job.sh";
  s.name = "train";
  return s;
}

bool Has(const std::vector<std::string>& argv, const std::string& word) {
  return std::find(argv.begin(), argv.end(), word) != argv.end();
}

TEST(SlurmSbatch, TranslatesEveryOption) {
  SlurmSubmission s = Basic();
  s.request.time_limit_s = 90 * 60 + 1;
  s.request.partition = "big";
  s.request.priority = -5;
  s.after_ok = {"12", "13_2"};
  s.after_any = {"14"};
  s.array = "0-9:2";
  s.output_path = "out-%A_%a-%j.log";
  s.error_path = "err-%j.log";
  auto argv = SbatchArgv(s, {}, {});
  ASSERT_TRUE(argv.ok()) << argv.error().message;
  const std::vector<std::string> want = {"sbatch", "--parsable", "--export=ALL", "--chdir=/home/a/proj", "--gres=gpu:2",
                                         "--job-name=train", "--time=91", "--partition=big", "--nice=5",
                                         "--dependency=afterok:12:13_2,afterany:14", "--array=0-9:2",
                                         "--output=out-%A_%a-%j.log", "--error=err-%j.log", "/s/job.sh"};
  EXPECT_EQ(*argv, want);
}

TEST(SlurmSbatch, GpusOptionZeroGpusHoldAndDefaultLogs) {
  SlurmSubmission s = Basic();
  SlurmSettings settings;
  settings.gpus_option = true;
  auto argv = SbatchArgv(s, {}, settings);
  ASSERT_TRUE(argv.ok());
  EXPECT_TRUE(Has(*argv, "--gpus=2"));
  EXPECT_TRUE(Has(*argv, "--output=slurm-%j.out"));
  s.request.count = 0;
  s.hold = true;
  s.array = "1,3";
  argv = SbatchArgv(s, {}, {});
  ASSERT_TRUE(argv.ok());
  for (const auto& w : *argv) EXPECT_EQ(w.find("gpu"), std::string::npos) << w;
  EXPECT_TRUE(Has(*argv, "--hold"));
  EXPECT_TRUE(Has(*argv, "--output=slurm-%A_%a.out"));
}

TEST(SlurmSbatch, MemoryBecomesShardsOnlyWhereTheClusterHasThem) {
  SlurmSubmission s = Basic();
  s.request.count = 1;
  s.request.mem_bytes = 25ull << 30;
  auto refused = SbatchArgv(s, {.has_shards = false}, {});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().kind, ErrorKind::kInvalidArgument);
  EXPECT_NE(refused.error().message.find("no GPU shards"), std::string::npos) << refused.error().message;
  auto argv = SbatchArgv(s, {.has_shards = true}, {});  // 10 GiB a shard: 25 GiB is 3 shards
  ASSERT_TRUE(argv.ok());
  EXPECT_TRUE(Has(*argv, "--gres=shard:3"));
  EXPECT_FALSE(Has(*argv, "--gres=gpu:1"));
  s.request.count = 2;
  EXPECT_FALSE(SbatchArgv(s, {.has_shards = true}, {}).ok()) << "shards share one GPU";
}

TEST(SlurmSbatch, RefusesWhatSlurmCannotHonour) {
  auto refused = [](auto change) {
    SlurmSubmission s = Basic();
    change(s.request);
    auto argv = SbatchArgv(s, {.has_shards = true}, {});
    return !argv.ok() && argv.error().kind == ErrorKind::kInvalidArgument;
  };
  EXPECT_TRUE(refused([](sched::Request& r) { r.gpu_list = "0,1"; }));
  EXPECT_TRUE(refused([](sched::Request& r) { r.min_free_bytes = 1; }));
  EXPECT_TRUE(refused([](sched::Request& r) { r.max_util_pct = 5; }));
  EXPECT_TRUE(refused([](sched::Request& r) { r.share_foreign = true; }));
  EXPECT_TRUE(refused([](sched::Request& r) { r.mig_profile = "1g.18gb"; }));
  EXPECT_TRUE(refused([](sched::Request& r) { r.priority = 3; }));
  EXPECT_TRUE(refused([](sched::Request& r) { r.order = sched::Order::kPci; }));
  EXPECT_FALSE(refused([](sched::Request& r) { r.priority = -3; }));
}

TEST(SlurmSbatch, MinutesRoundUpAndShardsAreFound) {
  EXPECT_EQ(SlurmMinutes(1), "1");
  EXPECT_EQ(SlurmMinutes(60), "1");
  EXPECT_EQ(SlurmMinutes(61), "2");
  EXPECT_EQ(SlurmMinutes(4 * 3600), "240");
  EXPECT_TRUE(HasShards("gpu:2,shard:8(S:0)\n"));
  EXPECT_TRUE(HasShards("(null)\nshard:4\n"));
  EXPECT_FALSE(HasShards("gpu:h200:8\n"));
  EXPECT_FALSE(HasShards("gpu:myshard:2\n"));
}

// Runs `sh -c 'printf "%s\n" WORD'` with WORD quoted, and returns what sh printed.
std::string ThroughSh(const std::string& word, std::string (*quote)(std::string_view) = QuoteForShell) {
  const std::string script = "printf '%s' " + quote(word);
  std::string out;
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    execl("/bin/sh", "sh", "-c", script.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[1]);
  char buffer[4096];
  ssize_t n;
  while ((n = read(fds[0], buffer, sizeof buffer)) > 0) out.append(buffer, static_cast<std::size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return out;
}

TEST(SlurmShellQuote, EveryWordComesBackExactly) {
  const std::vector<std::string> words = {"", "plain", "it's", "'", "''", "a b", "$(rm -rf /)", "`id`", "$HOME", "\\",
                                          "\"", "new\nline", "semi;colon|pipe&", "*?[glob]", "~user", "\t", "\xff\xfe", "-n"};
  for (const auto& w : words) {
    EXPECT_EQ(ThroughSh(w), w) << QuoteForShell(w);
    if (w.find('\n') == std::string::npos) {
      auto split = SplitShellWords(QuoteForShell(w));
      ASSERT_TRUE(split.ok()) << QuoteForShell(w);
      EXPECT_EQ(*split, std::vector<std::string>{w});
    }
  }
}

// `show`'s command line: plain words as they are, any other quoted, each read back exactly by sh.
TEST(ShellQuoteIfNeeded, PlainWordsStayAsTheyAreAndEveryWordComesBackExactly) {
  EXPECT_EQ(QuoteForShellIfNeeded("train.py"), "train.py");
  EXPECT_EQ(QuoteForShellIfNeeded("--lr=3e-4"), "--lr=3e-4");
  EXPECT_EQ(QuoteForShellIfNeeded("/data/a,b:c@d%e+f"), "/data/a,b:c@d%e+f");
  EXPECT_EQ(QuoteForShellIfNeeded("a b"), "'a b'");
  EXPECT_EQ(QuoteForShellIfNeeded(""), "''");
  EXPECT_EQ(QuoteForShellIfNeeded("it's"), "'it'\\''s'");
  for (const std::string w : {"", "plain", "it's", "a b", "$HOME", "*", "~", "semi;colon", "\xff", "x=$(id)", "#c"})
    EXPECT_EQ(ThroughSh(w, QuoteForShellIfNeeded), w) << QuoteForShellIfNeeded(w);
}

TEST(SlurmBatchScript, RunsTheCommandUnderGpulaneRunAndWritesItsExitCode) {
  const fs::path dir = fs::temp_directory_path() / ("gpulane-slurm-script-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  // A stand-in for gpulane: prints its arguments one a line, and the environment variable, exits 7.
  const fs::path fake = dir / "fake gpulane";
  std::ofstream(fake) << "#!/bin/sh\nfor a in \"$@\"; do printf '[%s]\\n' \"$a\"; done\necho order=$CUDA_DEVICE_ORDER\nexit 7\n";
  fs::permissions(fake, fs::perms::owner_all);
  const std::string script = BatchScriptText({fake.string(), {"-g", "2"}, {"python", "it's a $test", "x\ny"}, (dir / "exit").string()});
  std::ofstream(dir / "job.sh") << script;
  const std::string command = "cd '" + dir.string() + "' && SLURM_JOB_ID=42 sh job.sh > out.txt";
  const int status = std::system(command.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 7);
  std::ifstream out(dir / "out.txt");
  std::stringstream text;
  text << out.rdbuf();
  EXPECT_EQ(text.str(), "[run]\n[-g]\n[2]\n[--]\n[python]\n[it's a $test]\n[x\ny]\norder=PCI_BUS_ID\n");
  std::ifstream code(dir / "exit" / "42");
  int written = -1;
  code >> written;
  EXPECT_EQ(written, 7);
  // An array task names its file ARRAYID_TASK.
  const std::string task = "cd '" + dir.string() + "' && SLURM_JOB_ID=50 SLURM_ARRAY_JOB_ID=48 SLURM_ARRAY_TASK_ID=2 sh job.sh >/dev/null";
  EXPECT_NE(std::system(task.c_str()), -1);
  EXPECT_TRUE(fs::exists(dir / "exit" / "48_2"));
  fs::remove_all(dir);
}

SlurmJobRow Row(std::string state, std::string reason = "None", std::optional<int> exit_code = std::nullopt,
                std::optional<int> signal = std::nullopt) {
  SlurmJobRow r;
  r.id = "7";
  r.state = std::move(state);
  r.reason = std::move(reason);
  r.exit_code = exit_code;
  r.signal = signal;
  return r;
}

TEST(SlurmState, MapsEveryStateAndReason) {
  struct Case {
    SlurmJobRow row;
    const char* state;
    bool finished;
    std::optional<int> exit_code;
    const char* reason_has;
  };
  const Case cases[] = {
      {Row("PENDING", "Resources"), "pending", false, std::nullopt, "waiting for GPUs"},
      {Row("PENDING", "Priority"), "pending", false, std::nullopt, "Priority"},
      {Row("PENDING", "Dependency"), "pending", false, std::nullopt, "dependencies"},
      {Row("PENDING", "JobHeldUser"), "held", false, std::nullopt, "gpulane release slurm:7"},
      {Row("PENDING", "DependencyNeverSatisfied"), "cancelled", true, std::nullopt, "dependency failed"},
      {Row("RUNNING"), "running", false, std::nullopt, ""},
      {Row("COMPLETING", "None", 0), "running", false, std::nullopt, "COMPLETING"},  // a late exit code is no end yet
      {Row("CONFIGURING"), "running", false, std::nullopt, ""},
      {Row("COMPLETED", "None", 0), "completed", true, 0, ""},
      {Row("COMPLETED"), "completed", true, 0, ""},
      {Row("FAILED", "NonZeroExitCode", 3), "failed", true, 3, "NonZeroExitCode"},
      {Row("FAILED", "None", std::nullopt, 9), "failed", true, 137, ""},
      {Row("TIMEOUT", "TimeLimit", std::nullopt, 15), "timeout", true, 143, "time limit"},
      {Row("CANCELLED"), "cancelled", true, std::nullopt, "CANCELLED"},
      {Row("CANCELLED", "None", 0), "cancelled", true, std::nullopt, "CANCELLED"},  // while pending: squeue's 0 is no exit code
      {Row("CANCELLED", "None", std::nullopt, 15), "cancelled", true, 143, "CANCELLED"},   // while running: SIGTERM
      {Row("NODE_FAIL"), "failed", true, 1, "node failed"},
      {Row("OUT_OF_MEMORY", "None", 0), "failed", true, 137, "out of host memory"},
      {Row("PREEMPTED"), "cancelled", true, std::nullopt, "preempted"},
      {Row("REQUEUED"), "pending", false, std::nullopt, "requeued"},
      {Row("BOOT_FAIL"), "failed", true, 1, "BOOT_FAIL"},
  };
  for (const auto& c : cases) {
    const JobView v = MapSlurmState(c.row);
    SCOPED_TRACE(c.row.state + "/" + c.row.reason);
    EXPECT_EQ(v.state, c.state);
    EXPECT_EQ(v.finished, c.finished);
    EXPECT_EQ(v.exit_code, c.exit_code);
    EXPECT_NE(v.reason.find(c.reason_has), std::string::npos) << v.reason;
  }
  EXPECT_NE(MapSlurmState(Row("NODE_FAIL")).state, "running");
}

TEST(SlurmState, ParsesSqueueAndSacct) {
  auto rows = ParseSqueue("3_0|3|0|4|COMPLETED|None|0|gpu|n1|\n3_1|3|1|5|FAILED|NonZeroExitCode|256|other|n2|\n"
                          "3_[2-9]|3|2-9|3|PENDING|Resources|N/A|gpu||\n9|9|N/A|9|TIMEOUT|TimeLimit|15|gpu|n1|\n");
  ASSERT_TRUE(rows.ok()) << rows.error().message;
  ASSERT_EQ(rows->size(), 4u);
  EXPECT_EQ((*rows)[0].id, "3_0");
  EXPECT_EQ((*rows)[0].job_id, "4");
  EXPECT_EQ((*rows)[0].exit_code, 0);
  EXPECT_EQ((*rows)[1].exit_code, 1);
  EXPECT_EQ((*rows)[1].partition, "other");
  EXPECT_EQ((*rows)[2].id, "3_[2-9]");
  EXPECT_FALSE((*rows)[2].exit_code);
  EXPECT_EQ((*rows)[3].signal, 15);
  EXPECT_FALSE(ParseSqueue("garbage\n").ok());
  auto accounted = ParseSacct("12|FAILED|2:0|None|gpu|n1\n12.batch|FAILED|2:0||gpu|n1\n13|CANCELLED by 0|0:15|None|gpu|n2\n");
  ASSERT_TRUE(accounted.ok());
  ASSERT_EQ(accounted->size(), 2u);
  EXPECT_EQ((*accounted)[0].exit_code, 2);
  EXPECT_EQ((*accounted)[1].state, "CANCELLED");
  EXPECT_EQ((*accounted)[1].signal, 15);
}

class SlurmPoller : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("gpulane-slurm-poll-" + std::to_string(getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  RegisteredJob Job(std::string id, bool array = false) {
    RegisteredJob j;
    j.slurm_id = std::move(id);
    j.array = array;
    return j;
  }
  Poller Make() { return Poller(runner_, clock_, JobRegistry(dir_.string()), {.interval_s = 5, .new_job_interval_s = 1}); }
  fs::path dir_;
  FakeRunner runner_;
  FakeClock clock_;
};

TEST_F(SlurmPoller, OneSqueueForAllJobsInEveryPartitionWithStatesAll) {
  runner_.Answer("squeue", 0, "1|1|N/A|1|RUNNING|None|0|gpu|n1|\n2|2|N/A|2|PENDING|Resources|0|other||\n"
                              "3|3|N/A|3|FAILED|NonZeroExitCode|512|gpu|n1|\n");
  Poller poller = Make();
  auto rows = poller.Poll({Job("1"), Job("2"), Job("3")});
  ASSERT_TRUE(rows.ok()) << rows.error().message;
  ASSERT_EQ(rows->size(), 3u);
  EXPECT_EQ((*rows)[2].view.state, "failed");
  EXPECT_EQ((*rows)[2].view.exit_code, 2);
  ASSERT_EQ(runner_.calls.size(), 1u);
  const auto& call = runner_.calls[0];
  EXPECT_TRUE(Has(call, "--states=all"));
  EXPECT_TRUE(Has(call, "-a")) << "every partition, hidden ones too";
  EXPECT_TRUE(Has(call, "1,2,3"));
}

TEST_F(SlurmPoller, SharedPollIsReusedWithinTheInterval) {
  runner_.Answer("squeue", 0, "1|1|N/A|1|RUNNING|None|0|gpu|n1|\n");
  Poller first = Make(), second = Make();
  ASSERT_TRUE(first.Poll({Job("1")}).ok());
  for (int i = 0; i < 40; ++i) {  // 40 pollers over 4 s: no more calls
    clock_.Advance(0.1);
    ASSERT_TRUE(second.Poll({Job("1")}).ok());
  }
  EXPECT_EQ(runner_.CallsOf("squeue"), 1);
  clock_.Advance(1.1);
  ASSERT_TRUE(second.Poll({Job("1")}).ok());
  EXPECT_EQ(runner_.CallsOf("squeue"), 2) << "after the interval, a new poll";
}

TEST_F(SlurmPoller, ANewJobIsPolledAfterOneSecondNotTheWholeInterval) {
  runner_.Answer("squeue", 0, "1|1|N/A|1|RUNNING|None|0|gpu|n1|\n");
  runner_.Answer("squeue", 0, "1|1|N/A|1|RUNNING|None|0|gpu|n1|\n2|2|N/A|2|RUNNING|None|0|gpu|n1|\n");
  Poller poller = Make();
  ASSERT_TRUE(poller.Poll({Job("1")}).ok());
  clock_.Advance(0.5);
  auto rows = poller.Poll({Job("1"), Job("2")});
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(rows->size(), 1u) << "within a second: the shared poll as it is";
  clock_.Advance(0.6);
  rows = poller.Poll({Job("1"), Job("2")});
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(rows->size(), 2u);
  EXPECT_EQ(runner_.CallsOf("squeue"), 2);
}

TEST_F(SlurmPoller, OnePollCoversEveryUnfinishedJobOfTheUserNotOnlyTheCallers) {
  JobRegistry registry(dir_.string());
  for (const char* id : {"1", "2", "3"}) ASSERT_TRUE(registry.Add(Job(id)).ok());
  runner_.Answer("squeue", 0, "1|1|N/A|1|RUNNING|None|0|gpu|n1|\n2|2|N/A|2|PENDING|Dependency|0|gpu||\n3|3|N/A|3|COMPLETED|None|0|gpu|n1|\n");
  runner_.Answer("squeue", 0, "1|1|N/A|1|RUNNING|None|0|gpu|n1|\n2|2|N/A|2|PENDING|Dependency|0|gpu||\n");
  Poller poller = Make();
  ASSERT_TRUE(poller.Poll({Job("1")}).ok());
  ASSERT_EQ(runner_.CallsOf("squeue"), 1);
  EXPECT_TRUE(Has(runner_.calls.back(), "1,2,3")) << "the whole registry in one call";
  clock_.Advance(0.1);
  auto other = poller.Poll({Job("2")});  // e.g. `hold slurm:2` right after `show slurm:1`
  ASSERT_TRUE(other.ok());
  ASSERT_EQ(other->size(), 1u) << "job 2 is in the shared poll: no wait for the next one";
  EXPECT_EQ((*other)[0].view.state, "pending");
  EXPECT_EQ(runner_.CallsOf("squeue"), 1);
  clock_.Advance(5);
  ASSERT_TRUE(poller.Poll({Job("1")}).ok());
  EXPECT_TRUE(Has(runner_.calls.back(), "1,2")) << "finished job 3 is never asked about again";
}

TEST_F(SlurmPoller, AChangeByThisUserMakesTheNextPollAskSlurm) {
  runner_.Answer("squeue", 0, "1|1|N/A|1|PENDING|Dependency|0|gpu||\n");
  runner_.Answer("squeue", 0, "1|1|N/A|1|PENDING|JobHeldUser|0|gpu||\n");
  Poller poller = Make();
  ASSERT_TRUE(poller.Poll({Job("1")}).ok());
  clock_.Advance(0.5);
  ASSERT_TRUE(poller.Invalidate().ok());  // e.g. after scontrol hold 1
  auto rows = poller.Poll({Job("1")});
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(runner_.CallsOf("squeue"), 2) << "within the interval, but out of date";
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].view.state, "held");
  clock_.Advance(0.5);
  ASSERT_TRUE(poller.Poll({Job("1")}).ok());
  EXPECT_EQ(runner_.CallsOf("squeue"), 2) << "the new poll is shared again";
}

TEST_F(SlurmPoller, FinishedJobsAreNeverAskedAgain) {
  runner_.Answer("squeue", 0, "1|1|N/A|1|COMPLETED|None|0|gpu|n1|\n2|2|N/A|2|RUNNING|None|0|gpu|n1|\n");
  runner_.Answer("squeue", 0, "2|2|N/A|2|RUNNING|None|0|gpu|n1|\n");
  Poller poller = Make();
  ASSERT_TRUE(poller.Poll({Job("1"), Job("2")}).ok());
  clock_.Advance(6);
  ASSERT_TRUE(poller.Poll({Job("1"), Job("2")}).ok());
  EXPECT_TRUE(Has(runner_.calls.back(), "2")) << "only the unfinished job";
  clock_.Advance(6);
  auto done = poller.Poll({Job("1")});
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(runner_.CallsOf("squeue"), 2) << "nothing unfinished: no call";
}

TEST_F(SlurmPoller, GoneFromSqueueAsksSacctThenTheExitCodeFile) {
  runner_.Answer("squeue", 1, "", "slurm_load_jobs error: Invalid job id specified\n");
  runner_.Answer("sacct", 0, "5|OUT_OF_MEMORY|0:125|None|gpu|n1\n");
  Poller poller = Make();
  auto rows = poller.Poll({Job("5")});
  ASSERT_TRUE(rows.ok()) << rows.error().message;
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].view.state, "failed");
  EXPECT_EQ(runner_.CallsOf("sacct"), 1);
  // Without accounting: the exit code the batch script wrote.
  runner_.answers["sacct"] = {{1, "", "Slurm accounting storage is disabled\n"}};
  fs::create_directories(dir_ / "slurm/exit");
  std::ofstream(dir_ / "slurm/exit/6") << "3\n";
  clock_.Advance(6);
  rows = poller.Poll({Job("6"), Job("8")});
  ASSERT_TRUE(rows.ok()) << rows.error().message;
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[0].view.state, "failed");
  EXPECT_EQ((*rows)[0].view.exit_code, 3);
  EXPECT_EQ((*rows)[1].view.state, "cancelled") << "gone, no accounting, no exit code";
  EXPECT_TRUE((*rows)[1].view.finished);
  EXPECT_FALSE((*rows)[1].view.ran);
}

TEST_F(SlurmPoller, TheExitCodeFileEndsAWaitBeforeSlurmCatchesUp) {
  runner_.Answer("squeue", 0, "4|4|N/A|4|RUNNING|None|0|gpu|n1|\n");
  Poller poller = Make();
  ASSERT_TRUE(poller.Poll({Job("4")}).ok());
  fs::create_directories(dir_ / "slurm/exit");
  std::ofstream(dir_ / "slurm/exit/4") << "0\n";
  clock_.Advance(0.2);
  auto rows = poller.Poll({Job("4")});
  ASSERT_TRUE(rows.ok());
  EXPECT_TRUE((*rows)[0].view.finished);
  EXPECT_EQ((*rows)[0].view.exit_code, 0);
  EXPECT_EQ((*rows)[0].nodes, "n1");
  EXPECT_EQ(runner_.CallsOf("squeue"), 1);
  EXPECT_FALSE((*rows)[0].confirmed);
  // The next poll takes Slurm's final word; then the job is never asked about again.
  runner_.answers["squeue"] = {{0, "4|4|N/A|4|COMPLETED|None|0|gpu|n1|\n", ""}};
  clock_.Advance(5);
  rows = poller.Poll({Job("4")});
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ((*rows)[0].slurm_state, "COMPLETED");
  EXPECT_TRUE((*rows)[0].confirmed);
  clock_.Advance(10);
  ASSERT_TRUE(poller.Poll({Job("4")}).ok());
  EXPECT_EQ(runner_.CallsOf("squeue"), 2);
}

TEST_F(SlurmPoller, ArraysAreTheirTasksAndSqueueFailuresAreErrors) {
  runner_.Answer("squeue", 0, "12_0|12|0|13|COMPLETED|None|0|gpu|n1|\n12_[1-3]|12|1-3|12|PENDING|Resources|N/A|gpu||\n");
  Poller poller = Make();
  auto rows = poller.Poll({Job("12", true), Job("120")});
  ASSERT_TRUE(rows.ok()) << rows.error().message;
  ASSERT_EQ(rows->size(), 3u);  // 12_0, 12_[1-3], and 120 (gone: cancelled)
  EXPECT_EQ((*rows)[0].id, "12_0");
  EXPECT_EQ((*rows)[0].job_id, "13");
  EXPECT_EQ((*rows)[1].view.state, "pending");
  runner_.answers["squeue"] = {{1, "", "slurm_load_jobs error: Unable to contact slurm controller\n"}};
  clock_.Advance(6);
  auto failed = poller.Poll({Job("12", true)});
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.error().kind, ErrorKind::kUnavailable);
}

TEST(SlurmConfig, SubmitAndSlurmSections) {
  const fs::path file = fs::temp_directory_path() / ("gpulane-slurm-config-" + std::to_string(getpid()) + ".toml");
  auto load = [&](const std::string& text, Config& config) {
    std::ofstream(file) << text;
    Status s = LoadConfigFile(file.string(), /*trusted=*/false, config);
    fs::remove(file);
    return s;
  };
  Config config;
  ASSERT_TRUE(load("[submit]\nbackend = \"slurm\"\n[slurm]\ngpus_option = \"gpus\"\nshard_memory = \"20GiB\"\n"
                   "poll_interval = \"10s\"\n",
                   config)
                  .ok());
  EXPECT_EQ(config.submit_backend, "slurm");
  EXPECT_EQ(config.slurm_gpus_option, "gpus");
  EXPECT_EQ(config.slurm_shard_memory_bytes, 20ull << 30);
  EXPECT_EQ(config.slurm_poll_interval_s, 10);
  Config other;
  EXPECT_FALSE(load("[submit]\nbackend = \"pbs\"\n", other).ok());
  EXPECT_FALSE(load("[slurm]\npoll_interval = \"100ms\"\n", other).ok());
  EXPECT_FALSE(load("[slurm]\ncolour = 1\n", other).ok());
}

}  // namespace
}  // namespace gpulane::slurm
