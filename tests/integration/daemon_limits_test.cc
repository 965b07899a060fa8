// Per-user limits ([limits] in the machine's config) through a system-mode daemon and two users:
// a flood of submissions is refused once over limits.max_queued (exit 14) while another user's
// submissions go on; a user at limits.max_gpus gets no more GPUs, and her waiting job keeps none
// from the other user; a user over limits.max_gpu_hours_per_day waits while the other user's and
// root's jobs start; time limits are filled in and bounded. Root has no limits. The users'
// own commands read no config file here (GPULANE_CONFIG unset): what is checked is the daemon's
// own enforcement, which a client cannot skip. Needs root and setpriv; skipped otherwise.
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

TEST_F(DaemonLimits, AUserAtMaxGpusWaitsWithoutKeepingAGpuFromTheOtherUser) {
  Start("[limits]\nmax_gpus = 1\n");
  const fs::path gate = d_->UserDir(a_) / "gate";
  const std::string until_gate = "while [ ! -e " + gate.string() + " ]; do sleep 0.02; done";
  const std::int64_t first = SubmitAs(a_, {"-g", "1", "--", "sh", "-c", until_gate});
  ASSERT_TRUE(d_->WaitForState(first, "running"));
  const std::int64_t second = SubmitAs(a_, {"-g", "1", "--", "true"});
  ASSERT_TRUE(Eventually([&] { return Contains(d_->Show(second).value("reason", ""), "limits.max_gpus"); }))
      << d_->Show(second).dump();
  EXPECT_EQ(d_->Show(second)["reason"], a_.name + " holds 1 GPU of the 1 limits.max_gpus allows");
  const std::int64_t bobs = SubmitAs(b_, {"-g", "1", "--", "true"});
  ASSERT_TRUE(d_->WaitForState(bobs, "completed")) << "the free GPU is bob's: alice's waiting job holds nothing";
  EXPECT_EQ(d_->State(second), "pending");
  RunResult too_many = As(a_, {"submit", "-g", "2", "--", "true"});
  EXPECT_TRUE(IsGpulaneError(too_many, 2, "-g 2: " + a_.name + " may hold at most 1 GPUs at once (limits.max_gpus)"));
  std::ofstream(gate).put('x');
  EXPECT_TRUE(d_->WaitForState(second, "completed")) << "once her first job ended, her second runs";
}

TEST_F(DaemonLimits, AUserOverMaxGpuHoursPerDayWaitsWhileOthersAndRootStart) {
  // About one GPU-second a day: a job that holds a GPU for 2 s takes her over it.
  Start("[limits]\nmax_gpu_hours_per_day = 0.0003\n");
  const std::int64_t first = SubmitAs(a_, {"-g", "1", "--", "sleep", "2"});
  ASSERT_TRUE(d_->WaitForState(first, "completed")) << "under the limit when it was queued";
  const std::int64_t second = SubmitAs(a_, {"-g", "1", "--", "true"});
  ASSERT_TRUE(Eventually([&] { return Contains(d_->Show(second).value("reason", ""), "limits.max_gpu_hours_per_day"); }))
      << d_->Show(second).dump();
  // What she sees in her own queue.
  RunResult queue = As(a_, {"queue", "--json"});
  ASSERT_EQ(queue.exit_code, 0) << queue.err;
  std::string reason;
  for (const json& job : json::parse(queue.out)) if (job["id"] == second) reason = job.value("reason", "");
  EXPECT_TRUE(Contains(reason, a_.name + " used 0.000")) << reason;  // 2 s and a little: 0.000556 GPU-hours or so
  EXPECT_TRUE(Contains(reason, " of the 0.0003 GPU-hours limits.max_gpu_hours_per_day allows in the last 24 h; " + a_.name +
                                   "'s next job can start in about 2"))  // 23h 59m or 24h 00m
      << reason;
  const std::int64_t bobs = SubmitAs(b_, {"-g", "1", "--", "true"});
  EXPECT_TRUE(d_->WaitForState(bobs, "completed")) << "bob's own use is his";
  const std::int64_t roots = d_->Submit({"-g", "1", "--", "sleep", "2"});
  ASSERT_TRUE(d_->WaitForState(roots, "completed")) << "root has no limits";
  const std::int64_t roots_next = d_->Submit({"-g", "1", "--", "true"});
  EXPECT_TRUE(d_->WaitForState(roots_next, "completed")) << "root's use holds nothing back";
  EXPECT_EQ(d_->State(second), "pending");
}

TEST_F(DaemonLimits, TimeLimitsAreFilledInAndBounded) {
  Start("[limits]\nmax_time_limit = \"1h\"\ndefault_time_limit = \"30m\"\n");
  RunResult longer = As(a_, {"submit", "--time-limit", "2h", "--", "true"});
  EXPECT_TRUE(IsGpulaneError(longer, 2, "--time-limit 2h 00m: " + a_.name + " may ask for at most 1h 00m (limits.max_time_limit)"));
  const std::int64_t plain = SubmitAs(a_, {"--hold", "--", "true"});
  EXPECT_EQ(d_->Show(plain)["spec"]["request"]["time_limit_s"], 1800.0) << "the default time limit";
  const std::int64_t roots = d_->Submit({"--hold", "--time-limit", "5h", "--", "true"});
  EXPECT_GT(roots, 0) << "root has no limits";
}

}  // namespace
}  // namespace gpulane::test
