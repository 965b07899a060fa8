// What a waiting job says it waits for, in-process (tests/support/inproc_daemon.h; issue 24, part
// 5, a new user's findings): a dependency named as such when other jobs wait for GPUs, every job of
// a long line with its WHY, a failed dependency worded plainly. The reasons and the queue's table
// are the daemon's; how `gpulane show` prints a reason and a waiting job stays through the binary
// (DaemonCancel.JobWaitingForGpusNeverRuns).
#include <gtest/gtest.h>

#include <iterator>
#include <sstream>

#include "support/inproc_daemon.h"
#include "support/text.h"

namespace gpulane::test {
namespace {

using nlohmann::json;
using Ids = std::vector<std::int64_t>;

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

std::vector<std::string> Words(const std::string& line) {
  std::istringstream words(line);
  return {std::istream_iterator<std::string>(words), std::istream_iterator<std::string>()};
}

// As `gpulane submit -- true` sends it: the name is the command's (the CLI fills it in).
const Submission kTrue{.name = "true"};

class DaemonInProcReasons : public InProcDaemonTest {
 protected:
  std::string Table() { return Call(Root(), {{"op", "queue"}, {"format", "table"}}).value("table", ""); }
  // One GPU, one supervisor at a time waiting for it (daemon.max_waiting = 1), a job running on it.
  std::int64_t OneGpuBusy() {
    gpu_count_ = 1;
    config_.max_waiting_supervisors = 1;
    StartDaemon();
    const std::int64_t blocker = SubmitOne(kTrue);
    Running(blocker);
    Turn();
    EXPECT_EQ(State(blocker), "running");
    return blocker;
  }
};

// Was CliEdges.AFailedDependencyIsWordedPlainly ("job 66 it depends on ended failed" was garbled).
TEST_F(DaemonInProcReasons, AFailedDependencyIsWordedPlainly) {
  StartDaemon();
  const std::int64_t failing = SubmitOne();
  const std::int64_t next = SubmitOne({.after_ok = {failing}});
  RunToEnd(failing, 1);
  json shown = ShowJob(next);
  EXPECT_EQ(shown["state"], "cancelled");
  EXPECT_EQ(shown.value("reason", ""),
            "its dependency job " + std::to_string(failing) + " failed (--after needs it to complete)");
  EXPECT_EQ(Launched(), Ids{failing});
}

// Was CliEdges.ADependencyWaitIsNamedWhenOtherJobsWaitForGpus: a job waiting for `--after N` showed
// fair-share arithmetic whenever the supervisors waiting for GPUs filled their cap; and a job
// waiting for GPUs was labelled `launching` in the table.
TEST_F(DaemonInProcReasons, ADependencyWaitIsNamedWhenOtherJobsWaitForGpus) {
  const std::int64_t blocker = OneGpuBusy();
  const std::int64_t waiting = SubmitOne(kTrue);  // its supervisor waits for the GPU: the cap (1) is full
  EXPECT_EQ(State(waiting), "launching");
  Waiting(waiting, "in line for GPU0 (#1)");
  Turn();
  const std::int64_t after = SubmitOne({.name = "true", .after_ok = {blocker}});
  Turn();
  const std::string reason = ShowJob(after).value("reason", "");
  EXPECT_EQ(reason, "waiting for job " + std::to_string(blocker));
  EXPECT_FALSE(Contains(reason, "fair share")) << reason;
  // The job whose supervisor waits for the GPU is `waiting` in the table (JSON keeps `launching`).
  const std::string table = Table();
  std::string state;  // the STATE column (ID USER NAME GPUS STATE AGE ...) of its row
  for (const auto& line : Lines(table)) {
    const auto w = Words(line);
    if (w.size() > 4 && w[0] == std::to_string(waiting)) state = w[4];
  }
  EXPECT_EQ(state, "waiting") << table;
  EXPECT_FALSE(Contains(table, "launching")) << table;
  // Once the blocker is done, the waiting job runs and the dependant is launched after it.
  Done(blocker, 0);
  Running(waiting);
  Turn();
  EXPECT_EQ(Launched(), (Ids{blocker, waiting, after}));
}

// Was CliEdges.EveryWaitingJobOfALongLineSaysWhyItWaits: in a long line (an array of 100 tasks on
// one busy GPU) every pending job's WHY is filled; those behind the head the launch plan looks at
// (4 x max_waiting + 64 = 68 jobs, sched::LaunchLookahead) say how many jobs are ahead at least.
TEST_F(DaemonInProcReasons, EveryWaitingJobOfALongLineSaysWhyItWaits) {
  OneGpuBusy();
  std::vector<int> indices(100);
  for (int i = 0; i < 100; ++i) indices[static_cast<std::size_t>(i)] = i;
  const Ids tasks = Submit(Root(), {.name = "true", .array = indices});
  ASSERT_EQ(tasks.size(), 100u);
  EXPECT_EQ(Call(Root(), {{"op", "show"}, {"id", std::to_string(tasks[0]) + "_0"}})["job"]["state"], "launching");  // the plan that launched it gave the others their reasons
  Waiting(tasks[0], "in line for GPU0 (#1)");
  Turn();
  const std::string table = Table();
  int waiting = 0, behind = 0;
  for (const std::string& line : Lines(table)) {
    const auto w = Words(line);
    if (w.size() < 5 || (w[4] != "pending" && w[4] != "waiting")) continue;
    ++waiting;
    const std::string why = line.size() > 71 ? line.substr(71) : "";  // the WHERE / WHY column
    EXPECT_NE(why.find_first_not_of(' '), std::string::npos) << "a waiting job with a blank WHY: " << line;
    if (Contains(why, "behind at least 68 jobs in line")) ++behind;
  }
  EXPECT_EQ(waiting, 100) << table;
  EXPECT_EQ(behind, 100 - 1 - 68) << "all but the one waiting for the GPU and the 68 the plan looked at:\n" << table;
}

// A new user's finding: the jobs the cap left in the daemon's queue showed only their priority
// arithmetic, and a job just handed to its supervisor only "waiting for GPUs". Each says what it
// waits for: its place among those that join the line next, and the cap's setting.
TEST_F(DaemonInProcReasons, AJobLeftOutByTheCapSaysItWaitsForAPlaceInTheLine) {
  OneGpuBusy();
  const Ids tasks = Submit(Root(), {.name = "true", .array = {0, 1, 2}});
  ASSERT_EQ(tasks.size(), 3u);
  const auto reason = [&](int task) {  // the array's id is its first task's
    return Call(Root(), {{"op", "show"}, {"id", std::to_string(tasks[0]) + "_" + std::to_string(task)}})["job"].value("reason", "");
  };
  EXPECT_EQ(reason(0), "joining the line for GPUs (its supervisor is starting)");
  for (int i : {1, 2}) {
    const std::string why = reason(i);
    EXPECT_TRUE(Contains(why, (i == 1 ? "1st" : "2nd") + std::string(" to join the line for GPUs when a place frees "
                                                                       "(daemon.max_waiting: 1 jobs wait there at once); priority ")))
        << why;
  }
  EXPECT_TRUE(Contains(reason(2), "behind root's job " + std::to_string(tasks[0]) + "_1")) << reason(2);
}

}  // namespace
}  // namespace gpulane::test
