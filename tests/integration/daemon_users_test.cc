// Two users and root against one system-mode daemon (root's `gpulane daemon`): jobs run as the user
// who submitted them, with their uid, groups and environment, and write their logs as that user.
// Needs root (it creates two test users and runs gpulane as them through setpriv); skipped
// otherwise. What a user may do to another user's job (cancel, hold, release, logs, the environment
// in show) and who may raise a priority are the daemon's decisions alone, tested in-process with
// peers of any uid: tests/unit/daemon_inproc_users_test.cc; the exit code 9 of each refusal
// through the binary: DaemonExitCodes.AnotherUsersJobIs9.
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fmt/format.h>
#include <memory>
#include <thread>

#include "support/daemon_fixture.h"
#include "support/text.h"

namespace gpulane::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class DaemonUsers : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = TwoTestUsers(&a_, &b_)) GTEST_SKIP() << *why;
    d_ = std::make_unique<TestDaemon>(DaemonOptions{.system_mode = true});
  }

  // `gpulane submit ARGS...` as `user`; the job id, or -1 and a failure.
  std::int64_t SubmitAs(const TestUser& user, const std::vector<std::string>& args, const Env& env = {}) {
    std::vector<std::string> argv = {"submit"};
    argv.insert(argv.end(), args.begin(), args.end());
    RunResult r = d_->GpulaneAs(user, argv, env);
    if (r.exit_code != 0 || r.out.empty()) {
      ADD_FAILURE() << user.name << ": gpulane submit failed: exit " << r.exit_code << ": " << r.err;
      return -1;
    }
    return std::stoll(r.out);
  }

  TestUser a_, b_;
  std::unique_ptr<TestDaemon> d_;
};

TEST_F(DaemonUsers, JobsRunAsTheUserWhoSubmittedThem) {
  TestDaemon& d = *d_;
  const std::int64_t ja = SubmitAs(a_, {"--", "sh", "-c", "id -u; id -g; id -G; echo \"$SECRET\""}, {{"SECRET", "a-1"}});
  const std::int64_t jb = SubmitAs(b_, {"--", "sh", "-c", "id -u; echo \"$SECRET\""}, {{"SECRET", "b-2"}});
  RunResult wait = d.Gpulane({"wait", Id(ja), Id(jb)});
  ASSERT_EQ(wait.exit_code, 0) << wait.out << wait.err;
  RunResult logs_a = d.GpulaneAs(a_, {"logs", Id(ja)});
  EXPECT_EQ(logs_a.exit_code, 0) << logs_a.err;
  EXPECT_EQ(logs_a.out, fmt::format("{}\n{}\n{}\na-1\n", a_.uid, a_.gid, a_.gid))
      << "the job has the user's uid, gid and groups, not root's";
  RunResult logs_b = d.GpulaneAs(b_, {"logs", Id(jb)});
  EXPECT_EQ(logs_b.out, fmt::format("{}\nb-2\n", b_.uid));
  // The log is the user's file, in the folder the user submitted from.
  struct stat st {};
  ASSERT_EQ(stat((d.UserDir(a_) / fmt::format("gpulane-{}.out", ja)).c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, a_.uid);
  json shown = d.Show(ja);
  EXPECT_EQ(shown["user"], a_.name);
  EXPECT_EQ(shown["uid"], a_.uid);
  // Each user's jobs, by --user.
  json of_b = json::parse(d.GpulaneAs(a_, {"queue", "--json", "--all", "--user", b_.name}).out);
  ASSERT_EQ(of_b.size(), 1u);
  EXPECT_EQ(of_b[0]["id"], jb);
}

}  // namespace
}  // namespace gpulane::test
