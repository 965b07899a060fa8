// One exit-code table for every job command (README, "Exit codes"), through the real binary: an
// unknown job is 8, another user's job 9, a job in the wrong state for the command 12, a malformed id
// 2, for cancel, hold, release, show, wait and logs alike; a cancel that matches nothing is an error
// (8). A command naming several jobs acts on those it can, warns once per failure, and exits with
// the first failure's code.
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fmt/format.h>
#include <memory>
#include <string>

#include "support/daemon_fixture.h"
#include "support/scenarios.h"
#include "support/text.h"

namespace gpulane::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string Describe(const std::vector<std::string>& args) {
  std::string out = "gpulane";
  for (const auto& a : args) out += " " + a;
  return out;
}

// A command over several jobs that did some of them: exit `code`, `out` on stdout, and one
// warning line per part of `warnings` (in order) on stderr.
::testing::AssertionResult IsPartialFailure(const RunResult& r, int code, const std::string& out,
                                            const std::vector<std::string>& warnings) {
  auto lines = Lines(r.err);
  bool ok = r.exit_code == code && r.out == out && lines.size() == warnings.size();
  for (std::size_t i = 0; ok && i < warnings.size(); ++i)
    ok = lines[i].rfind("gpulane: warning: ", 0) == 0 && Contains(lines[i], warnings[i]);
  if (ok) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "expected exit " << code << ", stdout '" << out << "' and " << warnings.size()
                                       << " warning lines; got exit " << r.exit_code << ", stdout '" << r.out
                                       << "', stderr '" << r.err << "'";
}

// Nothing done, several failures: one error line each (in order), the first one's code.
::testing::AssertionResult IsFailures(const RunResult& r, int code, const std::vector<std::string>& errors) {
  auto lines = Lines(r.err);
  bool ok = r.exit_code == code && r.out.empty() && lines.size() == errors.size();
  for (std::size_t i = 0; ok && i < errors.size(); ++i)
    ok = lines[i].rfind("gpulane: error: ", 0) == 0 && Contains(lines[i], errors[i]);
  if (ok) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "expected exit " << code << ", no stdout and " << errors.size()
                                       << " error lines; got exit " << r.exit_code << ", stdout '" << r.out
                                       << "', stderr '" << r.err << "'";
}

struct Row {
  std::vector<std::string> args;
  int code;
  std::string part;  ///< in the one error line
};

// One job in each state, all the caller's: running (until `gate` exists), pending (after it),
// held, completed, and a held array of two tasks.
struct Jobs {
  std::int64_t running = 0, pending = 0, held = 0, done = 0, array = 0;
};

Jobs SubmitOneOfEach(const TestDaemon& d, const fs::path& gate) {
  Jobs j;
  j.done = d.Submit({"--", "true"});
  EXPECT_EQ(d.Gpulane({"wait", Id(j.done)}).exit_code, 0);
  std::vector<std::string> gated = {"--"};
  for (const auto& a : MarkedJob((d.work() / "marks.log").string(), gate.string())) gated.push_back(a);
  j.running = d.Submit(gated);
  EXPECT_TRUE(d.WaitForState(j.running, "running"));
  j.pending = d.Submit({"--after", Id(j.running), "--", "true"});
  EXPECT_TRUE(d.WaitForState(j.pending, "pending"));
  j.held = d.Submit({"--hold", "--", "true"});
  RunResult array = d.Gpulane({"submit", "--hold", "--array", "0-1", "--", "true"});
  EXPECT_EQ(array.exit_code, 0) << array.err;
  j.array = array.exit_code == 0 ? std::stoll(array.out) : -1;
  return j;
}

TEST(DaemonExitCodes, EveryJobCommandFollowsTheOneTable) {
  TestDaemon d;
  const fs::path gate = d.work() / "gate";
  const Jobs j = SubmitOneOfEach(d, gate);
  const std::string me = UserName(getuid()), run = Id(j.running), pend = Id(j.pending), held = Id(j.held),
                    done = Id(j.done), arr = Id(j.array);
  const std::vector<Row> table = {
      // 8: no such job, for every command.
      {{"cancel", "999"}, 8, "no job 999"},
      {{"hold", "999"}, 8, "no job 999"},
      {{"release", "999"}, 8, "no job 999"},
      {{"show", "999"}, 8, "no job 999"},
      {{"show", "--json", "999"}, 8, "no job 999"},
      {{"wait", "999"}, 8, "no job 999"},
      {{"logs", "999"}, 8, "no job 999"},
      {{"logs", "-f", "999"}, 8, "no job 999"},
      {{"cancel", arr + "_5"}, 8, fmt::format("no job {}_5: array {} has tasks 0-1", arr, arr)},
      {{"hold", done + "_0"}, 8, fmt::format("job {} is not an array", done)},
      {{"release", arr + "_7"}, 8, fmt::format("no job {}_7", arr)},
      // 8: a cancel that matches nothing.
      {{"cancel", "--name", "nosuch"}, 8, "no queued or running job matches --name nosuch"},
      {{"cancel", "--user", me, "--name", "nosuch"}, 8, fmt::format("no queued or running job matches --user {} --name nosuch", me)},
      {{"cancel", "--user", "nobody-gl-test"}, 8, "no queued or running job matches --user nobody-gl-test"},
      // 12: the job is not in a state the command applies to.
      {{"cancel", done}, 12, fmt::format("job {} has already ended (completed)", done)},
      {{"hold", done}, 12, fmt::format("job {} has already ended (completed)", done)},
      {{"release", done}, 12, fmt::format("job {} has already ended (completed)", done)},
      {{"hold", run}, 12, fmt::format("job {} is running", run)},
      {{"hold", held}, 12, fmt::format("job {} is held already", held)},
      {{"release", run}, 12, fmt::format("job {} is running, not held", run)},
      {{"release", pend}, 12, fmt::format("job {} is pending, not held", pend)},
      // A new user's finding: an array whose every task is held said "no pending tasks to hold";
      // it is held already, said as a single job's is (and with its exit code, 12).
      {{"hold", arr}, 12, fmt::format("array {} is held already (2 tasks held)", arr)},
      {{"hold", arr + "_1"}, 12, fmt::format("job {}_1 is held already", arr)},
      // 2: a malformed id or command line.
      {{"cancel", "12_"}, 2, "job id '12_'"},
      {{"hold", "_3"}, 2, "job id '_3'"},
      {{"release", "-1"}, 2, "job id '-1'"},
      {{"show", "12_x"}, 2, "job id '12_x'"},
      {{"wait", "0"}, 2, "job id '0'"},
      {{"logs", "12_[2-1]"}, 2, "job id '12_[2-1]'"},
      {{"logs", arr}, 2, fmt::format("gpulane logs {}_0", arr)},
      {{"cancel"}, 2, "give job ids, --user or --name"},
  };
  for (const Row& row : table) {
    RunResult r = d.Gpulane(row.args);
    EXPECT_TRUE(IsGpulaneError(r, row.code, row.part)) << Describe(row.args);
  }
  // None of them changed anything.
  EXPECT_EQ(d.State(j.running), "running");
  EXPECT_EQ(d.State(j.pending), "pending");
  EXPECT_EQ(d.State(j.held), "held");
  EXPECT_EQ(d.State(j.array), "held");
  EXPECT_EQ(d.State(j.array + 1), "held");
  // show and wait of a finished job succeed; wait of a job that never ran is 11.
  EXPECT_EQ(d.Gpulane({"show", done}).exit_code, 0);
  EXPECT_EQ(d.Gpulane({"wait", done}).exit_code, 0);
  Touch(gate);
  ASSERT_EQ(d.Gpulane({"wait", run, pend}).exit_code, 0);
}

TEST(DaemonExitCodes, SomeJobsFailingMeansWarningsTheOthersDoneAndTheFirstFailuresCode) {
  TestDaemon d;
  const fs::path gate = d.work() / "gate";
  const Jobs j = SubmitOneOfEach(d, gate);
  const std::string run = Id(j.running), pend = Id(j.pending), held = Id(j.held), done = Id(j.done), arr = Id(j.array);
  // cancel: the held job is cancelled, the unknown one warned about.
  EXPECT_TRUE(IsPartialFailure(d.Gpulane({"cancel", held, "999"}), 8, "cancelled job " + held + "\n", {"no job 999"}));
  EXPECT_EQ(d.State(j.held), "cancelled");
  // hold: the unknown id comes first, then the held job; the pending one is held.
  EXPECT_TRUE(IsPartialFailure(d.Gpulane({"hold", "998", pend, held}), 8, "held job " + pend + "\n",
                               {"no job 998", fmt::format("job {} has already ended (cancelled)", held)}));
  EXPECT_EQ(d.State(j.pending), "held");
  // release: the first failure is the wrong state (12), though an unknown id follows.
  EXPECT_TRUE(IsPartialFailure(d.Gpulane({"release", run, pend + "," + "997"}), 12, "released job " + pend + "\n",
                               {fmt::format("job {} is running, not held", run), "no job 997"}));
  EXPECT_EQ(d.State(j.pending), "pending");
  // wait: the unknown id is reported at once; the job is waited for.
  EXPECT_TRUE(IsPartialFailure(d.Gpulane({"wait", done, "996"}), 8, done + " completed 0\n", {"no job 996"}));
  // show: the task there is shown, the one not there warned about.
  RunResult show = d.Gpulane({"show", arr + "_[0,5]"});
  EXPECT_EQ(show.exit_code, 8) << show.err;
  EXPECT_TRUE(Contains(show.out, fmt::format("job {}_0  ", arr))) << show.out;
  EXPECT_EQ(show.err, fmt::format("gpulane: warning: no job {}_5: array {} has tasks 0-1\n", arr, arr));
  // An array's id with some tasks not applicable acts on the others without a word.
  ASSERT_EQ(d.Gpulane({"release", arr + "_0"}).exit_code, 0);
  RunResult hold_array = d.Gpulane({"cancel", arr});
  EXPECT_EQ(hold_array.exit_code, 0) << hold_array.err;
  EXPECT_EQ(hold_array.err, "");
  // Nothing done: one error line per failure, the first one's code.
  EXPECT_TRUE(IsFailures(d.Gpulane({"cancel", "995", done}), 8,
                         {"no job 995", fmt::format("job {} has already ended", done)}));
  EXPECT_TRUE(IsFailures(d.Gpulane({"cancel", done, "995"}), 12,
                         {fmt::format("job {} has already ended", done), "no job 995"}));
  // cancel with ids and a name that matches nothing: the name is a failure too.
  const std::int64_t extra = d.Submit({"--hold", "--", "true"});
  EXPECT_TRUE(IsPartialFailure(d.Gpulane({"cancel", Id(extra), "--name", "nosuch"}), 8, "cancelled job " + Id(extra) + "\n",
                               {"no queued or running job matches --name nosuch"}));
  Touch(gate);
  ASSERT_EQ(d.Gpulane({"wait", run}).exit_code, 0);
}

// status names a `gpulane run` r<pid>. A new user's trial: `show r1234` and `cancel r1234` said "a
// gpulane run (process 1234) ... kill 1234" for any pid, a live process that is no gpulane run
// included. Only a live run lease of that very process makes it a run (show: what status knows of
// it; the other job commands: how to stop it, exit 2); otherwise "no running gpulane run", exit 8.
TEST(DaemonExitCodes, ARunsIdIsARunOnlyWhileThatProcessHoldsARunLease) {
  TestDaemon d;
  Child other = StartProcess({"/bin/sleep", "60"});  // a live process, no gpulane run
  const std::string not_run = fmt::format("r{}", other.pid()), gone = fmt::format("r{}", UnusedPid());
  for (const std::string& id : {not_run, gone})
    for (const char* command : {"show", "cancel", "wait", "logs", "hold"}) {
      RunResult r = d.Gpulane({command, id});
      EXPECT_TRUE(IsGpulaneError(r, 8, "no running gpulane run " + id)) << command << " " << id;
      EXPECT_FALSE(Contains(r.err, "kill")) << r.err;
    }
  const fs::path gate = d.work() / "gate";
  Child run({GpulaneBinary(), "run", "-g", "1", "--", "/bin/sh", "-c", "while [ ! -e \"$0\" ]; do sleep 0.05; done",
             gate.string()},
            d.env());
  const std::string id = fmt::format("r{}", run.pid());
  ASSERT_TRUE(Eventually([&] { return Contains(d.Gpulane({"status"}).out, "job " + id); })) << run.ErrSoFar();
  RunResult show = d.Gpulane({"show", id});
  EXPECT_EQ(show.exit_code, 0) << show.err;
  EXPECT_TRUE(Contains(show.out, fmt::format("job {}  {}  running", id, UserName(getuid())))) << show.out;
  EXPECT_TRUE(Contains(show.out, "  name      sh\n")) << show.out;
  RunResult as_json = d.Gpulane({"show", "--json", id});
  ASSERT_EQ(as_json.exit_code, 0) << as_json.err;
  const json shown = json::parse(as_json.out);
  EXPECT_EQ(shown["id_text"], id);
  EXPECT_EQ(shown["kind"], "run");
  EXPECT_EQ(shown["gpus"].size(), 1u) << shown.dump();
  EXPECT_TRUE(IsGpulaneError(d.Gpulane({"cancel", id}), 2, fmt::format("or kill {}", run.pid())));
  Touch(gate);
  ASSERT_TRUE(run.Wait(30).has_value());
  EXPECT_TRUE(IsGpulaneError(d.Gpulane({"show", id}), 8, "no running gpulane run " + id)) << "it has ended";
}

// `--user NAME` of a user the machine does not know is a bad value (2), one answer for queue and
// report (a new user's trial: queue said it with 8, "no such job"; report printed "(no finished job
// in this period)" and exited 0).
TEST(DaemonExitCodes, AnUnknownUserIsABadValueForQueueAndReportAlike) {
  TestDaemon d;
  for (const char* command : {"queue", "report"}) {
    RunResult r = d.Gpulane({command, "--user", "nosuchuser-gl"});
    EXPECT_TRUE(IsGpulaneError(r, 2, "--user nosuchuser-gl: no such user on this machine")) << command;
  }
  EXPECT_EQ(d.Gpulane({"queue", "--user", UserName(getuid())}).exit_code, 0);
}

// Another user's job: 9 for the commands that change it or read its output; show and wait are
// everyone's. Needs root and setpriv (two test users); skipped otherwise.
TEST(DaemonExitCodes, AnotherUsersJobIs9) {
  TestUser a, b;
  if (auto why = TwoTestUsers(&a, &b)) GTEST_SKIP() << *why;
  TestDaemon d({.system_mode = true});
  auto submit_as = [&](const TestUser& user, std::vector<std::string> args) -> std::int64_t {
    args.insert(args.begin(), "submit");
    RunResult r = d.GpulaneAs(user, args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? std::stoll(r.out) : -1;
  };
  const std::int64_t held = submit_as(a, {"--hold", "--", "true"});
  const std::int64_t done = submit_as(a, {"--", "echo", "a's output"});
  ASSERT_EQ(d.Gpulane({"wait", Id(done)}).exit_code, 0);
  RunResult array = d.GpulaneAs(a, {"submit", "--hold", "--array", "0-1", "--", "true"});
  ASSERT_EQ(array.exit_code, 0) << array.err;
  const std::string arr = Lines(array.out).at(0);
  const std::vector<Row> table = {
      {{"cancel", Id(held)}, 9, fmt::format("job {} belongs to {}", held, a.name)},
      {{"hold", Id(held)}, 9, fmt::format("job {} belongs to {}", held, a.name)},
      {{"release", Id(held)}, 9, fmt::format("job {} belongs to {}", held, a.name)},
      {{"logs", Id(done)}, 9, fmt::format("job {} belongs to {}", done, a.name)},
      {{"cancel", arr}, 9, fmt::format("array {} belongs to {}", arr, a.name)},
      {{"release", arr + "_1"}, 9, fmt::format("job {}_1 belongs to {}", arr, a.name)},
      {{"cancel", "--user", a.name}, 9, fmt::format("--user {0}: only {0} or an admin", a.name)},
      {{"cancel", "--user", a.name, "--name", "x"}, 9, fmt::format("--user {}", a.name)},
      // Unknown and finished stay 8 and 12 for everyone.
      {{"cancel", "999"}, 8, "no job 999"},
      {{"hold", Id(done)}, 9, fmt::format("job {} belongs to {}", done, a.name)},
  };
  for (const Row& row : table) EXPECT_TRUE(IsGpulaneError(d.GpulaneAs(b, row.args), row.code, row.part)) << Describe(row.args);
  EXPECT_EQ(d.GpulaneAs(b, {"show", Id(held)}).exit_code, 0) << "anyone may look at a job";
  EXPECT_EQ(d.GpulaneAs(b, {"wait", Id(done)}).exit_code, 0) << "and wait for it";
  // B's own job next to A's: B's is cancelled, A's refused with a warning, exit 9.
  const std::int64_t mine = submit_as(b, {"--hold", "--", "true"});
  EXPECT_TRUE(IsPartialFailure(d.GpulaneAs(b, {"cancel", Id(mine), Id(held)}), 9, "cancelled job " + Id(mine) + "\n",
                               {fmt::format("job {} belongs to {}", held, a.name)}));
  EXPECT_EQ(d.State(held), "held");
  EXPECT_EQ(d.State(std::stoll(arr)), "held");
  EXPECT_EQ(d.State(mine), "cancelled");
}

}  // namespace
}  // namespace gpulane::test
