// gpulane queue, show, cancel, logs, wait, hold, release and status against a user-mode daemon: what
// each prints and how it exits, as a user would check: one test through the binary for each path a
// user takes. Which jobs a request selects (queue --all/--user, cancel --name/--user, an array's
// id) and what a large cancel logs are the daemon's decisions, tested in-process:
// tests/unit/daemon_inproc_commands_test.cc and daemon_inproc_jobs_test.cc.
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fmt/format.h>

#include "support/daemon_fixture.h"
#include "support/scenarios.h"
#include "support/text.h"

namespace gpulane::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string Me() { return UserName(getuid()); }

// The queue table's line for job `id` ("" when none).
std::string QueueLine(const std::string& table, std::int64_t id) {
  for (const auto& line : Lines(table)) {
    std::size_t start = line.find_first_not_of(' ');
    if (start != std::string::npos && line.compare(start, Id(id).size() + 1, Id(id) + " ") == 0) return line;
  }
  return "";
}

// ---- queue ------------------------------------------------------------------------------------

TEST(DaemonQueue, TableShowsPendingAndRunningJobsButNotFinishedOnes) {
  TestDaemon d;
  const fs::path log = d.work() / "marks.log", gate = d.work() / "gate";
  const std::int64_t done = d.Submit({"--name", "quick", "--", "true"});
  ASSERT_EQ(d.Gpulane({"wait", Id(done)}).exit_code, 0);
  const std::int64_t job = d.Submit([&] {
    std::vector<std::string> args = {"--name", "gated"};
    args.push_back("--");
    for (const auto& a : MarkedJob(log.string(), gate.string())) args.push_back(a);
    return args;
  }());
  ASSERT_TRUE(Eventually([&] { return CountMarks(ReadMarks(log), "start", job) == 1; }, 30));
  ASSERT_TRUE(d.WaitForState(job, "running"));
  const std::int64_t held = d.Submit({"--hold", "-g", "2", "--name", "later", "--", "true"});
  RunResult r = d.Gpulane({"queue"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto lines = Lines(r.out);
  ASSERT_EQ(lines.size(), 3u) << r.out;
  for (const char* column : {"ID", "USER", "NAME", "GPUS", "STATE", "AGE"})
    EXPECT_TRUE(Contains(lines[0], column)) << lines[0];
  const std::string run_line = QueueLine(r.out, job), held_line = QueueLine(r.out, held);
  EXPECT_TRUE(Contains(run_line, Me()) && Contains(run_line, "gated") && Contains(run_line, " running "))
      << run_line;
  EXPECT_TRUE(Contains(held_line, "later") && Contains(held_line, " held ") && Contains(held_line, " 2 ")) << held_line;
  EXPECT_EQ(QueueLine(r.out, done), "") << "finished jobs are listed only with --all";
  Touch(gate);
  ASSERT_EQ(d.Gpulane({"wait", Id(job)}).exit_code, 0);
  RunResult all = d.Gpulane({"queue", "--all"});
  EXPECT_TRUE(Contains(QueueLine(all.out, done), "completed")) << all.out;
  EXPECT_TRUE(Contains(QueueLine(all.out, job), "completed")) << all.out;
  EXPECT_TRUE(Contains(QueueLine(all.out, held), "held")) << all.out;
  // --limit N lists the newest N of --all and says on stderr what is left out; alone it is refused.
  RunResult newest = d.Gpulane({"queue", "--all", "--limit", "2"});
  ASSERT_EQ(newest.exit_code, 0) << newest.err;
  EXPECT_EQ(LineCount(newest.out), 1 + 2) << newest.out;
  EXPECT_EQ(QueueLine(newest.out, done), "") << "the oldest is left out: " << newest.out;
  EXPECT_TRUE(Contains(newest.err, "the newest 2 jobs are listed and 1 older one is left out")) << newest.err;
  EXPECT_TRUE(Contains(newest.err, "--limit N")) << newest.err;
  RunResult alone = d.Gpulane({"queue", "--limit", "3"});
  EXPECT_EQ(alone.exit_code, 2) << alone.out;
  EXPECT_TRUE(Contains(alone.err, "--all")) << alone.err;
}

// ---- show -------------------------------------------------------------------------------------

TEST(DaemonShow, TextAndJson) {
  TestDaemon d;
  const std::int64_t id = d.Submit({"--name", "shown", "--", "sh", "-c", "exit 3"});
  d.Gpulane({"wait", Id(id)});
  RunResult r = d.Gpulane({"show", Id(id)});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Lines(r.out).at(0), fmt::format("job {}  {}  failed", id, Me()));
  EXPECT_TRUE(Contains(r.out, "name      shown\n")) << r.out;
  EXPECT_TRUE(Contains(r.out, "command   sh -c 'exit 3'\n")) << r.out;
  EXPECT_TRUE(Contains(r.out, "directory " + d.work().string() + "\n")) << r.out;
  EXPECT_TRUE(Contains(r.out, "exit code 3\n")) << r.out;
  json j = d.Show(id);
  EXPECT_EQ(j["id"], id);
  EXPECT_EQ(j["exit_code"], 3);
  EXPECT_EQ(j["spec"]["cwd"], d.work().string());
  ASSERT_TRUE(j["spec"]["env"].is_array()) << "the owner sees the job's environment";
  EXPECT_TRUE(IsGpulaneError(d.Gpulane({"show", "4242"}), 8, "4242"));
}

// ---- cancel -----------------------------------------------------------------------------------

TEST(DaemonCancel, PendingJobNeverRuns) {
  TestDaemon d;
  const fs::path mark = d.work() / "ran";
  const std::int64_t id = d.Submit({"--hold", "--", "touch", mark.string()});
  RunResult r = d.Gpulane({"cancel", Id(id)});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "cancelled job " + Id(id) + "\n") << "cancel says what it did";
  RunResult wait = d.Gpulane({"wait", Id(id)});
  EXPECT_EQ(wait.exit_code, 11) << "cancelled before it ran";
  EXPECT_EQ(wait.out, Id(id) + " cancelled\n");
  EXPECT_EQ(d.State(id), "cancelled");
  // Released or not, a cancelled job stays cancelled: once a job needing every GPU, queued after
  // it, has run, it would have run too.
  EXPECT_NE(d.Gpulane({"release", Id(id)}).exit_code, 0);
  ASSERT_TRUE(d.RunJobNeedingEveryGpu());
  EXPECT_FALSE(fs::exists(mark));
  EXPECT_TRUE(IsGpulaneError(d.Gpulane({"cancel", Id(id)}), 12, "already ended"));
  EXPECT_TRUE(IsGpulaneError(d.Gpulane({"cancel", "777"}), 8, "777"));
  EXPECT_TRUE(IsGpulaneError(d.Gpulane({"cancel"}), 2, "cancel"));
}

TEST(DaemonCancel, RunningJobGetsSigterm) {
  TestDaemon d;
  const fs::path f = d.work() / "signals";
  const std::int64_t id = d.Submit({"--", "sh", "-c",
                                    "trap 'echo got TERM >> \"$0\"; exit 5' TERM; echo started >> \"$0\"; "
                                    "while :; do sleep 0.1; done",
                                    f.string()});
  ASSERT_TRUE(Eventually([&] { return Contains(ReadFile(f), "started"); }, 30));
  ASSERT_TRUE(d.WaitForState(id, "running"));
  RunResult r = d.Gpulane({"cancel", Id(id)});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "cancelling job " + Id(id) + " (SIGTERM sent; SIGKILL after its kill grace)\n")
      << "a running job is being stopped, not gone yet";
  RunResult wait = d.Gpulane({"wait", Id(id)}, {}, 60);
  EXPECT_EQ(wait.out, Id(id) + " cancelled 5\n");
  EXPECT_EQ(wait.exit_code, 5);
  EXPECT_EQ(ReadFile(f), "started\ngot TERM\n");
}

TEST(DaemonCancel, JobWaitingForGpusNeverRuns) {
  TestDaemon d({.state = IdleGpus(1)});
  const fs::path log = d.work() / "marks.log", gate = d.work() / "gate", mark = d.work() / "ran";
  const std::int64_t blocker = d.Submit(MarkedJob(log.string(), gate.string()));
  ASSERT_TRUE(d.WaitForState(blocker, "running"));
  const std::int64_t waiting = d.Submit({"--", "touch", mark.string()});
  // Its supervisor is in line for the GPU, and says so.
  ASSERT_TRUE(Eventually([&] { return Contains(d.Show(waiting).value("reason", ""), "in line"); }, 30))
      << d.Show(waiting).dump();
  // `show` and `queue` call it waiting (its state is launching in JSON) and print why.
  RunResult shown = d.Gpulane({"show", Id(waiting)});
  EXPECT_TRUE(Contains(shown.out, fmt::format("job {}  {}  waiting\n", waiting, Me()))) << shown.out;
  EXPECT_TRUE(Contains(shown.out, "\n  reason    waiting, 1st in line: ")) << shown.out;
  EXPECT_TRUE(Contains(QueueLine(d.Gpulane({"queue"}).out, waiting), " waiting ")) << d.Gpulane({"queue"}).out;
  RunResult r = d.Gpulane({"cancel", Id(waiting)});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  RunResult wait = d.Gpulane({"wait", Id(waiting)});
  EXPECT_EQ(wait.exit_code, 11) << wait.out << wait.err;
  EXPECT_EQ(wait.out, Id(waiting) + " cancelled\n");
  Touch(gate);
  ASSERT_EQ(d.Gpulane({"wait", Id(blocker)}).exit_code, 0);
  // The GPU is free: a job after it in line gets it, and it would have got it first.
  ASSERT_TRUE(d.RunJobNeedingEveryGpu());
  EXPECT_FALSE(fs::exists(mark));
}

TEST(DaemonCancel, CancelRightAfterSubmissionStopsTheJob) {
  TestDaemon d;
  const fs::path mark = d.work() / "ran";
  // Cancelled within microseconds of the acknowledgement, before the daemon has heard from the
  // job's supervisor: the job must not run to its end.
  RawConnection c(d.socket());
  json submit = d.SubmitRequest({"sh", "-c", "sleep 2; touch \"$0\"", mark.string()});
  submit["v"] = 2;
  ASSERT_TRUE(c.SendFrame(submit.dump()));
  auto reply = c.Read(30);
  ASSERT_TRUE(reply && reply->value("ok", false)) << (reply ? reply->dump() : "no reply");
  const std::int64_t id = (*reply)["ids"][0].get<std::int64_t>();
  ASSERT_TRUE(c.SendFrame(json({{"v", 2}, {"op", "cancel"}, {"ids", {id}}}).dump()));
  auto cancelled = c.Read(30);
  ASSERT_TRUE(cancelled && cancelled->value("ok", false)) << (cancelled ? cancelled->dump() : "no reply");
  RunResult wait = d.Gpulane({"wait", Id(id)}, {}, 60);
  EXPECT_TRUE(Contains(wait.out, Id(id) + " cancelled")) << wait.out << wait.err;
  // None of its processes is left to touch the mark later.
  EXPECT_TRUE(Eventually([&] { return d.JobPids().empty(); }, 10)) << d.JobPids().size() << " job processes left";
  EXPECT_FALSE(fs::exists(mark)) << "the cancelled job ran to its end";
  json shown = d.Show(id);
  ASSERT_TRUE(shown.contains("end_time")) << shown.dump();
  if (shown.contains("start_time")) {
    EXPECT_LT(shown["end_time"].get<double>() - shown["start_time"].get<double>(), 1.5) << shown.dump();
  }
}

// ---- logs -------------------------------------------------------------------------------------

TEST(DaemonLogs, PrintsTheOutputAndFollowsUntilTheJobEnds) {
  TestDaemon d;
  const std::int64_t done = d.Submit({"--", "sh", "-c", "printf 'one\\ntwo\\n'; echo three"});
  d.Gpulane({"wait", Id(done)});
  RunResult logs = d.Gpulane({"logs", Id(done)});
  EXPECT_EQ(logs.exit_code, 0) << logs.err;
  EXPECT_EQ(logs.out, "one\ntwo\nthree\n");

  const fs::path gate = d.work() / "gate", last = d.work() / "last";
  const std::int64_t id = d.Submit({"--", "sh", "-c",
                                    "echo first; while [ ! -e \"$0\" ]; do sleep 0.05; done; echo middle; "
                                    "while [ ! -e \"$1\" ]; do sleep 0.05; done; echo second",
                                    gate.string(), last.string()});
  Child follow = d.StartGpulane({"logs", "-f", Id(id)});
  ASSERT_TRUE(Eventually([&] { return follow.OutSoFar() == "first\n"; }, 30)) << follow.OutSoFar() << follow.ErrSoFar();
  // It goes on following while the job runs: what the job writes later still comes.
  Touch(gate);
  ASSERT_TRUE(Eventually([&] { return follow.OutSoFar() == "first\nmiddle\n"; }, 30)) << follow.OutSoFar() << follow.ErrSoFar();
  EXPECT_FALSE(follow.Wait(0)) << "logs -f returned while the job still runs";
  Touch(last);
  auto r = follow.Wait(30);
  ASSERT_TRUE(r) << "logs -f did not end with the job";
  EXPECT_EQ(r->exit_code, 0) << r->err;
  EXPECT_EQ(r->out, "first\nmiddle\nsecond\n");
  EXPECT_TRUE(IsGpulaneError(d.Gpulane({"logs", "999"}), 8, "999"));
}

// ---- wait -------------------------------------------------------------------------------------

TEST(DaemonWait, ExitsWithTheJobsStatus) {
  TestDaemon d;
  const fs::path gate = d.work() / "gate";
  const std::int64_t id = d.Submit({"--", "sh", "-c", "while [ ! -e \"$0\" ]; do sleep 0.05; done; exit 3", gate.string()});
  Child wait = d.StartGpulane({"wait", Id(id)});
  // The same request over the socket: once a later round trip has come back, the daemon has
  // handled it and had a turn to answer it, and must not have.
  RawConnection raw(d.socket());
  ASSERT_TRUE(raw.SendFrame(json({{"v", 2}, {"op", "wait"}, {"ids", {id}}}).dump()));
  ASSERT_TRUE(d.Barrier());
  EXPECT_FALSE(raw.Readable()) << "wait was answered while the job still runs";
  EXPECT_FALSE(wait.Wait(0)) << "wait returned while the job still runs";
  Touch(gate);
  auto r = wait.Wait(30);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(r->out, Id(id) + " failed 3\n");
  auto answer = raw.Read(30);
  ASSERT_TRUE(answer && answer->value("ok", false)) << (answer ? answer->dump() : "no answer");
  EXPECT_EQ((*answer)["jobs"][0]["exit_code"], 3) << answer->dump();
  const std::int64_t ok = d.Submit({"--", "true"});
  RunResult both = d.Gpulane({"wait", Id(ok), Id(id)});
  EXPECT_EQ(both.exit_code, 3);
  EXPECT_EQ(both.out, fmt::format("{} completed 0\n{} failed 3\n", ok, id));
  EXPECT_TRUE(IsGpulaneError(d.Gpulane({"wait", "555"}), 8, "555"));
}

// ---- hold / release ---------------------------------------------------------------------------

// ---- status -----------------------------------------------------------------------------------

TEST(DaemonStatus, ShowsWhichJobHoldsEachGpu) {
  TestDaemon d;
  const fs::path log = d.work() / "marks.log", gate = d.work() / "gate";
  std::vector<std::string> args = {"--gpus", "1", "--"};
  for (const auto& a : MarkedJob(log.string(), gate.string())) args.push_back(a);
  const std::int64_t id = d.Submit(args);
  ASSERT_TRUE(d.WaitForState(id, "running"));
  RunResult j = d.Gpulane({"status", "--json"});
  ASSERT_EQ(j.exit_code, 0) << j.err;
  json status = json::parse(j.out);
  if (!status["gpus"][1].contains("held_by")) GTEST_SKIP() << "gpulane status does not show lease holders yet";
  const std::string holder = fmt::format("job {} ({})", id, Me());
  EXPECT_EQ(status["gpus"][1]["held_by"], holder);
  EXPECT_FALSE(status["gpus"][0].contains("held_by")) << status["gpus"][0].dump();
  RunResult text = d.Gpulane({"status"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  std::string gpu0, gpu1;
  for (const auto& line : Lines(text.out)) {
    if (line.rfind("[0]", 0) == 0) gpu0 = line;
    if (line.rfind("[1]", 0) == 0) gpu1 = line;
  }
  EXPECT_TRUE(Contains(gpu1, "[" + holder + "]")) << text.out;
  EXPECT_FALSE(gpu0.empty() || Contains(gpu0, "[job")) << text.out;
  Touch(gate);
  ASSERT_EQ(d.Gpulane({"wait", Id(id)}).exit_code, 0);
  json after = json::parse(d.Gpulane({"status", "--json"}).out);
  EXPECT_FALSE(after["gpus"][1].contains("held_by")) << "the lease ends with the job";
}

}  // namespace
}  // namespace gpulane::test
