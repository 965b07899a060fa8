// Per-user limits (sched/user_limits.h, [limits] in the config): which values a user gets, what
// they refuse, and how the lease line honours limits.max_gpus (sched::Schedule): a request over
// its user's limit waits and reserves nothing, so it keeps no GPU from other users.
#include "sched/user_limits.h"

#include <gtest/gtest.h>

#include "sched/policy.h"
#include "support/config_file.h"
#include "support/idle_gpus.h"

namespace gpulane::sched {
namespace {

using test::IdleGpus;

Config Limits3() {
  Config c;
  c.limits.max_gpus = 2;
  c.limits.max_queued = 100;
  c.limits.max_time_limit_s = 86400;
  c.limits.default_time_limit_s = 3600;
  LimitsConfig alice;
  alice.max_gpus = 8;
  c.user_limits.push_back({"alice", alice});
  LimitsConfig ml, interns;
  ml.max_gpus = 4;
  ml.max_queued = 1000;
  interns.max_gpus = 1;
  c.group_limits.push_back({"ml", ml});
  c.group_limits.push_back({"interns", interns});
  return c;
}

TEST(UserLimits, TheUsersTableThenTheFirstGroupThatSetsAFieldThenTheDefaults) {
  const Config c = Limits3();
  LimitsConfig alice = LimitsOf(c, 1000, "alice", {"ml"});
  EXPECT_EQ(alice.max_gpus, 8u) << "her own table";
  EXPECT_EQ(alice.max_queued, 1000u) << "not in her table: her group ml's";
  EXPECT_EQ(alice.max_time_limit_s, 86400.0) << "nor in ml's: [limits]";
  LimitsConfig bob = LimitsOf(c, 1001, "bob", {"interns", "ml"});
  EXPECT_EQ(bob.max_gpus, 4u) << "ml comes first in the file, whatever order bob's groups are in";
  LimitsConfig carol = LimitsOf(c, 1002, "carol", {"staff"});
  EXPECT_EQ(carol.max_gpus, 2u);
  EXPECT_EQ(carol.default_time_limit_s, 3600.0);
  LimitsConfig root = LimitsOf(c, 0, "root", {"ml"});
  EXPECT_FALSE(root.max_gpus || root.max_queued || root.max_time_limit_s || root.default_time_limit_s) << "root has none";
  EXPECT_TRUE(AnyLimits(c));
  EXPECT_FALSE(AnyLimits(Config{}));
}

TEST(UserLimits, TimeLimitsFillInTheDefaultAndRefuseLongerOnes) {
  const LimitsConfig limits = LimitsOf(Limits3(), 1002, "carol", {});
  Request none;
  ASSERT_TRUE(ApplyTimeLimits(limits, "carol", none).ok());
  EXPECT_EQ(none.time_limit_s, 3600.0);
  Request shorter;
  shorter.time_limit_s = 60;
  ASSERT_TRUE(ApplyTimeLimits(limits, "carol", shorter).ok());
  EXPECT_EQ(shorter.time_limit_s, 60.0);
  Request longer;
  longer.time_limit_s = 2 * 86400;
  Status s = ApplyTimeLimits(limits, "carol", longer);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().kind, ErrorKind::kInvalidArgument);
  EXPECT_EQ(s.error().message, "--time-limit 48h 00m: carol may ask for at most 24h 00m (limits.max_time_limit): ask for less");
}

TEST(UserLimits, QueuedJobsAndGpusOverTheLimitAreRefusedNamingTheWayOut) {
  LimitsConfig limits;
  limits.max_queued = 3;
  limits.max_gpus = 2;
  EXPECT_TRUE(CheckQueuedLimit(limits, "bob", 2, 1).ok());
  Status one = CheckQueuedLimit(limits, "bob", 3, 1);
  ASSERT_FALSE(one.ok());
  EXPECT_EQ(one.error().kind, ErrorKind::kOverLimit);
  EXPECT_EQ(one.error().message,
            "bob has 3 unfinished queued jobs; one more would pass the limit of 3 (limits.max_queued): wait for some to end, "
            "or cancel some");
  EXPECT_FALSE(CheckQueuedLimit(limits, "bob", 0, 4).ok()) << "an array of 4 tasks counts 4";
  EXPECT_TRUE(CheckQueuedLimit(LimitsConfig{}, "bob", 1000000, 1000).ok()) << "no limit";
  EXPECT_EQ(GpuLimitReason(limits, "bob", 1, 1), std::nullopt);
  EXPECT_EQ(GpuLimitReason(limits, "bob", 2, 1), "bob holds 2 GPUs of the 2 limits.max_gpus allows");
  Status never = CheckGpuLimitEver(limits, "bob", 3);
  ASSERT_FALSE(never.ok());
  EXPECT_EQ(never.error().message, "-g 3: bob may hold at most 2 GPUs at once (limits.max_gpus): ask for fewer");
}

// limits.max_gpu_hours_per_day: GPU-seconds in the last 24 h, when enough leaves the window, and
// the reason. Times are plain numbers (no clock): now is T.
constexpr double kT = 1'700'000'000, kH = 3600;

TEST(UserLimits, GpuHoursPerDayIsResolvedLikeTheOtherKeysAndRootHasNone) {
  Config c = Limits3();
  c.limits.max_gpu_hours_per_day = 24;
  LimitsConfig interns;
  interns.max_gpu_hours_per_day = 2.5;
  c.group_limits.push_back({"interns", interns});
  EXPECT_EQ(LimitsOf(c, 1000, "alice", {"ml"}).max_gpu_hours_per_day, 24.0) << "[limits]";
  EXPECT_EQ(LimitsOf(c, 1001, "bob", {"interns"}).max_gpu_hours_per_day, 2.5) << "the first group table that sets it";
  EXPECT_EQ(LimitsOf(c, 0, "root", {"interns"}).max_gpu_hours_per_day, std::nullopt) << "root has none";
  Config only;
  only.user_limits.push_back({"carol", interns});
  EXPECT_TRUE(AnyLimits(only));
}

TEST(UserLimits, WindowUsageIsTheGpusTimesThePartOfTheRunInTheLast24Hours) {
  EXPECT_EQ(WindowUsageGpuS({"alice", kT - 3 * kH, kT - kH, 2}, kT), 2 * 2 * kH) << "all of it within the window";
  EXPECT_EQ(WindowUsageGpuS({"alice", kT - 30 * kH, kT - 20 * kH, 1}, kT), 4 * kH) << "only its last 4 hours";
  EXPECT_EQ(WindowUsageGpuS({"alice", kT - 50 * kH, kT - 25 * kH, 8}, kT), 0) << "ended before the window";
  EXPECT_EQ(WindowUsageGpuS({"alice", kT - 90, std::nullopt, 1}, kT), 90) << "running: so far";
  EXPECT_EQ(WindowUsageGpuS({"alice", kT - 48 * kH, std::nullopt, 1}, kT), 24 * kH) << "running for two days: the window's";
  const double quarter = GpuShareOfRequest(1, 20ULL << 30, 80ULL << 30);
  EXPECT_EQ(WindowUsageGpuS({"alice", kT - 4 * kH, kT, quarter}, kT), kH) << "--mem 20GiB of 80: a quarter of a GPU";
  EXPECT_EQ(WindowUsageGpuS({"alice", kT - kH, kT + kH, 1}, kT), kH) << "nothing after now";
  EXPECT_EQ(WindowUsageGpuS({"alice", kT - 2 * kH, kT - kH, 1}, kT, 1.5 * kH), 0.5 * kH) << "another window";
}

TEST(UserLimits, TheNextStartIsWhenEnoughUseHasLeftTheWindow) {
  // 4 GPUs from 13 h to 7 h ago: 24 GPU-h. From 11 h on the window's start passes through the run
  // and takes 4 GPU-s a second: 20 GPU-h are left 12 h from now.
  const std::vector<UsageRecord> ended = {{"alice", kT - 13 * kH, kT - 7 * kH, 4}};
  EXPECT_DOUBLE_EQ(*WindowUsageBelowInS(ended, 20 * kH, kT), 12 * kH);
  EXPECT_EQ(WindowUsageBelowInS(ended, 25 * kH, kT), 0.0) << "below it now";
  EXPECT_DOUBLE_EQ(*WindowUsageBelowInS(ended, 24 * kH, kT), 11 * kH) << "at it: just after the first second leaves";
  // 2 GPUs from 20 h to 10 h ago (20 GPU-h) and one running for an hour: 21 GPU-h, 4 more in the
  // next 4 h, then 1 GPU-h less an hour: 16 GPU-h after 13 h.
  const std::vector<UsageRecord> mixed = {{"alice", kT - 20 * kH, kT - 10 * kH, 2}, {"alice", kT - kH, std::nullopt, 1}};
  EXPECT_DOUBLE_EQ(*WindowUsageBelowInS(mixed, 16 * kH, kT), 13 * kH);
  EXPECT_EQ(WindowUsageBelowInS(mixed, 15 * kH, kT), std::nullopt) << "the running job alone keeps it at 15 or above";
  const std::vector<UsageRecord> running = {{"alice", kT - 30 * kH, std::nullopt, 1}};
  EXPECT_EQ(WindowUsageBelowInS(running, 24 * kH, kT), std::nullopt) << "a job running all day: never while it runs";
  EXPECT_EQ(WindowUsageBelowInS({}, 1, kT), 0.0);
}

TEST(UserLimits, AUserAtOrOverTheGpuHoursLimitWaitsSayingHowMuchAndHowLong) {
  LimitsConfig limits;
  EXPECT_EQ(GpuHoursLimitReason(limits, "alice", 1e9, std::nullopt), std::nullopt) << "no limit";
  limits.max_gpu_hours_per_day = 24;
  EXPECT_EQ(GpuHoursLimitReason(limits, "alice", 23.9 * kH, 0.0), std::nullopt) << "under it";
  EXPECT_EQ(GpuHoursLimitReason(limits, "alice", 24.3 * kH, 72 * 60.0),
            "alice used 24.3 of the 24 GPU-hours limits.max_gpu_hours_per_day allows in the last 24 h; alice's next job "
            "can start in about 1h 12m");
  EXPECT_EQ(GpuHoursLimitReason(limits, "alice", 24 * kH, std::nullopt),
            "alice used 24.0 of the 24 GPU-hours limits.max_gpu_hours_per_day allows in the last 24 h")
      << "at it; when is not known (her running jobs alone keep her there)";
  limits.max_gpu_hours_per_day = 0.0003;
  EXPECT_EQ(GpuHoursLimitReason(limits, "bob", 2, 1.0),
            "bob used 0.000556 of the 0.0003 GPU-hours limits.max_gpu_hours_per_day allows in the last 24 h; bob's next "
            "job can start in about 1.0 s");
}

Request Of(std::uint32_t uid, std::string user, unsigned count) {
  Request r;
  r.uid = uid;
  r.user = std::move(user);
  r.count = count;
  return r;
}

TEST(UserLimits, InTheLineARequestOverItsUsersLimitWaitsAndReservesNothing) {
  Limits limits;
  limits.max_gpus_by_uid = {{1000, 2}};
  limits.gpus_in_use_by_uid = {{1000, 1}};
  // alice (1000) holds 1 of her 2; her -g 2 would make 3: it waits, and bob's -g 4 behind it takes
  // every free GPU it would otherwise have reserved.
  auto d = Schedule(IdleGpus(4), {Of(1000, "alice", 2), Of(1001, "bob", 4)}, limits);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_FALSE(d[0].granted);
  EXPECT_TRUE(d[0].gpus.empty()) << "no reservation";
  EXPECT_EQ(d[0].reasons, std::vector<std::string>{"alice holds 1 GPU of the 2 limits.max_gpus allows"});
  EXPECT_FALSE(d[0].impossible);
  EXPECT_TRUE(d[1].granted);
  EXPECT_EQ(d[1].gpus.size(), 4u);
  // Grants of one decision count: her first -g 1 fits, the second does not.
  auto two = Schedule(IdleGpus(4), {Of(1000, "alice", 1), Of(1000, "alice", 1)}, limits);
  EXPECT_TRUE(two[0].granted);
  EXPECT_FALSE(two[1].granted);
  EXPECT_EQ(two[1].reasons, std::vector<std::string>{"alice holds 2 GPUs of the 2 limits.max_gpus allows"});
  // The simulator's grants-only mode grants the same.
  limits.grants_only = true;
  auto quick = Schedule(IdleGpus(4), {Of(1000, "alice", 1), Of(1000, "alice", 1), Of(1001, "bob", 3)}, limits);
  ASSERT_GE(quick.size(), 1u);
  EXPECT_TRUE(quick[0].granted);
  ASSERT_EQ(quick.size(), 3u);
  EXPECT_FALSE(quick[1].granted);
  EXPECT_TRUE(quick[2].granted);
}

// The [limits] tables as a config file gives them, and their mistakes.
class UserLimitsConfigFile : public test::ConfigFileTest {};

TEST_F(UserLimitsConfigFile, TheConfigTables) {
  Config config;
  Status s = Load(
      "[limits]\nmax_gpus = 2\nmax_queued = 500\nmax_time_limit = \"3d\"\ndefault_time_limit = \"1d\"\n"
      "max_gpu_hours_per_day = 24\n[limits.users.alice]\nmax_gpus = 8\nmax_gpu_hours_per_day = 100.5\n"
      "[limits.groups.ml]\nmax_queued = 2000\n",
      config);
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(config.limits.max_gpus, 2u);
  EXPECT_EQ(config.limits.max_queued, 500u);
  EXPECT_EQ(config.limits.max_time_limit_s, 3 * 86400.0);
  EXPECT_EQ(config.limits.default_time_limit_s, 86400.0);
  ASSERT_EQ(config.user_limits.size(), 1u);
  EXPECT_EQ(config.user_limits[0].first, "alice");
  EXPECT_EQ(config.user_limits[0].second.max_gpus, 8u);
  EXPECT_EQ(config.limits.max_gpu_hours_per_day, 24.0) << "an integer is a number";
  EXPECT_EQ(config.user_limits[0].second.max_gpu_hours_per_day, 100.5);
  EXPECT_EQ(config.group_limits[0].second.max_gpu_hours_per_day, std::nullopt);
  ASSERT_EQ(config.group_limits.size(), 1u);
  EXPECT_EQ(config.group_limits[0].second.max_queued, 2000u);
  struct Bad {
    std::string text, says;
  };
  for (const Bad& b : std::vector<Bad>{
           {"[limits]\nmax_gpu = 2\n", "unknown key limits.max_gpu: did you mean limits.max_gpus?"},
           {"[limits]\nmax_gpus = -1\n", "limits.max_gpus must be an integer from 0 to 1024"},
           {"[limits]\nmax_queued = \"many\"\n", "limits.max_queued must be an integer"},
           {"[limits]\nmax_time_limit = 3600\n", "limits.max_time_limit must be a duration from 1s to 365d"},
           {"[limits]\nmax_time_limit = \"1h\"\ndefault_time_limit = \"2h\"\n", "limits.default_time_limit is longer than its max_time_limit"},
           {"[limits]\nmax_gpu_hours_per_day = 0\n",
            "limits.max_gpu_hours_per_day must be a number of GPU-hours above 0 and at most 100000, like 24"},
           {"[limits]\nmax_gpu_hours_per_day = 100001\n", "limits.max_gpu_hours_per_day must be a number of GPU-hours"},
           {"[limits.groups.ml]\nmax_gpu_hours_per_day = \"24h\"\n",
            "limits.groups.ml.max_gpu_hours_per_day must be a number of GPU-hours above 0"},
           {"[limits]\nmax_gpu_hours_per_day = nan\n", "limits.max_gpu_hours_per_day must be a number"},
           {"[limits]\nmax_gpu_hour_per_day = 1\n", "did you mean limits.max_gpu_hours_per_day?"},
           {"[limits]\ngpu_budget = 1\n", "default_time_limit, max_gpu_hours_per_day, users.NAME, groups.NAME)"},
           {"[limits.users.bob]\nmax_gpus = 1\nqueue = 3\n", "unknown key limits.users.bob.queue"},
           {"[limits.users]\nbob = 3\n", "limits.users.bob must be a table"},
       }) {
    Config c;
    Status bad = Load(b.text, c);
    ASSERT_FALSE(bad.ok()) << b.text;
    EXPECT_NE(bad.error().message.find(b.says), std::string::npos) << bad.error().message;
    EXPECT_EQ(bad.error().message.find('\n'), std::string::npos);
  }
  Config user;
  Status untrusted = Load("[limits]\nmax_gpus = 100\n", user, /*trusted=*/false);
  ASSERT_FALSE(untrusted.ok()) << "a user cannot lift her own limits";
  EXPECT_NE(untrusted.error().message.find("limits may only be set in /etc/gpulane/config.toml"), std::string::npos);
}

}  // namespace
}  // namespace gpulane::sched
