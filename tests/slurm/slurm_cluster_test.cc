// gpulane on a real Slurm (issue 12, item 5): tests/slurm/cluster.sh starts munged, slurmctld and
// two slurmd node names (n1, n2) on this host with fake GPUs, once for all the tests here; each
// test submits through the real gpulane binary and checks Slurm's own view (scontrol show job),
// gpulane's (show, wait, logs, queue, cancel) and what ran inside the allocation (gpulane run on
// the fake NVML). Without Slurm installed every test fails, saying what to install.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "support/daemon_fixture.h"
#include "support/harness.h"

namespace gpulane::test {
namespace {

namespace fs = std::filesystem;

fs::path g_cluster_dir;   // the cluster's folder (slurm.conf, logs); empty when it did not start
std::string g_start_error;

class SlurmCluster : public ::testing::Environment {
 public:
  void SetUp() override {
    g_cluster_dir = fs::temp_directory_path() / ("gpulane-slurm-" + std::to_string(getpid()));
    fs::remove_all(g_cluster_dir);
    fs::create_directories(g_cluster_dir);
    const std::string command = std::string(GPULANE_TEST_SLURM_CLUSTER) + " start " + g_cluster_dir.string() + " 2>" +
                                (g_cluster_dir / "start.err").string();
    if (std::system(command.c_str()) != 0) {
      g_start_error = ReadFile(g_cluster_dir / "start.err");
      g_cluster_dir.clear();
    }
  }
  void TearDown() override {
    if (g_cluster_dir.empty()) return;
    const std::string command = std::string(GPULANE_TEST_SLURM_CLUSTER) + " stop " + g_cluster_dir.string();
    (void)std::system(command.c_str());
    // The daemons remove their pid files as they exit; the folder goes once they have.
    Eventually([] { return !fs::exists(g_cluster_dir / "run/slurmctld.pid") && !fs::exists(g_cluster_dir / "run/slurmd-n1.pid"); }, 10);
    fs::remove_all(g_cluster_dir);
  }
};

const auto* const g_environment = ::testing::AddGlobalTestEnvironment(new SlurmCluster);

// Runs a Slurm client command with the cluster's slurm.conf; returns its stdout.
std::string Slurm(const std::string& command) {
  const std::string full = "SLURM_CONF=" + (g_cluster_dir / "slurm.conf").string() + " " + command + " 2>&1";
  std::string out;
  if (std::FILE* p = popen(full.c_str(), "r")) {
    char buffer[4096];
    std::size_t n;
    while ((n = std::fread(buffer, 1, sizeof buffer, p)) > 0) out.append(buffer, n);
    pclose(p);
  }
  return out;
}

class SlurmSubmit : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(g_cluster_dir.empty()) << "the Slurm test cluster did not start (tests/slurm/cluster.sh): " << g_start_error
                                        << "\nInstall Debian's slurmctld slurmd slurm-client munge (scripts/test.sh does).";
    machine_ = std::make_unique<FakeMachine>(IdleGpus(2));
    fs::create_directories(machine_->dir() / "work");
    std::ofstream(machine_->dir() / "config.toml") << "[slurm]\npoll_interval = \"1s\"\n";
    env_ = machine_->env();
    env_["SLURM_CONF"] = (g_cluster_dir / "slurm.conf").string();
    env_["GPULANE_CONFIG"] = (machine_->dir() / "config.toml").string();
    env_["PATH"] = std::string(std::getenv("PATH") ? std::getenv("PATH") : "/usr/bin:/bin") + ":/usr/sbin";
  }
  // gpulane ARGS in the test's work folder (the jobs' directory).
  RunResult Gpulane(std::vector<std::string> args, double timeout_s = 30) {
    std::vector<std::string> argv = {"/bin/sh", "-c", "cd \"$0\" && exec \"$@\"", (machine_->dir() / "work").string(), GpulaneBinary()};
    argv.insert(argv.end(), args.begin(), args.end());
    Child child(argv, env_);
    auto result = child.Wait(timeout_s);
    if (!result) {
      child.Kill(SIGKILL);
      return {-1, child.OutSoFar(), "timed out: " + child.ErrSoFar()};
    }
    return *result;
  }
  // Submits; returns the Slurm id (the "1234" of "slurm:1234").
  std::string Submit(std::vector<std::string> args) {
    args.insert(args.begin(), {"submit", "--cluster", "slurm"});
    RunResult r = Gpulane(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::smatch m;
    const std::regex id("^slurm:([0-9]+)\n$");
    EXPECT_TRUE(std::regex_match(r.out, m, id)) << "stdout: " << r.out;
    return m.size() > 1 ? m[1].str() : "";
  }
  std::string ScontrolJob(const std::string& id) { return Slurm("scontrol show job " + id); }
  fs::path Work() const { return machine_->dir() / "work"; }

  std::unique_ptr<FakeMachine> machine_;
  Env env_;
};

TEST_F(SlurmSubmit, TranslatesTheRequestAndRunsUnderGpulaneRunInsideTheAllocation) {
  const std::string id =
      Submit({"-g", "2", "--time-limit", "90m", "--name", "trainer", "--partition", "other", "-o", "out-%j.log", "--",
              "sh", "-c", "echo \"inside $SLURM_JOB_ID lease=$GPULANE_JOB_ID cuda=$CUDA_VISIBLE_DEVICES order=$CUDA_DEVICE_ORDER\"; echo it\\'s ok"});
  ASSERT_FALSE(id.empty());
  const std::string job = ScontrolJob(id);
  EXPECT_NE(job.find("JobName=trainer"), std::string::npos) << job;
  EXPECT_NE(job.find("TimeLimit=01:30:00"), std::string::npos) << job;
  EXPECT_NE(job.find("Partition=other"), std::string::npos) << job;
  EXPECT_NE(job.find("gres:gpu:2"), std::string::npos) << job;
  EXPECT_NE(job.find("WorkDir=" + Work().string()), std::string::npos) << job;
  RunResult waited = Gpulane({"wait", "slurm:" + id});
  EXPECT_EQ(waited.exit_code, 0) << waited.err;
  EXPECT_EQ(waited.out, "slurm:" + id + " completed 0\n");
  RunResult logs = Gpulane({"logs", "slurm:" + id});
  ASSERT_EQ(logs.exit_code, 0) << logs.err;
  EXPECT_NE(logs.out.find("inside " + id + " lease="), std::string::npos) << logs.out;
  EXPECT_EQ(logs.out.find("lease= "), std::string::npos) << "gpulane run leased GPUs inside the allocation: " << logs.out;
  EXPECT_EQ(logs.out.find("cuda= "), std::string::npos) << logs.out;
  EXPECT_NE(logs.out.find("order=PCI_BUS_ID"), std::string::npos) << logs.out;
  EXPECT_NE(logs.out.find("it's ok"), std::string::npos) << logs.out;
  EXPECT_EQ(ReadFile(Work() / ("out-" + id + ".log")), logs.out);
  RunResult shown = Gpulane({"show", "--json", "slurm:" + id});
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  auto j = nlohmann::json::parse(shown.out);
  EXPECT_EQ(j["id_text"], "slurm:" + id);
  EXPECT_EQ(j["state"], "completed");
  EXPECT_EQ(j["exit_code"], 0);
  EXPECT_EQ(j["slurm"]["partition"], "other");
}

TEST_F(SlurmSubmit, AFailingJobsExitCodeIsWaitsAndShowsOwn) {
  const std::string id = Submit({"-g", "1", "--", "sh", "-c", "echo failing >&2; exit 3"});
  RunResult waited = Gpulane({"wait", "slurm:" + id});
  EXPECT_EQ(waited.exit_code, 3) << waited.err;
  EXPECT_EQ(waited.out, "slurm:" + id + " failed 3\n");
  // Slurm's own word, once it has it (it may still be COMPLETING when the exit-code file ended the wait).
  EXPECT_TRUE(Eventually([&] { return ScontrolJob(id).find("JobState=FAILED") != std::string::npos; }, 15)) << ScontrolJob(id);
  EXPECT_NE(ScontrolJob(id).find("ExitCode=3:0"), std::string::npos);
  RunResult shown = Gpulane({"show", "slurm:" + id});
  EXPECT_NE(shown.out.find("failed"), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find("exit code 3"), std::string::npos) << shown.out;
  EXPECT_NE(Gpulane({"logs", "slurm:" + id}).out.find("failing"), std::string::npos);
}

TEST_F(SlurmSubmit, DependenciesAndArrays) {
  const std::string first = Submit({"-g", "1", "--", "sh", "-c", "exit 1"});
  const std::string after_ok = Submit({"-g", "1", "--after", "slurm:" + first, "--", "true"});
  const std::string after_any = Submit({"-g", "1", "--after-any", "slurm:" + first, "--", "true"});
  EXPECT_NE(ScontrolJob(after_ok).find("Dependency=afterok:" + first), std::string::npos) << ScontrolJob(after_ok);
  EXPECT_NE(ScontrolJob(after_any).find("Dependency=afterany:" + first), std::string::npos) << ScontrolJob(after_any);
  const std::string array = Submit({"-g", "1", "--array", "0-2", "-o", "task-%A_%a.out", "-e", "task-%A_%a.err", "--", "sh", "-c",
                                    "echo task $SLURM_ARRAY_TASK_ID; echo err $SLURM_ARRAY_TASK_ID >&2; exit $SLURM_ARRAY_TASK_ID"});
  // (stderr apart: the tasks' gpulane run may say on stderr that it waits for the fake GPUs, which
  // the two node names share on this one host.)
  EXPECT_NE(ScontrolJob(array).find("ArrayJobId=" + array), std::string::npos);
  RunResult waited = Gpulane({"wait", "slurm:" + array}, 40);
  EXPECT_EQ(waited.exit_code, 1) << waited.out << waited.err;  // the first failing task's code
  EXPECT_NE(waited.out.find("slurm:" + array + "_0 completed 0\n"), std::string::npos) << waited.out;
  EXPECT_NE(waited.out.find("slurm:" + array + "_2 failed 2\n"), std::string::npos) << waited.out;
  EXPECT_EQ(ReadFile(Work() / ("task-" + array + "_1.out")), "task 1\n");
  EXPECT_EQ(Gpulane({"logs", "slurm:" + array + "_2"}).out, "task 2\n");
  EXPECT_NE(Gpulane({"logs", "--err", "slurm:" + array + "_2"}).out.find("err 2\n"), std::string::npos);
  RunResult any = Gpulane({"wait", "slurm:" + after_any}, 40);
  EXPECT_EQ(any.exit_code, 0) << any.out << any.err;
  RunResult never = Gpulane({"wait", "slurm:" + after_ok}, 40);
  EXPECT_EQ(never.exit_code, 11) << "its dependency failed: it never runs: " << never.out << never.err;
  EXPECT_NE(Slurm("squeue -h -j " + after_ok + " -o %r").find("DependencyNeverSatisfied"), std::string::npos);
  Gpulane({"cancel", "slurm:" + after_ok});
}

TEST_F(SlurmSubmit, CancelQueueAndUnknownIds) {
  const std::string id = Submit({"-g", "1", "--name", "sleeper", "--", "sleep", "300"});
  ASSERT_TRUE(Eventually([&] { return Gpulane({"show", "--json", "slurm:" + id}).out.find("\"running\"") != std::string::npos; }, 20));
  RunResult queue = Gpulane({"queue"});
  EXPECT_EQ(queue.exit_code, 0) << queue.err;
  EXPECT_NE(queue.out.find("slurm:" + id), std::string::npos) << queue.out;
  EXPECT_NE(queue.out.find("sleeper"), std::string::npos) << queue.out;
  RunResult as_json = Gpulane({"queue", "--json"});
  ASSERT_EQ(as_json.exit_code, 0) << as_json.err;
  auto list = nlohmann::json::parse(as_json.out);
  ASSERT_TRUE(list.is_array());
  bool listed = false;
  for (const auto& job : list) listed = listed || job.value("id_text", "") == "slurm:" + id;
  EXPECT_TRUE(listed) << as_json.out;
  RunResult cancelled = Gpulane({"cancel", "slurm:" + id});
  EXPECT_EQ(cancelled.exit_code, 0) << cancelled.err;
  EXPECT_EQ(cancelled.out, "slurm:" + id + "\n");
  RunResult waited = Gpulane({"wait", "slurm:" + id});
  EXPECT_NE(waited.exit_code, 0);
  EXPECT_NE(waited.out.find("slurm:" + id + " cancelled"), std::string::npos) << waited.out << waited.err;
  EXPECT_NE(ScontrolJob(id).find("JobState=CANCELLED"), std::string::npos);
  RunResult again = Gpulane({"cancel", "slurm:" + id});
  EXPECT_EQ(again.exit_code, 12) << again.err;
  RunResult unknown = Gpulane({"show", "slurm:999999"});
  EXPECT_EQ(unknown.exit_code, 8) << unknown.err;
  EXPECT_EQ(unknown.out, "");
}

TEST_F(SlurmSubmit, HoldAndReleaseAWaitingJobButNotARunningOne) {
  const std::string blocker = Submit({"-g", "1", "--name", "blocker", "--", "sleep", "300"});
  const std::string waiting = Submit({"-g", "1", "--after", "slurm:" + blocker, "--", "true"});
  ASSERT_TRUE(Eventually([&] { return ScontrolJob(blocker).find("JobState=RUNNING") != std::string::npos; }, 20));
  RunResult held = Gpulane({"hold", "slurm:" + waiting});
  EXPECT_EQ(held.exit_code, 0) << held.err;
  EXPECT_NE(ScontrolJob(waiting).find("Reason=JobHeld"), std::string::npos) << ScontrolJob(waiting);
  RunResult queue = Gpulane({"queue"});  // at once: the hold made the shared poll out of date
  EXPECT_NE(queue.out.find("held"), std::string::npos) << queue.out;
  RunResult running = Gpulane({"hold", "slurm:" + blocker});
  EXPECT_EQ(running.exit_code, 12) << running.err;
  EXPECT_NE(running.err.find("is running: only a waiting job can be held"), std::string::npos)
      << running.err << Gpulane({"show", "slurm:" + blocker}).out << ScontrolJob(blocker) << Gpulane({"logs", "slurm:" + blocker}).out;
  EXPECT_NE(ScontrolJob(blocker).find("JobState=RUNNING"), std::string::npos);
  RunResult released = Gpulane({"release", "slurm:" + waiting});
  EXPECT_EQ(released.exit_code, 0) << released.err;
  EXPECT_EQ(ScontrolJob(waiting).find("Reason=JobHeld"), std::string::npos) << ScontrolJob(waiting);
  EXPECT_NE(ScontrolJob(waiting).find("Dependency=afterok:" + blocker), std::string::npos) << ScontrolJob(waiting);
  RunResult unknown = Gpulane({"hold", "slurm:999999"});
  EXPECT_EQ(unknown.exit_code, 8) << unknown.err;
  EXPECT_EQ(Gpulane({"cancel", "slurm:" + blocker, "slurm:" + waiting}).exit_code, 0);
}

TEST_F(SlurmSubmit, SharesAndRefusals) {
  const std::string id = Submit({"-g", "1", "--mem", "15GiB", "--hold", "--", "true"});
  const std::string job = ScontrolJob(id);
  EXPECT_NE(job.find("gres:shard:2"), std::string::npos) << "15 GiB at 10 GiB a shard: " << job;
  EXPECT_NE(job.find("JobState=PENDING"), std::string::npos) << job;
  RunResult held = Gpulane({"show", "slurm:" + id});
  EXPECT_NE(held.out.find("held"), std::string::npos) << held.out;
  EXPECT_EQ(Gpulane({"cancel", "slurm:" + id}).exit_code, 0);
  RunResult refused = Gpulane({"submit", "--cluster", "slurm", "--gpus", "0", "--", "true"});
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_EQ(refused.out, "");
  EXPECT_NE(refused.err.find("--gpus"), std::string::npos) << refused.err;
  EXPECT_EQ(std::count(refused.err.begin(), refused.err.end(), '\n'), 1) << refused.err;
  RunResult local_dep = Gpulane({"submit", "--cluster", "slurm", "--after", "12", "--", "true"});
  EXPECT_EQ(local_dep.exit_code, 2) << local_dep.err;
}

TEST_F(SlurmSubmit, ConfigBackendAndClusterLocalOverride) {
  std::ofstream(machine_->dir() / "config.toml") << "[submit]\nbackend = \"slurm\"\n[slurm]\npoll_interval = \"1s\"\n";
  RunResult by_config = Gpulane({"submit", "-g", "0", "--", "true"});
  ASSERT_EQ(by_config.exit_code, 0) << by_config.err;
  EXPECT_EQ(by_config.out.rfind("slurm:", 0), 0u) << by_config.out;
  EXPECT_EQ(ScontrolJob(by_config.out.substr(6, by_config.out.size() - 7)).find("gres:gpu"), std::string::npos)
      << "-g 0: no GPU asked of Slurm";
  // --cluster local takes this machine's queue: there slurm:N is no job id (its own message, exit 2).
  RunResult local = Gpulane({"submit", "--cluster", "local", "--after", "slurm:1", "--", "true"});
  EXPECT_EQ(local.exit_code, 2);
  EXPECT_NE(local.err.find("--after"), std::string::npos) << local.err;
  EXPECT_EQ(Gpulane({"wait", by_config.out.substr(0, by_config.out.size() - 1)}).exit_code, 0);
}

TEST_F(SlurmSubmit, TwoNodeNamesOnOneHostBothRunJobs) {
  // Two -g 2 jobs: one node's two GPUs each, so Slurm must place them on n1 and n2 at once.
  const std::string gate = (Work() / "go").string();
  const std::string a = Submit({"-g", "2", "--", "sh", "-c", "while [ ! -e '" + gate + "' ]; do sleep 0.1; done"});
  // The second job on its own fake machine, so that the two gpulane runs do not share two fake GPUs.
  FakeMachine other(IdleGpus(2));
  Env saved = env_;
  for (const auto& [key, value] : other.env())
    if (key != "GPULANE_STATE_DIR") env_[key] = value;
  const std::string b = Submit({"-g", "2", "--", "sh", "-c", "while [ ! -e '" + gate + "' ]; do sleep 0.1; done"});
  env_ = saved;
  std::string nodes;
  EXPECT_TRUE(Eventually([&] {
    nodes = Slurm("squeue -h -t R -j " + a + "," + b + " -o %N");
    return nodes.find("n1") != std::string::npos && nodes.find("n2") != std::string::npos;
  }, 20)) << nodes;
  std::ofstream(gate) << "";
  EXPECT_EQ(Gpulane({"wait", "slurm:" + a, "slurm:" + b}).exit_code, 0);
}

TEST_F(SlurmSubmit, AJobWhoseNodeFailsIsNeverShownRunning) {
  // As Slurm does by default, the job goes back in line; with SBATCH_NO_REQUEUE (sbatch reads it
  // from the environment gpulane passes on) it ends NODE_FAIL, a failure, never "running".
  auto node_of = [&](const std::string& id) {
    std::string node;
    EXPECT_TRUE(Eventually([&] {
      node = Slurm("squeue -h -t R -j " + id + " -o %N");
      node.erase(node.find_last_not_of(" \n") + 1);
      return !node.empty();
    }, 20)) << ScontrolJob(id);
    return node;
  };
  auto fail_node = [&](const std::string& node) { Slurm("scontrol update nodename=" + node + " state=down reason=gpulane-test"); };
  auto resume_node = [&](const std::string& node) {
    Slurm("scontrol update nodename=" + node + " state=resume");
    EXPECT_TRUE(Eventually([&] { return Slurm("sinfo -h -n " + node + " -o %t").find("idle") != std::string::npos; }, 20))
        << Slurm("sinfo -n " + node);
  };
  const std::string requeued = Submit({"-g", "1", "--", "sleep", "300"});
  std::string node = node_of(requeued);
  ASSERT_FALSE(node.empty());
  fail_node(node);
  nlohmann::json shown;
  EXPECT_TRUE(Eventually([&] {
    shown = nlohmann::json::parse(Gpulane({"show", "--json", "slurm:" + requeued}).out, nullptr, false);
    return shown.is_object() && shown.value("state", "") != "running";
  }, 15)) << shown.dump();
  EXPECT_EQ(shown.value("state", ""), "pending") << shown.dump();
  EXPECT_NE(ScontrolJob(requeued).find("Restarts=1"), std::string::npos) << ScontrolJob(requeued);
  EXPECT_EQ(Gpulane({"cancel", "slurm:" + requeued}).exit_code, 0);
  resume_node(node);

  env_["SBATCH_NO_REQUEUE"] = "1";
  const std::string failed = Submit({"-g", "1", "--", "sleep", "300"});
  env_.erase("SBATCH_NO_REQUEUE");
  node = node_of(failed);
  ASSERT_FALSE(node.empty());
  fail_node(node);
  RunResult waited = Gpulane({"wait", "slurm:" + failed}, 20);
  EXPECT_NE(waited.exit_code, 0) << waited.out << waited.err;
  EXPECT_EQ(waited.out.rfind("slurm:" + failed + " failed", 0), 0u) << waited.out << waited.err;
  EXPECT_NE(ScontrolJob(failed).find("JobState=NODE_FAIL"), std::string::npos) << ScontrolJob(failed);
  RunResult show = Gpulane({"show", "slurm:" + failed});
  EXPECT_NE(show.out.find("NODE_FAIL"), std::string::npos) << show.out;
  resume_node(node);
}

}  // namespace
}  // namespace gpulane::test
