// Array tasks named in Slurm's notation through the real binary: 12_3 is the task with array index 3
// of array 12, 12 the whole array, 12_[1-3,7] several tasks, for cancel, hold, release, show, wait,
// logs and --after; the queue, show and wait print tasks as 12_3; a task's own number still works.
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

std::string Id(std::int64_t id) { return std::to_string(id); }

// `gpulane submit --array INDICES ARGS...`: the array's id (its first task's job id), or -1 and a failure.
std::int64_t SubmitArray(const TestDaemon& d, const std::string& indices, std::vector<std::string> args) {
  args.insert(args.begin(), {"submit", "--array", indices});
  RunResult r = d.Gpulane(args);
  if (r.exit_code != 0) {
    ADD_FAILURE() << "gpulane submit --array " << indices << " failed: exit " << r.exit_code << ": " << r.err;
    return -1;
  }
  return std::stoll(r.out);
}

// The queue table's line whose ID column is `id` ("" when none).
std::string QueueLine(const std::string& table, const std::string& id) {
  for (const auto& line : Lines(table)) {
    std::size_t start = line.find_first_not_of(' ');
    if (start != std::string::npos && line.compare(start, id.size() + 1, id + " ") == 0) return line;
  }
  return "";
}

TEST(DaemonArrayIds, QueueShowAndJsonNameTasksInTheNotation) {
  TestDaemon d;
  const std::int64_t a = SubmitArray(d, "0-3", {"--hold", "--name", "eval", "--", "true"});
  ASSERT_GT(a, 0);
  RunResult q = d.Gpulane({"queue"});
  ASSERT_EQ(q.exit_code, 0) << q.err;
  for (int i = 0; i < 4; ++i) {
    const std::string line = QueueLine(q.out, fmt::format("{}_{}", a, i));
    EXPECT_TRUE(Contains(line, " eval ") && Contains(line, " held ")) << q.out;
    EXPECT_FALSE(Contains(line, "[")) << "the name column holds the name alone: " << line;
  }
  EXPECT_EQ(QueueLine(q.out, Id(a)), "") << "the array's id is not one task's: " << q.out;
  // JSON: the numeric id stays; id_text is the notation.
  json jobs = d.Queue();
  ASSERT_EQ(jobs.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(jobs[i]["id"], a + i);
    EXPECT_EQ(jobs[i]["id_text"], fmt::format("{}_{}", a, i));
  }
  // show 12_3: that task.
  RunResult show = d.Gpulane({"show", fmt::format("{}_2", a)});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_EQ(Lines(show.out).at(0), fmt::format("job {}_2  {}  held", a, UserName(getuid())));
  EXPECT_TRUE(Contains(show.out, fmt::format("  array     {} (task 2, job id {})\n", a, a + 2))) << show.out;
  json task = json::parse(d.Gpulane({"show", "--json", fmt::format("{}_2", a)}).out);
  EXPECT_EQ(task["id"], a + 2);
  EXPECT_EQ(task["id_text"], fmt::format("{}_2", a));
  EXPECT_EQ(task["array_index"], 2);
  // A task's own number still names it (and it is shown in the notation).
  json by_number = json::parse(d.Gpulane({"show", "--json", Id(a + 2)}).out);
  EXPECT_EQ(by_number["id_text"], fmt::format("{}_2", a));
  // show 12: every task, as scontrol show job does; --json: a list.
  RunResult all = d.Gpulane({"show", Id(a)});
  ASSERT_EQ(all.exit_code, 0) << all.err;
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(Contains(all.out, fmt::format("job {}_{}  ", a, i))) << all.out;
  EXPECT_TRUE(Contains(all.out, "\n\njob ")) << "a blank line between tasks: " << all.out;
  json list = json::parse(d.Gpulane({"show", "--json", Id(a)}).out);
  ASSERT_TRUE(list.is_array()) << list.dump();
  EXPECT_EQ(list.size(), 4u);
  json some = json::parse(d.Gpulane({"show", "--json", fmt::format("{}_[1,3]", a)}).out);
  ASSERT_TRUE(some.is_array() && some.size() == 2u) << some.dump();
  EXPECT_EQ(some[1]["id_text"], fmt::format("{}_3", a));
}

TEST(DaemonArrayIds, TasksAreHeldReleasedCancelledAndWaitedForByTheirIds) {
  TestDaemon d;
  const std::int64_t a = SubmitArray(d, "0-3", {"--hold", "--", "sh", "-c", "echo task $GPULANE_ARRAY_INDEX"});
  ASSERT_GT(a, 0);
  const std::string t0 = fmt::format("{}_0", a), t1 = fmt::format("{}_1", a);
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
  const std::int64_t single = d.Submit({"--", "true"});
  EXPECT_TRUE(IsGpulaneError(d.Gpulane({"wait", fmt::format("{}_0", single)}), 8,
                             fmt::format("no job {}_0: job {} is not an array", single, single)));
}

TEST(DaemonArrayIds, LogsOfAWholeArrayAsksForOneTask) {
  TestDaemon d;
  const std::int64_t a = SubmitArray(d, "0-2", {"--", "sh", "-c", "echo task $GPULANE_ARRAY_INDEX"});
  ASSERT_GT(a, 0);
  ASSERT_EQ(d.Gpulane({"wait", Id(a)}).exit_code, 0);
  EXPECT_TRUE(IsGpulaneError(d.Gpulane({"logs", Id(a)}), 2,
                             fmt::format("job {0} is an array of 3 tasks ({0}_0 to {0}_2) and logs prints one job's "
                                         "output: name a task, e.g. gpulane logs {0}_0",
                                         a)));
  EXPECT_TRUE(IsGpulaneError(d.Gpulane({"logs", "-f", Id(a)}), 2, fmt::format("gpulane logs {}_0", a)));
  EXPECT_TRUE(IsGpulaneError(d.Gpulane({"logs", fmt::format("{}_[0-1]", a)}), 2, "one job"));
  EXPECT_EQ(d.Gpulane({"logs", fmt::format("{}_2", a)}).out, "task 2\n");
  EXPECT_EQ(d.Gpulane({"logs", Id(a + 2)}).out, "task 2\n") << "a task's own number still works";
}

// --after 12_0 waits for that task alone, although its job id is the array's id; --after 12 for
// every task of the array.
TEST(DaemonArrayIds, AfterATaskWaitsForThatTaskAloneAfterTheArrayForAllItsTasks) {
  TestDaemon d;
  const std::int64_t a = SubmitArray(d, "0-2", {"--hold", "--", "true"});
  ASSERT_GT(a, 0);
  const std::int64_t after_task = d.Submit({"--after", fmt::format("{}_0", a), "--", "true"});
  const std::int64_t after_array = d.Submit({"--after", Id(a), "--", "true"});
  const std::int64_t after_any_task = d.Submit({"--after-any", fmt::format("{}_1", a), "--", "true"});
  ASSERT_TRUE(d.WaitForState(after_task, "pending"));
  EXPECT_TRUE(Contains(d.Show(after_task)["reason"], fmt::format("waiting for job {}_0", a))) << d.Show(after_task).dump();
  ASSERT_EQ(d.Gpulane({"release", fmt::format("{}_0", a)}).exit_code, 0);
  RunResult wait = d.Gpulane({"wait", Id(after_task)});
  EXPECT_EQ(wait.exit_code, 0) << wait.out << wait.err;
  // Tasks 1 and 2 are still held: the dependency on the whole array still waits.
  EXPECT_EQ(d.State(a + 1), "held");
  EXPECT_EQ(d.State(after_array), "pending");
  EXPECT_EQ(d.State(after_any_task), "pending");
  EXPECT_TRUE(Contains(d.Show(after_array)["reason"], fmt::format("waiting for job {}", a)));
  // Task 1 fails to run (cancelled): after-any starts; the whole array did not succeed.
  ASSERT_EQ(d.Gpulane({"cancel", fmt::format("{}_[1-2]", a)}).exit_code, 0);
  EXPECT_EQ(d.Gpulane({"wait", Id(after_any_task)}).exit_code, 0);
  RunResult doomed = d.Gpulane({"wait", Id(after_array)});
  EXPECT_EQ(doomed.exit_code, 11) << doomed.out << doomed.err;
  // Dependencies are stored as written: the spec holds the task in the notation.
  EXPECT_EQ(d.Show(after_task)["spec"]["after_ok"], json::array({fmt::format("{}_0", a)}));
  EXPECT_EQ(d.Show(after_array)["spec"]["after_ok"], json::array({a}));
  // Unknown tasks and malformed ids are refused at submission.
  EXPECT_TRUE(IsGpulaneError(d.Gpulane({"submit", "--after", fmt::format("{}_9", a), "--", "true"}), 8,
                             fmt::format("--after {0}_9: no job {0}_9", a)));
  EXPECT_TRUE(IsGpulaneError(d.Gpulane({"submit", "--after-any", "12_", "--", "true"}), 2, "--after-any: job id '12_'"));
  EXPECT_TRUE(IsGpulaneError(d.Gpulane({"submit", "--after", fmt::format("{},{}_[0,x]", a, a), "--", "true"}), 2,
                             fmt::format("job id '{}_[0,x]'", a)));
  const std::int64_t both = d.Submit({"--after", fmt::format("{0}_0,{0}_[0]", a), "--", "true"});
  EXPECT_EQ(d.Gpulane({"wait", Id(both)}).exit_code, 0) << "a list with brackets, commas inside them";
}

TEST(DaemonArrayIds, ArrayIndicesMustBeDistinct) {
  TestDaemon d;
  EXPECT_TRUE(IsGpulaneError(d.Gpulane({"submit", "--array", "1,1", "--", "true"}), 2, "--array '1,1'"));
  EXPECT_TRUE(IsGpulaneError(d.Gpulane({"submit", "--array", "0-3,2", "--", "true"}), 2, "each once"));
  json twice = d.SubmitRequest({"true"});
  twice["array"] = {1, 1};
  json reply = d.Call(twice);
  EXPECT_EQ(reply.value("code", ""), "invalid_argument") << reply.dump();
  RunResult ok = d.Gpulane({"submit", "--hold", "--array", "1-5:2", "--", "true"});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  const std::int64_t a = std::stoll(ok.out);
  EXPECT_EQ(ok.err, fmt::format("gpulane: array job {0}: 3 tasks, {0}_[1,3,5] (job ids {0}-{1})\n", a, a + 2));
  EXPECT_EQ(d.Show(a + 1)["id_text"], fmt::format("{}_3", a));
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
  // Over the socket too (the daemon reads ids with the same parser).
  json reply = d.Call({{"op", "cancel"}, {"ids", {"12_x"}}});
  EXPECT_EQ(reply.value("code", ""), "invalid_argument") << reply.dump();
  EXPECT_TRUE(Contains(reply.value("error", ""), "job id '12_x'")) << reply.dump();
  reply = d.Call({{"op", "show"}, {"id", -4}});
  EXPECT_EQ(reply.value("code", ""), "invalid_argument") << reply.dump();
}

TEST(DaemonArrayIds, ProtocolTakesIdsAsNumbersOrStrings) {
  TestDaemon d;
  RunResult submit = d.Gpulane({"submit", "--hold", "--array", "0-2", "--", "true"});
  ASSERT_EQ(submit.exit_code, 0) << submit.err;
  const std::int64_t a = std::stoll(submit.out);
  json shown = d.Call({{"op", "show"}, {"id", fmt::format("{}_1", a)}});
  ASSERT_TRUE(shown.value("ok", false)) << shown.dump();
  EXPECT_EQ(shown["job"]["id"], a + 1);
  EXPECT_EQ(shown["jobs"].size(), 1u);
  json array = d.Call({{"op", "show"}, {"id", a}});
  EXPECT_FALSE(array.contains("job")) << "an array's id names all its tasks: " << array.dump();
  EXPECT_EQ(array["jobs"].size(), 3u);
  json released = d.Call({{"op", "release"}, {"ids", {fmt::format("{}_0", a), a + 2}}});
  ASSERT_TRUE(released.value("ok", false)) << released.dump();
  EXPECT_EQ(released["changed"], json::array({a, a + 2}));
  EXPECT_EQ(released["changed_text"], json::array({fmt::format("{}_0", a), fmt::format("{}_2", a)}));
  // Some ids fail: the others are acted on, "failed" says which and why.
  json cancelled = d.Call({{"op", "cancel"}, {"ids", {"999", fmt::format("{}_1", a)}}});
  ASSERT_TRUE(cancelled.value("ok", false)) << cancelled.dump();
  EXPECT_EQ(cancelled["cancelled_text"], json::array({fmt::format("{}_1", a)}));
  ASSERT_EQ(cancelled["failed"].size(), 1u) << cancelled.dump();
  EXPECT_EQ(cancelled["failed"][0]["id"], "999");
  EXPECT_EQ(cancelled["failed"][0]["code"], "not_found");
  EXPECT_EQ(cancelled["failed"][0]["error"], "no job 999");
  // A spec's dependencies: numbers, or strings in the notation, stored as numbers and "12_3".
  json dependent = d.SubmitRequest({"true"}, /*hold=*/true);
  dependent["spec"]["after_ok"] = {Id(a), fmt::format("{}_[0,2]", a)};
  dependent["spec"]["after_any"] = {a + 1};
  json submitted = d.Call(dependent);
  ASSERT_TRUE(submitted.value("ok", false)) << submitted.dump();
  json spec = d.Show(submitted["ids"][0].get<std::int64_t>())["spec"];
  EXPECT_EQ(spec["after_ok"], json({a, fmt::format("{}_0", a), fmt::format("{}_2", a)}));
  EXPECT_EQ(spec["after_any"], json({a + 1}));
  dependent["spec"]["after_ok"] = {fmt::format("{}_9", a)};
  EXPECT_EQ(d.Call(dependent).value("code", ""), "not_found");
  dependent["spec"]["after_ok"] = {"9_"};
  EXPECT_EQ(d.Call(dependent).value("code", ""), "invalid_argument");
  // Nothing done: an error reply with the first failure's code, and every failure.
  json none = d.Call({{"op", "hold"}, {"ids", {"998", fmt::format("{}_1", a)}}});
  EXPECT_FALSE(none.value("ok", true));
  EXPECT_EQ(none.value("code", ""), "not_found");
  EXPECT_EQ(none["failed"].size(), 2u) << none.dump();
  EXPECT_EQ(none["failed"][1]["code"], "wrong_state");
}

}  // namespace
}  // namespace gpulane::test
