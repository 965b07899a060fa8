// Per-user limits ([limits] in the machine's config) end to end: a system-mode daemon and two real
// users, whose flood of submissions is refused once over limits.max_queued (exit 14, one line)
// while another user's submissions go on. The users' own commands read no config file here
// (GPULANE_CONFIG unset): what is checked is the daemon's own enforcement, which a client cannot
// skip. max_gpus, max_gpu_hours_per_day and the time limits are the daemon's decisions alone and
// are tested in-process (tests/unit/daemon_inproc_users_test.cc). Needs root and setpriv; skipped
// otherwise.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>

#include "support/daemon_fixture.h"
#include "support/text.h"

namespace gpulane::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class DaemonLimits : public ::testing::Test {
 protected:
  void Start(const std::string& config) {
    if (auto why = TwoTestUsers(&a_, &b_)) GTEST_SKIP() << *why;
    DaemonOptions options;
    options.system_mode = true;
    options.config = config;
    d_ = std::make_unique<TestDaemon>(options);
  }
  RunResult As(const TestUser& user, const std::vector<std::string>& args) {
    return d_->GpulaneAs(user, args, {{"GPULANE_CONFIG", "\x01unset"}});
  }
  std::int64_t SubmitAs(const TestUser& user, const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"submit"};
    argv.insert(argv.end(), args.begin(), args.end());
    RunResult r = As(user, argv);
    if (r.exit_code != 0 || r.out.empty()) {
      ADD_FAILURE() << user.name << ": gpulane submit failed: exit " << r.exit_code << ": " << r.err;
      return -1;
    }
    return std::stoll(r.out);
  }
  TestUser a_, b_;
  std::unique_ptr<TestDaemon> d_;
};

TEST_F(DaemonLimits, AFloodOfSubmissionsIsRefusedOverMaxQueuedAndTheOtherUserIsNot) {
  Start("[limits]\nmax_queued = 3\n");
  for (int i = 0; i < 3; ++i) ASSERT_GT(SubmitAs(a_, {"--hold", "--", "true"}), 0);
  RunResult over = As(a_, {"submit", "--hold", "--", "true"});
  EXPECT_TRUE(IsGpulaneError(over, 14,
                             a_.name + " has 3 unfinished queued jobs; one more would pass the limit of 3 (limits.max_queued): "
                                       "wait for some to end, or cancel some"));
  EXPECT_EQ(LineCount(over.err), 1) << over.err;
  EXPECT_TRUE(IsGpulaneError(As(a_, {"submit", "--hold", "--array", "0-1", "--", "true"}), 14, "2 more would pass"));
  EXPECT_GT(SubmitAs(b_, {"--hold", "--", "true"}), 0) << "bob's own count is his";
  EXPECT_GT(d_->Submit({"--hold", "--", "true"}), 0) << "root has no limits";
  json mine = json::array();
  for (const json& job : d_->Queue()) if (job["user"] == a_.name) mine.push_back(job);
  EXPECT_EQ(mine.size(), 3u) << "nothing of the refused submissions was queued: " << mine.dump();
  // Once one of hers ends (cancelled here), she may queue one more.
  ASSERT_FALSE(mine.empty());
  ASSERT_EQ(As(a_, {"cancel", std::to_string(mine[0]["id"].get<std::int64_t>())}).exit_code, 0);
  EXPECT_GT(SubmitAs(a_, {"--hold", "--", "true"}), 0);
}

}  // namespace
}  // namespace gpulane::test
