// Job logs never collide: a job's default log is a file of its own even when job ids start again
// (another daemon, a new state folder) and an older gpulane-<id>.out is in the way; `gpulane logs N`
// shows job N's output and nothing else; a FIFO (or anything but a regular file) is never opened.
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <regex>
#include <sstream>

#include "support/daemon_fixture.h"
#include "support/scenarios.h"
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

namespace gpulane::test {
namespace {

namespace fs = std::filesystem;

// Field `n` (1-based) of /proc/<pid>/stat (after the command's parenthesised name).
long StatField(pid_t pid, int n) {
  std::string stat = ReadFile(fmt::format("/proc/{}/stat", pid));
  std::istringstream rest(stat.substr(stat.rfind(')') + 2));
  std::string word;
  for (int i = 3; i <= n && rest >> word; ++i) {
  }
  return std::stol(word);
}

// A job's log replaced, after it ran, by a terminal (its folder turned into a symlink to /dev/pts)
// or a FIFO: `gpulane logs` answers with one error line at once, the daemon does not take the
// terminal as its own (it has none: its own session), and it goes on serving.
TEST(DaemonLogs, ALogTurnedIntoATerminalOrAFifoIsRefusedAndTheDaemonKeepsNoTerminal) {
  TestDaemon d;
  const int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  ASSERT_GE(master, 0);
  ASSERT_EQ(grantpt(master), 0);
  ASSERT_EQ(unlockpt(master), 0);
  const fs::path pts = ptsname(master);
  const fs::path folder = d.work() / "pts";
  fs::create_directories(folder);
  const std::int64_t tty_job = d.Submit({"-o", (folder / pts.filename()).string(), "--", "echo", "to a file"});
  const std::int64_t fifo_job = d.Submit({"-o", (d.work() / "fifo.out").string(), "--", "echo", "to a file"});
  ASSERT_EQ(d.Gpulane({"wait", std::to_string(tty_job), std::to_string(fifo_job)}).exit_code, 0);
  ASSERT_EQ(d.Gpulane({"logs", std::to_string(tty_job)}).out, "to a file\n");
  fs::rename(folder, d.work() / "pts.was");
  fs::create_directory_symlink(pts.parent_path(), folder);
  fs::remove(d.work() / "fifo.out");
  ASSERT_EQ(mkfifo((d.work() / "fifo.out").c_str(), 0644), 0);

  EXPECT_TRUE(IsGpulaneError(d.Gpulane({"logs", std::to_string(tty_job)}, {}, 20), 7, "is not a regular file"));
  EXPECT_TRUE(IsGpulaneError(d.Gpulane({"logs", std::to_string(fifo_job)}, {}, 20), 7, "is not a regular file"));
  EXPECT_EQ(StatField(d.pid(), 7), 0) << "the daemon has no controlling terminal";
  EXPECT_EQ(StatField(d.pid(), 6), d.pid()) << "the daemon leads a session of its own";
  // ^C on the terminal reaches nobody in the daemon.
  ASSERT_EQ(write(master, "\x03\x1c", 2), 2);
  ASSERT_TRUE(d.Barrier());
  EXPECT_FALSE(d.WaitForExit(0)) << "the daemon is still running";
  nlohmann::json ping = d.Call({{"op", "ping"}});
  EXPECT_EQ(ping.value("ok", false), true) << ping.dump();
  close(master);
}

// The daemon (root) opens a job's log with its owner's rights: a log path that its owner turned
// into a way into a folder only root may enter is refused, and what is in there is never shown.
TEST(DaemonLogs, LogsAreOpenedWithTheOwnersRightsNotRoots) {
  if (!CanSwitchUsers()) GTEST_SKIP() << "needs root and setpriv to act as another user";
  std::string why;
  auto user = EnsureTestUser("gpulane-test-a", &why);
  if (!user) GTEST_SKIP() << why;
  TestDaemon d({.system_mode = true});
  const fs::path home = d.UserDir(*user), logs = home / "logs";
  fs::create_directories(logs);
  ASSERT_EQ(chown(logs.c_str(), user->uid, user->gid), 0);
  RunResult submitted = d.GpulaneAs(*user, {"submit", "-o", (logs / "out.log").string(), "--", "echo", "mine"});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.err;
  const std::string id = std::to_string(std::stoll(submitted.out));
  ASSERT_EQ(d.Gpulane({"wait", id}).exit_code, 0);
  ASSERT_EQ(d.GpulaneAs(*user, {"logs", id}).out, "mine\n");
  // A folder only root may enter, holding a file of the user's (say, one root copied there).
  const fs::path private_dir = d.dir() / "root-only";
  fs::create_directories(private_dir);
  fs::permissions(private_dir, fs::perms::owner_all);
  { std::ofstream(private_dir / "out.log") << "root's secret\n"; }
  ASSERT_EQ(chown((private_dir / "out.log").c_str(), user->uid, user->gid), 0);
  fs::rename(logs, home / "logs.was");
  fs::create_directory_symlink(private_dir, logs);
  RunResult refused = d.GpulaneAs(*user, {"logs", id});
  EXPECT_TRUE(IsGpulaneError(refused, 9, "as gpulane-test-a: Permission denied"));
  EXPECT_FALSE(Contains(refused.out + refused.err, "secret"));
}

// A job its time limit stopped ends its log with a line saying so (a new user's finding: `logs`
// just stopped, without a word), and `show` gives the same words as its reason.
TEST(DaemonLogs, AJobStoppedByItsTimeLimitSaysSoInItsLogAndShow) {
  TestDaemon d;
  const std::int64_t id = d.Submit({"--time-limit", "1s", "--", "sh", "-c", "echo started; exec sleep 60"});
  ASSERT_TRUE(d.WaitForState(id, "timeout", 60));
  RunResult logs = d.Gpulane({"logs", std::to_string(id)});
  EXPECT_EQ(logs.exit_code, 0) << logs.err;
  ASSERT_FALSE(Lines(logs.out).empty());
  EXPECT_EQ(Lines(logs.out).front(), "started") << logs.out;
  const std::string line = LineStartingWith(logs.out, "gpulane: stopped");
  EXPECT_TRUE(std::regex_match(line, std::regex(R"(gpulane: stopped by its time limit \(1\.0 s\) after [0-9]+\.[0-9] s)")))
      << logs.out;
  EXPECT_EQ(d.Show(id)["reason"], line.substr(std::string("gpulane: ").size())) << "show says what the log says";
  RunResult show = d.Gpulane({"show", std::to_string(id)});
  EXPECT_TRUE(Contains(show.out, "  reason    " + line.substr(std::string("gpulane: ").size()) + "\n")) << show.out;
}

// A running job that `gpulane cancel` stopped ends its log with a line saying it was cancelled
// (the supervisor knows it from the daemon's marked SIGTERM), and `show` says who cancelled it.
TEST(DaemonLogs, ACancelledJobSaysSoInItsLogAndShowSaysWho) {
  TestDaemon d;
  const std::int64_t id = d.Submit({"--", "sh", "-c", "echo started; exec sleep 60"});
  ASSERT_TRUE(d.WaitForState(id, "running"));
  ASSERT_TRUE(Eventually([&] { return Contains(d.Gpulane({"logs", std::to_string(id)}).out, "started\n"); }, 30));
  RunResult cancel = d.Gpulane({"cancel", std::to_string(id)});
  ASSERT_EQ(cancel.exit_code, 0) << cancel.err;
  EXPECT_EQ(d.Gpulane({"wait", std::to_string(id)}).exit_code, 128 + SIGTERM) << "its command's own end";
  RunResult logs = d.Gpulane({"logs", std::to_string(id)});
  const std::string line = LineStartingWith(logs.out, "gpulane: job");
  const std::string id_text = std::to_string(id);
  EXPECT_TRUE(std::regex_match(line, std::regex("gpulane: job " + id_text + R"( cancelled after [0-9]+\.[0-9] s: SIGTERM sent )"
                                                R"(to its process group \(who cancelled it: gpulane show )" + id_text + R"(\))")))
      << logs.out;
  const nlohmann::json shown = d.Show(id);
  EXPECT_EQ(shown["state"], "cancelled");
  EXPECT_EQ(shown["reason"], "cancelled by " + shown["user"].get<std::string>()) << shown.dump();
}

// A new user's trial: `gpulane logs N` of a job that has no log printed nothing and exited 0. A job
// whose log could not be created, or an array task cancelled before it ran, says why on stderr in
// one line (exit 12: no output to print for a job in that state).
TEST(DaemonLogs, AJobWithNoLogSaysWhyInsteadOfPrintingNothing) {
  TestDaemon d;
  const fs::path nowhere = d.work() / "no-such-folder" / "out.log";
  const std::int64_t failed = d.Submit({"-o", nowhere.string(), "--", "echo", "hi"});
  ASSERT_TRUE(d.WaitForState(failed, "failed", 30));
  RunResult logs = d.Gpulane({"logs", std::to_string(failed)});
  EXPECT_TRUE(IsGpulaneError(logs, 12, fmt::format("job {} has no output: ", failed)));
  EXPECT_TRUE(Contains(logs.err, nowhere.string())) << "names the log it could not create: " << logs.err;
  RunResult array = d.Gpulane({"submit", "--hold", "--array", "0-1", "--", "echo", "hi"});
  ASSERT_EQ(array.exit_code, 0) << array.err;
  const std::string task = Lines(array.out).at(0) + "_1";
  ASSERT_EQ(d.Gpulane({"cancel", task}).exit_code, 0);
  RunResult never = d.Gpulane({"logs", task});
  EXPECT_TRUE(IsGpulaneError(never, 12, fmt::format("job {} has no output: it never ran (cancelled: cancelled by {})", task,
                                                    UserName(getuid()))));
}

// The default log is created in the submitting user's directory: one they cannot write is refused
// at submit (one line, the fix: -o or cd), not after the job's wait in the queue.
TEST(DaemonLogs, SubmitFromAFolderTheUserCannotWriteIsRefusedNamingTheFix) {
  if (!CanSwitchUsers()) GTEST_SKIP() << "needs root and setpriv to act as another user (root may write anywhere)";
  std::string why;
  auto user = EnsureTestUser("gpulane-test-a", &why);
  if (!user) GTEST_SKIP() << why;
  TestDaemon d({.system_mode = true});
  const fs::path home = d.UserDir(*user);
  fs::permissions(home, fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read | fs::perms::group_exec |
                            fs::perms::others_read | fs::perms::others_exec);
  RunResult refused = d.GpulaneAs(*user, {"submit", "--", "echo", "hi"});
  EXPECT_TRUE(IsGpulaneError(refused, 2, fmt::format("in {}: Permission denied: give -o PATH", home.string())));
  const fs::path elsewhere = d.dir() / "elsewhere.log";
  RunResult with_o = d.GpulaneAs(*user, {"submit", "-o", elsewhere.string(), "--", "echo", "hi"});
  EXPECT_EQ(with_o.exit_code, 0) << "-o names a file elsewhere: " << with_o.err;
  fs::permissions(home, fs::perms::owner_all, fs::perm_options::add);
}

}  // namespace
}  // namespace gpulane::test
