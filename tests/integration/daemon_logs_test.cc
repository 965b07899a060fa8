// Job logs never collide: a job's default log is a file of its own even when job ids start again
// (another daemon, a new state folder) and an older gpulane-<id>.out is in the way; `gpulane logs N`
// shows job N's output and nothing else; a FIFO (or anything but a regular file) is never opened.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fmt/format.h>
#include <fstream>

#include "support/daemon_fixture.h"
#include "support/text.h"

namespace gpulane::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

TEST(DaemonLogs, AnOlderLogWithTheSameNameIsLeftAloneAndLogsShowsOnlyThisJob) {
  TestDaemon d;
  const fs::path old_log = d.work() / "gpulane-1.out";
  const std::string old_content = "output of an older job 1 (another daemon)\n";
  std::ofstream(old_log) << old_content;
  // The next name is a dangling symlink someone planted: skipped too, never followed.
  const fs::path planted = d.work() / "gpulane-1.1.out", target = d.work() / "planted-target";
  fs::create_symlink(target, planted);
  const std::int64_t id = d.Submit({"--", "sh", "-c", "echo this is job 1; echo its stderr >&2"});
  ASSERT_EQ(id, 1) << "the test needs the id that collides";
  RunResult wait = d.Gpulane({"wait", "1"});
  EXPECT_EQ(wait.exit_code, 0) << wait.out << wait.err;
  const fs::path used = d.work() / "gpulane-1.2.out";
  EXPECT_EQ(ReadFile(used), "this is job 1\nits stderr\n");
  EXPECT_EQ(ReadFile(old_log), old_content) << "the older log is unchanged";
  EXPECT_FALSE(fs::exists(target)) << "the planted symlink was not followed";
  RunResult logs = d.Gpulane({"logs", "1"});
  EXPECT_EQ(logs.exit_code, 0) << logs.err;
  EXPECT_EQ(logs.out, "this is job 1\nits stderr\n");
  // show prints (and --json holds) the file actually used.
  RunResult show = d.Gpulane({"show", "1"});
  EXPECT_TRUE(Contains(show.out, "output    " + used.string() + "\n")) << show.out;
  EXPECT_EQ(d.Show(1)["logs"]["stdout_path"], used.string());
  // The next job's default name is free: it is used as it is.
  const std::int64_t next = d.Submit({"--", "echo", "job 2"});
  ASSERT_EQ(d.Gpulane({"wait", std::to_string(next)}).exit_code, 0);
  EXPECT_EQ(ReadFile(d.work() / fmt::format("gpulane-{}.out", next)), "job 2\n");
}

TEST(DaemonLogs, TwoDaemonsJobOneFromOneDirectoryEachShowItsOwn) {
  TestDaemon first, second;  // different state folders: both number their jobs from 1
  const fs::path shared = first.work() / "project";
  fs::create_directories(shared);
  RunResult a = first.Gpulane({"submit", "--", "echo", "from the first daemon"}, {}, 60, shared.string());
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(a.out, "1\n");
  ASSERT_EQ(first.Gpulane({"wait", "1"}).exit_code, 0);
  RunResult b = second.Gpulane({"submit", "--", "echo", "from the second daemon"}, {}, 60, shared.string());
  ASSERT_EQ(b.exit_code, 0) << b.err;
  ASSERT_EQ(b.out, "1\n");
  ASSERT_EQ(second.Gpulane({"wait", "1"}).exit_code, 0);
  EXPECT_EQ(first.Gpulane({"logs", "1"}).out, "from the first daemon\n");
  EXPECT_EQ(second.Gpulane({"logs", "1"}).out, "from the second daemon\n");
  EXPECT_EQ(ReadFile(shared / "gpulane-1.out"), "from the first daemon\n");
  EXPECT_EQ(ReadFile(shared / "gpulane-1.1.out"), "from the second daemon\n");
}

// -o PATH is the user's file: appended to (like >>), and `logs` shows this job's part of it.
TEST(DaemonLogs, AnExplicitOutputFileIsAppendedToAndLogsShowsOnlyThisJobsPart) {
  TestDaemon d;
  const fs::path log = d.work() / "train.log";
  const std::int64_t one = d.Submit({"-o", "train.log", "--", "echo", "first run"});
  ASSERT_EQ(d.Gpulane({"wait", std::to_string(one)}).exit_code, 0);
  const std::int64_t two = d.Submit({"-o", "train.log", "--", "echo", "second run"});
  ASSERT_EQ(d.Gpulane({"wait", std::to_string(two)}).exit_code, 0);
  EXPECT_EQ(ReadFile(log), "first run\nsecond run\n");
  EXPECT_EQ(d.Gpulane({"logs", std::to_string(one)}).out, "first run\n");
  EXPECT_EQ(d.Gpulane({"logs", std::to_string(two)}).out, "second run\n");
  RunResult show = d.Gpulane({"show", std::to_string(two)});
  EXPECT_TRUE(Contains(show.out, fmt::format("output    {} (from byte 10)\n", log.string()))) << show.out;
  // -o /dev/null throws the output away; logs has nothing to show, and says nothing.
  const std::int64_t discarded = d.Submit({"-o", "/dev/null", "--", "echo", "gone"});
  ASSERT_EQ(d.Gpulane({"wait", std::to_string(discarded)}).exit_code, 0);
  RunResult nothing = d.Gpulane({"logs", std::to_string(discarded)});
  EXPECT_EQ(nothing.exit_code, 0) << nothing.err;
  EXPECT_EQ(nothing.out, "");
}

TEST(DaemonLogs, AFifoAsTheLogFailsTheJobAtOnceNamingIt) {
  TestDaemon d;
  const fs::path fifo = d.work() / "pipe.out";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0644), 0);
  const fs::path mark = d.work() / "ran";
  const std::int64_t id = d.Submit({"-o", fifo.string(), "--", "touch", mark.string()});
  RunResult wait = d.Gpulane({"wait", std::to_string(id)}, {}, 30);
  EXPECT_EQ(wait.exit_code, 126) << "the job could not start: " << wait.out << wait.err;
  json shown = d.Show(id);
  EXPECT_EQ(shown["state"], "failed");
  EXPECT_TRUE(Contains(shown["reason"], fifo.string())) << shown.dump();
  EXPECT_TRUE(Contains(shown["reason"], "a FIFO, not a regular file")) << shown.dump();
  EXPECT_FALSE(fs::exists(mark));
  // With a reader on the FIFO (this test) opening it would succeed: still refused, still at once.
  const int reader = open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  ASSERT_GE(reader, 0);
  const std::int64_t again = d.Submit({"-e", fifo.string(), "--", "touch", mark.string()});
  EXPECT_EQ(d.Gpulane({"wait", std::to_string(again)}, {}, 30).exit_code, 126);
  EXPECT_TRUE(Contains(d.Show(again)["reason"], "error log")) << d.Show(again).dump();
  EXPECT_FALSE(fs::exists(mark));
  close(reader);
}

}  // namespace
}  // namespace gpulane::test
