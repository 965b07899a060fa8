// Array tasks named in Slurm's notation through the real binary: 12_3 is the task with array index 3
// of array 12, 12 the whole array, 12_[1-3,7] several tasks, for cancel, hold, release, show, wait,
// logs and --after; the queue, show and wait print tasks as 12_3; a task's own number still works.
// What the daemon decides with such ids (--after a task or a whole array, ids as numbers or strings
// over the protocol, indices given twice, logs of a whole array) is tested in-process:
// tests/unit/daemon_inproc_jobs_test.cc and daemon_inproc_commands_test.cc.
#include <gtest/gtest.h>

#include <filesystem>
#include <fmt/format.h>
#include <string>

#include <unistd.h>

#include "support/daemon_fixture.h"
#include "support/scenarios.h"
#include "support/text.h"

namespace gpulane::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;


// The queue table's line whose ID column is `id` ("" when none).
std::string QueueLine(const std::string& table, const std::string& id) {
  for (const auto& line : Lines(table)) {
    std::size_t start = line.find_first_not_of(' ');
    if (start != std::string::npos && line.compare(start, id.size() + 1, id + " ") == 0) return line;
  }
  return "";
}

TEST(DaemonArrayIds, TasksAreHeldReleasedCancelledAndWaitedForByTheirIds) {
  TestDaemon d;
  const std::int64_t a = SubmitArray(d, "0-3", {"--hold", "--", "sh", "-c", "echo task $GPULANE_ARRAY_INDEX"});
  ASSERT_GT(a, 0);
  const std::string t0 = fmt::format("{}_0", a), t1 = fmt::format("{}_1", a);
  // queue and show print tasks in the notation (which tasks an id names is the daemon's:
  // DaemonInProcCommands.QueueShowAndJsonNameTasksInTheNotation).
  EXPECT_TRUE(Contains(QueueLine(d.Gpulane({"queue"}).out, fmt::format("{}_2", a)), " held "));
  RunResult show = d.Gpulane({"show", fmt::format("{}_2", a)});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_EQ(Lines(show.out).at(0), fmt::format("job {}_2  {}  held", a, UserName(getuid())));
  EXPECT_TRUE(Contains(show.out, fmt::format("  array     {} (task 2, job id {})\n", a, a + 2))) << show.out;
  RunResult all = d.Gpulane({"show", Id(a)});  // every task, as scontrol show job does
  ASSERT_EQ(all.exit_code, 0) << all.err;
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(Contains(all.out, fmt::format("job {}_{}  ", a, i))) << all.out;
  EXPECT_TRUE(Contains(all.out, "\n\njob ")) << "a blank line between tasks: " << all.out;
  json list = json::parse(d.Gpulane({"show", "--json", Id(a)}).out);
  ASSERT_TRUE(list.is_array()) << list.dump();
  EXPECT_EQ(list.size(), 4u);
  json some = json::parse(d.Gpulane({"show", "--json", fmt::format("{}_[1,3]", a)}).out);
  ASSERT_TRUE(some.is_array() && some.size() == 2u) << some.dump();
  EXPECT_EQ(some[1]["id_text"], fmt::format("{}_3", a));
  RunResult release = d.Gpulane({"release", t1});
  EXPECT_EQ(release.exit_code, 0) << release.err;
  RunResult wait = d.Gpulane({"wait", t1});
  EXPECT_EQ(wait.exit_code, 0) << wait.err;
  EXPECT_EQ(wait.out, t1 + " completed 0\n");
  EXPECT_EQ(d.State(a), "held") << "task 0 (job " << a << ") was not released";
  EXPECT_EQ(d.State(a + 2), "held");
  RunResult logs = d.Gpulane({"logs", t1});
  EXPECT_EQ(logs.exit_code, 0) << logs.err;
  EXPECT_EQ(logs.out, "task 1\n");
  EXPECT_EQ(d.Gpulane({"logs", Id(a + 1)}).out, "task 1\n") << "a task's own number still works";
  // logs prints one job's output: the array's id (the daemon refuses it: DaemonInProcCommands) and
  // a range (refused before asking) are usage errors naming a task to give.
  EXPECT_TRUE(IsGpulaneError(d.Gpulane({"logs", "-f", Id(a)}), 2, fmt::format("gpulane logs {}_0", a)));
  EXPECT_TRUE(IsGpulaneError(d.Gpulane({"logs", fmt::format("{}_[0-1]", a)}), 2, "one job"));
  // Several tasks in brackets: cancel prints them in the notation, one line (a new user's finding:
  // a release of 3,000 tasks printed 3,000 lines).
  RunResult cancel = d.Gpulane({"cancel", fmt::format("{}_[2-3]", a)});
  EXPECT_EQ(cancel.exit_code, 0) << cancel.err;
  EXPECT_EQ(cancel.out, fmt::format("cancelled job {}_[2-3] (2 tasks)\n", a));
  EXPECT_EQ(d.State(a + 3), "cancelled");
  // The array's id: only the tasks the command applies to (task 0 is the one still held).
  RunResult release_all = d.Gpulane({"release", Id(a)});
  EXPECT_EQ(release_all.exit_code, 0) << release_all.err;
  EXPECT_EQ(release_all.err, "");
  RunResult wait_all = d.Gpulane({"wait", Id(a)});
  EXPECT_EQ(wait_all.out, fmt::format("{0}_0 completed 0\n{0}_1 completed 0\n{0}_2 cancelled\n{0}_3 cancelled\n", a));
  EXPECT_EQ(wait_all.exit_code, 11) << "the first task that did not succeed did not run";
  EXPECT_EQ(d.Gpulane({"logs", t0}).out, "task 0\n");
  // A whole array that has ended is a command's wrong state; a task that is not there is unknown.
  EXPECT_TRUE(IsGpulaneError(d.Gpulane({"cancel", Id(a)}), 12, fmt::format("array {} has ended", a)));
  EXPECT_TRUE(IsGpulaneError(d.Gpulane({"hold", Id(a)}), 12, fmt::format("array {} has ended", a)));
  EXPECT_TRUE(IsGpulaneError(d.Gpulane({"cancel", fmt::format("{}_7", a)}), 8,
                             fmt::format("no job {}_7: array {} has tasks 0-3", a, a)));
  EXPECT_TRUE(IsGpulaneError(d.Gpulane({"show", fmt::format("{}_7", a)}), 8, fmt::format("no job {}_7", a)));
  // --after with a list whose brackets hold commas: task 0 has completed, so it runs.
  const std::int64_t both = d.Submit({"--after", fmt::format("{0}_0,{0}_[0]", a), "--", "true"});
  EXPECT_EQ(d.Gpulane({"wait", Id(both)}).exit_code, 0) << "a list with brackets, commas inside them";
  const std::int64_t single = d.Submit({"--", "true"});
  EXPECT_TRUE(IsGpulaneError(d.Gpulane({"wait", fmt::format("{}_0", single)}), 8,
                             fmt::format("no job {}_0: job {} is not an array", single, single)));
}

// Every command refuses a malformed id the same way: exit 2, one line naming the id and the forms.
TEST(DaemonArrayIds, MalformedIdsAreRefusedByEveryCommand) {
  TestDaemon d;
  for (const char* bad : {"12_", "_3", "12_x", "0", "99999999999999999999", "12_[3-1]", "12,,13"}) {
    for (const char* command : {"cancel", "hold", "release", "show", "wait", "logs"}) {
      RunResult r = d.Gpulane({command, bad});
      const std::string named = std::string(bad) == "12,,13" ? "job id ''" : std::string("job id '") + bad + "'";
      EXPECT_TRUE(IsGpulaneError(r, 2, named)) << command << " " << bad;
      EXPECT_TRUE(Contains(r.err, "12_3")) << "names the forms expected: " << r.err;
    }
  }
  // --after and --after-any read the same notation.
  EXPECT_TRUE(IsGpulaneError(d.Gpulane({"submit", "--after-any", "12_", "--", "true"}), 2, "--after-any: job id '12_'"));
  EXPECT_TRUE(IsGpulaneError(d.Gpulane({"submit", "--after", "12,12_[0,x]", "--", "true"}), 2, "job id '12_[0,x]'"));
  // Over the socket too (the daemon reads ids with the same parser).
  json reply = d.Call({{"op", "cancel"}, {"ids", {"12_x"}}});
  EXPECT_EQ(reply.value("code", ""), "invalid_argument") << reply.dump();
  EXPECT_TRUE(Contains(reply.value("error", ""), "job id '12_x'")) << reply.dump();
  reply = d.Call({{"op", "show"}, {"id", -4}});
  EXPECT_EQ(reply.value("code", ""), "invalid_argument") << reply.dump();
}

}  // namespace
}  // namespace gpulane::test
