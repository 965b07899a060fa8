// Two users and root against one system-mode daemon (root's `gpulane daemon`): jobs run as the user
// who submitted them; a user cannot cancel, hold, release, read the logs of or see the environment of
// another user's job (exit 9, one error line; the refusal is logged); root can. Needs root (it
// creates two test users and runs gpulane as them through setpriv); skipped otherwise. Who may
// cancel what by name or id and who may raise a priority are the daemon's decisions alone, tested
// in-process with peers of any uid: tests/unit/daemon_inproc_users_test.cc.
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

std::string Id(std::int64_t id) { return std::to_string(id); }

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

TEST_F(DaemonUsers, OtherUsersCannotTouchAJobButRootCan) {
  TestDaemon& d = *d_;
  const std::int64_t held = SubmitAs(a_, {"--hold", "--name", "a-held", "--", "sh", "-c", "id -u"}, {{"SECRET", "s3cr3t"}});
  const std::int64_t done = SubmitAs(a_, {"--", "sh", "-c", "echo private output"}, {{"SECRET", "s3cr3t"}});
  ASSERT_EQ(d.Gpulane({"wait", Id(done)}).exit_code, 0);

  // User B: refused, exit 9, one line.
  EXPECT_TRUE(IsGpulaneError(d.GpulaneAs(b_, {"cancel", Id(held)}), 9, a_.name));
  EXPECT_TRUE(IsGpulaneError(d.GpulaneAs(b_, {"hold", Id(held)}), 9, a_.name));
  EXPECT_TRUE(IsGpulaneError(d.GpulaneAs(b_, {"release", Id(held)}), 9, a_.name));
  EXPECT_TRUE(IsGpulaneError(d.GpulaneAs(b_, {"logs", Id(done)}), 9, a_.name));
  EXPECT_TRUE(IsGpulaneError(d.GpulaneAs(b_, {"cancel", "--user", a_.name}), 9, a_.name));
  RunResult show_b = d.GpulaneAs(b_, {"show", "--json", Id(held)});
  EXPECT_EQ(show_b.exit_code, 0) << show_b.err;
  EXPECT_FALSE(Contains(show_b.out, "s3cr3t")) << "B sees A's environment: " << show_b.out;
  EXPECT_FALSE(json::parse(show_b.out)["spec"]["env"].is_array());
  // Nothing B tried changed the job; every refusal is in the daemon's log.
  EXPECT_EQ(d.State(held), "held");
  EXPECT_EQ(d.State(done), "completed");
  EXPECT_TRUE(Contains(d.Log(), fmt::format("refused: {} (uid {}) may not cancel job {}", b_.name, b_.uid, held)))
      << d.Log();
  EXPECT_TRUE(Contains(d.Log(), fmt::format("refused: {} (uid {}) may not read the logs of job {}", b_.name, b_.uid, done)));

  // User A: its own job.
  RunResult show_a = d.GpulaneAs(a_, {"show", "--json", Id(held)});
  EXPECT_TRUE(Contains(show_a.out, "SECRET=s3cr3t")) << show_a.out;
  EXPECT_EQ(d.GpulaneAs(a_, {"logs", Id(done)}).out, "private output\n");

  // Root: an admin acts on every job.
  EXPECT_EQ(d.Gpulane({"logs", Id(done)}).out, "private output\n");
  EXPECT_TRUE(Contains(d.Gpulane({"show", "--json", Id(held)}).out, "SECRET=s3cr3t"));
  RunResult release = d.Gpulane({"release", Id(held)});
  EXPECT_EQ(release.exit_code, 0) << release.err;
  ASSERT_EQ(d.Gpulane({"wait", Id(held)}).exit_code, 0);
  EXPECT_EQ(d.Gpulane({"logs", Id(held)}).out, fmt::format("{}\n", a_.uid)) << "released by root, run as A";
  const std::int64_t second = SubmitAs(a_, {"--hold", "--", "true"});
  EXPECT_EQ(d.Gpulane({"hold", Id(second)}).exit_code, 12) << "already held";
  RunResult cancel = d.Gpulane({"cancel", Id(second)});
  EXPECT_EQ(cancel.exit_code, 0) << cancel.err;
  EXPECT_EQ(d.State(second), "cancelled");
}

}  // namespace
}  // namespace gpulane::test
